"""record_figure: a fault case's figures as one JSON line, printed and appended to $LENS_FAULT_FIGURES."""

import json
import os

__all__ = ["record_figure"]


def record_figure(case: str, **numbers) -> dict:
    """Print ``case: <value> <name>, ...`` and, when ``LENS_FAULT_FIGURES`` names a file,
    append ``{"case": case, **numbers}`` to it as a JSON line (readable whatever pytest
    does with stdout). Returns the record."""
    record = {"case": case, **numbers}
    path = os.environ.get("LENS_FAULT_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
    print(f"{case}: " + ", ".join(f"{value} {name.replace('_', ' ')}" for name, value in numbers.items()))
    return record
