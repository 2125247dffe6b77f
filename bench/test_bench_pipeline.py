"""End to end: 200k spans from a tight loop, created and delivered, Lens against the OpenTelemetry
SDK as its own setup builds it. Each side runs in a fresh process (bench/pipeline_run.py) and
reports its own process CPU; the OTLP receiver runs in another process (bench/receiver_run.py).

Rounds alternate Lens and SDK processes so both see the same machine load; the gate
(bench/checks.txt) divides the best Lens round by the best SDK round of the same run. Every
round also checks what was delivered: all 200k spans, none dropped, and the extra memory
the Lens process needed (the issue's bounds: 0 dropped, extra RSS <= 64 MB).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SPANS = int(os.environ.get("LENS_BENCH_PIPELINE_SPANS", "200000"))
ROUNDS = int(os.environ.get("LENS_BENCH_PIPELINE_ROUNDS", "2"))
# the spool check's rounds, each running both sides (the gate takes the median of their ratios)
SPOOL_ROUNDS = int(os.environ.get("LENS_BENCH_SPOOL_ROUNDS", "5"))


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LENS_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


@pytest.fixture(scope="module")
def receiver():
    proc = subprocess.Popen([sys.executable, str(HERE / "receiver_run.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_env())
    endpoints = json.loads(proc.stdout.readline())

    def ask(command):
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        return proc.stdout.readline().strip()

    yield endpoints["http"] + "/v1/traces", ask
    ask_quit = proc.stdin
    ask_quit.write("quit\n")
    ask_quit.flush()
    proc.wait(30)


def _run(side, sink, out):
    proc = subprocess.run([sys.executable, str(HERE / "pipeline_run.py"), side, sink, str(SPANS), str(out)],
                          capture_output=True, text=True, env=_env(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _file_spans(directory):
    count = 0
    for path in Path(directory).rglob("*.jsonl"):
        with open(path) as fh:
            for line in fh:
                if line.startswith('{"resourceSpans"'):
                    count += line.count('"spanId"') - line.count('"name":"lens.telemetry.loss"')
                elif line.strip():
                    count += 1  # the SDK console exporter: one span per line
    return count


def _pair(benchmark, lens_side, sink, receiver, tmp_path):
    endpoint, ask = receiver
    best = {"lens": None, "sdk": None}
    rounds = []
    for i in range(ROUNDS):
        for who, side in (("lens", lens_side), ("sdk", "otel-sdk")):
            out = endpoint if sink == "otlp-http" else tmp_path / f"{who}{i}"
            if sink == "otlp-http":
                assert ask("clear") == "ok"
            result = _run(side, sink, out)
            delivered = int(ask("count")) if sink == "otlp-http" else _file_spans(out)
            assert delivered == SPANS, (who, side, delivered, result)
            if who == "lens":
                assert result["dropped"] == 0 and result["failed"] == 0 and result["ok"], result
                assert result["extra_rss_mb"] <= 64, result
            rounds.append((who, result))
            if best[who] is None or result["cpu_s"] < best[who]["cpu_s"]:
                best[who] = result
    lens, sdk = best["lens"], best["sdk"]
    benchmark.extra_info.update({
        "spans": SPANS, "lens_side": lens_side, "sink": sink,
        "lens_cpu_min_s": lens["cpu_s"], "sdk_cpu_min_s": sdk["cpu_s"],
        "lens_app_cpu_s": lens["app_cpu_s"], "sdk_app_cpu_s": sdk["app_cpu_s"],
        "lens_extra_rss_mb": max(r["extra_rss_mb"] for w, r in rounds if w == "lens"),
        "lens_dropped": sum(r["dropped"] for w, r in rounds if w == "lens"),
        "cpu_ratio": lens["cpu_s"] / sdk["cpu_s"],
    })
    # the benchmark's own timing is one Lens round (for the table); the gate uses extra_info
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


@pytest.mark.benchmark(group="pipeline")
def test_pipeline_native_otlp_http(benchmark, receiver, tmp_path):
    """Native recorder to OTLP/HTTP vs SDK BatchSpanProcessor + OTLP/HTTP exporter."""
    _pair(benchmark, "native", "otlp-http", receiver, tmp_path)


@pytest.mark.benchmark(group="pipeline")
def test_pipeline_native_file(benchmark, receiver, tmp_path):
    """Native recorder to OTLP/JSON files vs SDK BatchSpanProcessor + compact console exporter to a file."""
    _pair(benchmark, "native", "file", receiver, tmp_path)


@pytest.mark.benchmark(group="pipeline")
def test_pipeline_slow_collector_spool(benchmark, receiver, tmp_path):
    """The application thread's cost of 200k tight-loop spans, all delivered both ways: to a
    collector draining 20k spans/s with the disk spool (default settings), and to a collector
    that takes everything at once without the spool (LENS_SPOOL_MB=0: the export path as it
    was before the spool). The gate compares the application thread's own CPU time (the loop's
    wall time, also recorded, includes waiting for the interpreter lock while the export thread
    encodes) round by round: each round runs both sides back to back, in alternating order, and
    the gate takes the median of the rounds' ratios. One process's thread CPU varies by 20 %
    from run to run on a shared machine, so a ratio of two minimums rested on two lucky runs
    (CI read 1.108 against 1.10 where runs here read 0.83-1.08)."""
    endpoint, ask = receiver
    per_round = {"native": [], "native-nospool": []}
    loops = {"native": [], "native-nospool": []}
    sides = (("native", "20000"), ("native-nospool", "0"))
    try:
        for i in range(SPOOL_ROUNDS):
            for side, drain in (sides if i % 2 == 0 else sides[::-1]):
                assert ask(f"drain {drain}") == "ok" and ask("clear") == "ok"
                result = _run(side, "otlp-http", endpoint)
                delivered = int(ask("count"))
                assert delivered == SPANS and result["dropped"] == 0 and result["ok"], (side, delivered, result)
                per_round[side].append(result["app_thread_cpu_s"])
                loops[side].append(result["loop_wall_s"])
    finally:
        assert ask("drain 0") == "ok"
    spool, fast = per_round["native"], per_round["native-nospool"]
    benchmark.extra_info.update({
        "spans": SPANS, "rounds": SPOOL_ROUNDS,
        "spool_loop_min_s": min(loops["native"]), "nospool_loop_min_s": min(loops["native-nospool"]),
        "spool_app_thread_cpu_s": spool, "nospool_app_thread_cpu_s": fast,
        "spool_app_thread_cpu_min_s": min(spool), "nospool_app_thread_cpu_min_s": min(fast),
        "loop_ratio": min(loops["native"]) / min(loops["native-nospool"]),
    })
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
