"""A span's with-block exited on another thread (issue #18, item 10), in a real process under both
recorders, with a figure."""

import json

import pytest

from .figures import record_figure
from .processes import start

pytest.importorskip("opentelemetry.sdk", reason="needs OpenTelemetry: pip install 'lens-telemetry[otel]'")


def test_a_with_block_exited_on_another_thread_warns_once_and_leaves_no_foreign_current_span(recorder):
    """Regression: a `with` block exited on another thread left its span current on the
    first thread, with no warning (and the SDK logged "Failed to detach context")."""
    proc = start("foreign_exit.py", LENS_RECORDER=recorder)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr[-3000:]
    seen = json.loads(stdout.strip().splitlines()[-1])
    record_figure(f"span exited on another thread ({recorder})", exits_elsewhere=3, warnings=len(seen["warnings"]),
                  next_span_parented_on_outer=seen["next_parent_is_outer"],
                  stale_span_current_after=not seen["current_is_outer_after"])
    assert seen["inner_ended"] and seen["next_parent_is_outer"] and seen["current_is_outer_after"]
    assert not seen["current_after_outer_valid"]  # the outer with-block restored the start
    assert len(seen["warnings"]) == 1 and "Failed to detach" not in stderr
