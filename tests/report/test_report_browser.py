"""The HTML report in a real headless Chromium: no console message, the heatmap and the waterfall drawn."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from report_helpers import html_of
from png_pixels import count_colour, read_png

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")

WIDTH, HEIGHT = 1200, 1600


def _screenshot(page, tmp_path, name="shot"):
    """(console lines, screenshot rows) of ``page`` (HTML text) opened from a file."""
    html = tmp_path / f"{name}.html"
    html.write_text(page, encoding="utf-8")
    png = tmp_path / f"{name}.png"
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", f"--window-size={WIDTH},{HEIGHT}",
                           f"--screenshot={png}", html.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert png.is_file(), proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    width, height, rows = read_png(png.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    return console, rows


def _straggler_run(tmp_path, otlp):
    """8 ranks × 6 steps of 10 s; rank 5 takes 20 s in every step (a straggler the heatmap shows red)."""
    lines = []
    for rank in range(8):
        spans, n = [], rank * 1000 + 1
        for step in range(1, 7):
            start = step * 30
            wall = 20 if rank == 5 else 10
            spans.append(otlp.span(n, "rl.grpo.step", start, start + wall, iteration=step, trace=f"{rank + 1:032x}"))
            spans.append(otlp.span(n + 1, "rl.grpo.policy_training", start, start + wall - 2, n, bucket="productive",
                                   iteration=step, trace=f"{rank + 1:032x}"))
            spans.append(otlp.span(n + 2, "rl.grpo.data_processing", start + wall - 2, start + wall, n,
                                   bucket="overhead", iteration=step, trace=f"{rank + 1:032x}"))
            n += 3
        lines.append(otlp.request(spans, nv_dl_rank=rank, service_instance_id=f"run-rank{rank}", nemo_run_id="run"))
    return otlp.write(tmp_path / "traces.jsonl", *lines)


def test_the_page_of_a_multi_rank_run_draws_heatmap_and_waterfall_without_console_messages(tmp_path, otlp):
    page = html_of(_straggler_run(tmp_path, otlp), steps={2})
    console, rows = _screenshot(page, tmp_path)
    assert console == []
    heatmap_top = rows[: HEIGHT // 3]
    # the straggler's cells: twice the median step time, drawn full red
    assert count_colour(heatmap_top, (200, 30, 30)) > 500
    # the other ranks' cells sit at the median: near white, and the grey of missing cells is absent
    assert count_colour(heatmap_top, (250, 250, 250), tolerance=2) > 5000
    # the waterfall of step 2: productive (green) and overhead (orange) bars for 8 ranks
    assert count_colour(rows, (58, 157, 82)) > 2000
    assert count_colour(rows, (232, 163, 61)) > 200


def test_the_console_check_catches_a_page_that_logs(tmp_path):
    console, _ = _screenshot("<!DOCTYPE html><p>x</p><script>console.error('broken')</script>", tmp_path, "bad")
    assert len(console) == 1 and '"broken"' in console[0]
