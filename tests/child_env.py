"""The environment test children run in: settings of the outer run dropped, the implementation switches kept."""

import os

#: Variables a test run sets for every process it starts: which gate and which recorder the
#: whole run exercises (CI runs the suite once per choice).
IMPLEMENTATION_SWITCHES = ("LENS_PURE_PYTHON", "LENS_RECORDER")


def without_settings(prefixes=("LENS_", "OTEL_"), environ=None) -> dict:
    """``os.environ`` less every variable starting with ``prefixes``, except the
    implementation switches."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if not k.startswith(tuple(prefixes)) or k in IMPLEMENTATION_SWITCHES}
