"""Parent cycles in hostile input: the report answers within --memory-limit, however many spans loop."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
T0 = 1_760_000_000 * 10**9
RESOURCE = '{"attributes":[{"key":"service.name","value":{"stringValue":"loop"}}]}'


def _write_loops(path: Path, spans: int, parent_of) -> None:
    """One trace of ``spans`` spans, 512 a line, span i's parent being ``parent_of(i)``."""
    with open(path, "w") as out:
        for first in range(0, spans, 512):
            body = ",".join(
                '{"traceId":"%032x","spanId":"%016x","parentSpanId":"%016x","name":"s%d","kind":1,'
                '"startTimeUnixNano":"%d","endTimeUnixNano":"%d"}'
                % (1, i + 1, parent_of(i) + 1, i % 7, T0 + i * 1000, T0 + i * 1000 + 500)
                for i in range(first, min(spans, first + 512)))
            out.write('{"resourceSpans":[{"resource":%s,"scopeSpans":[{"scope":{"name":"t"},"spans":[%s]}]}]}\n'
                      % (RESOURCE, body))


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["pairs", "one-ring"])
def test_a_million_spans_on_parent_cycles_stay_within_the_memory_limit(tmp_path, shape):
    """Regression: 1M spans in parent cycles (A->B->A pairs, or one 1M-long ring) peaked at
    485-806 MiB under --memory-limit 256MB (1M acyclic spans: ~170 MiB): the cycle finder held
    every cyclic span's id and parent as Python ints in a dict. Every span is still counted, and
    each example names its cycle's length."""
    spans = 1_000_000
    trace = tmp_path / "loops.jsonl"
    _write_loops(trace, spans, (lambda i: i ^ 1) if shape == "pairs" else (lambda i: (i + 1) % spans))
    # VmHWM of the report's own process (ru_maxrss would carry a forked parent's size across exec)
    code = ("import sys; from lens_report.cli import main; rc = main([sys.argv[1], '--json', '--memory-limit', "
            "'256MB']); hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
            "sys.stderr.write('peak %d\\n' % int(hwm.split()[1])); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(trace)], capture_output=True, text=True, timeout=600,
                          cwd=REPO)
    report = json.loads(done.stdout)
    assert report["violations_by_rule"] == {"parent-cycle": spans}
    length = 2 if shape == "pairs" else spans
    assert report["violations"][0]["reason"] == f"parent ids form a cycle of {length} span(s); no root"
    peak_kib = int(done.stderr.rsplit("peak ", 1)[1])
    assert peak_kib * 1024 <= 256 * 2**20, f"peak RSS {peak_kib / 1024:.0f} MiB"
