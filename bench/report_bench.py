"""The report benchmark: ``lens report`` time and peak memory against span count, and the pathological traces.

    python bench/report_bench.py            # 1M and 10M spans (1,000 ranks x 500 steps x 20), ~5 minutes
    python bench/report_bench.py --ci       # 20k and 200k spans, the chain and overlap cases: < 30 s

Each size is a synthetic run in the file exporter's format (bench/trace_synth.py), reported by
``python -m lens_report`` in a child process whose wall time and peak RSS (``wait4``)
are measured; the largest size also writes ``--html`` and its size is printed. The pass/fail
checks are ratios measured in the same run, never absolute times: 10x the spans costs at most
12x the CPU time (CPU, because on a shared machine wall time also measures the neighbours);
a 10k-deep parent chain and 20k spans overlapping in one lane cost at most 3x a normal trace
of as many spans (no quadratic walk). Absolute figures are printed for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trace_synth  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def measure(args: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds) of ``python -m lens_report ARGS``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "lens_report", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):  # 1: --strict is not passed, but a report may still find violations
        raise RuntimeError(f"lens report {' '.join(args)} exited {proc.returncode}: {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def run(sizes: list[tuple[int, int]], edge: int, workdir: Path, jobs: int) -> dict[str, object]:
    results: dict[str, object] = {"sizes": []}
    for ranks, steps in sizes:
        folder = workdir / f"r{ranks}s{steps}"
        started = time.perf_counter()
        spans = trace_synth.write_run(folder, ranks, steps, jobs=jobs)
        generated = time.perf_counter() - started
        size_mb = sum(p.stat().st_size for p in folder.rglob("*.jsonl")) / 1e6
        last = (ranks, steps) == sizes[-1]
        html = workdir / "report.html"
        wall, rss, cpu = measure([str(folder)])
        row = {"ranks": ranks, "steps": steps, "spans": spans, "input_mb": round(size_mb, 1),
               "generate_s": round(generated, 2), "report_s": round(wall, 2), "report_cpu_s": round(cpu, 2),
               "peak_rss_mb": round(rss), "spans_per_s": round(spans / wall)}
        if last:
            wall, rss, cpu = measure([str(folder), "--html", str(html)])
            row.update(html_mb=round(html.stat().st_size / 1e6, 2), report_html_s=round(wall, 2),
                       report_html_peak_rss_mb=round(rss))
        results["sizes"].append(row)
        print(json.dumps(row), flush=True)
        shutil.rmtree(folder)
    normal = workdir / "normal"
    trace_synth.write_run(normal, 1, max(1, edge // 21))
    chain, overlap = workdir / "chain.jsonl", workdir / "overlap.jsonl"
    trace_synth.write_chain(chain, edge // 2)
    trace_synth.write_overlap(overlap, edge)
    for name, path in (("normal", normal), ("chain", chain), ("overlap", overlap)):
        wall, rss, _cpu = measure([str(path), "--html", str(workdir / f"{name}.html")])
        results[name] = {"spans": edge if name != "chain" else edge // 2, "report_html_s": round(wall, 2),
                         "peak_rss_mb": round(rss)}
        print(json.dumps({name: results[name]}), flush=True)
    return results


def check(results: dict[str, object]) -> list[tuple[str, float, float, bool]]:
    """(label, ratio, bound, ok) for every same-run ratio the benchmark gates on."""
    sizes = results["sizes"]
    small, large = sizes[0], sizes[-1]
    span_ratio = large["spans"] / small["spans"]
    # CPU seconds, not wall: on a shared machine the wall clock also measures the neighbours
    time_ratio = large["report_cpu_s"] / small["report_cpu_s"]
    rows = [(f"CPU time for {span_ratio:.0f}x the spans / its span ratio x 1.2 (<= 1: linear)",
             time_ratio / (1.2 * span_ratio), 1.0)]
    normal = results["normal"]["report_html_s"]
    rows.append(("10k-deep chain / normal trace of 2x the spans (report + html)",
                 results["chain"]["report_html_s"] / normal, 3.0))
    rows.append(("20k overlapping spans in one lane / normal trace as large (report + html)",
                 results["overlap"]["report_html_s"] / normal, 3.0))
    return [(label, ratio, bound, ratio <= bound) for label, ratio, bound in rows]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the figures and the ratio checks; exit 1 when a check fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ci", action="store_true", help="the small variant CI runs (< 30 s)")
    parser.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes that write traces")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT")
    args = parser.parse_args(argv)
    sizes = [(10, 100), (100, 100)] if args.ci else [(100, 500), (1000, 500)]
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="lens-report-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = run(sizes, 20_000, workdir, args.jobs)
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    rows = check(results)
    results["checks"] = [{"check": label, "ratio": round(ratio, 3), "bound": bound, "ok": ok}
                         for label, ratio, bound, ok in rows]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    for label, ratio, bound, ok in rows:
        print(f"{'ok  ' if ok else 'FAIL'} {ratio:.3f} <= {bound:.3f}  {label}")
    failed = sum(not ok for *_, ok in rows)
    print(f"report-bench: {len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
