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


def _run_with_job(tmp_path, otlp):
    """The straggler run of :func:`_straggler_run` with a job span per rank over all six steps."""
    lines = []
    for rank in range(8):
        trace = f"{rank + 1:032x}"
        spans, n = [otlp.span(rank * 1000, "rl.grpo.job", 0, 210, trace=trace)], rank * 1000 + 1
        for step in range(1, 7):
            start, wall = step * 30, 20 if rank == 5 else 10
            spans += [otlp.span(n, "rl.grpo.step", start, start + wall, rank * 1000, iteration=step, trace=trace),
                      otlp.span(n + 1, "rl.grpo.policy_training", start, start + wall - 2, n, bucket="productive",
                                iteration=step, trace=trace),
                      otlp.span(n + 2, "rl.grpo.data_processing", start + wall - 2, start + wall, n,
                                bucket="overhead", iteration=step, trace=trace)]
            n += 3
        lines.append(otlp.request(spans, nv_dl_rank=rank, service_instance_id=f"run-rank{rank}", nemo_run_id="run"))
    return otlp.write(tmp_path / "traces.jsonl", *lines)


_CELL = """(() => {{ const r = document.getElementById('heatmap-steptime').getBoundingClientRect();
  return [r.left + ({col} + 0.5) * r.width / 6, r.top + ({row} + 0.5) * r.height / 8]; }})()"""


def _open(browser, page, tmp_path, name):
    html = tmp_path / f"{name}.html"
    html.write_text(page, encoding="utf-8")
    browser.open(html.as_uri(), "document.body.dataset.cells === 'ready'")
    browser.eval("document.getElementById('heatmap').scrollIntoView()")


def test_hovering_a_heatmap_cell_shows_its_figures_and_a_click_draws_that_steps_waterfall(tmp_path, otlp):
    """In a real Chromium: the tooltip names the rank and step under the mouse with its step time,
    goodput and buckets; a click redraws the waterfall for that step, the rank and its two
    neighbours each side, on the step's own axis, the job span clipped and marked."""
    from cdp import Browser

    page = html_of(_run_with_job(tmp_path, otlp), steps={2})
    with Browser(1400, 1000) as browser:
        _open(browser, page, tmp_path, "hover")
        x, y = browser.eval(_CELL.format(col=2, row=5))  # step 3, rank 5
        browser.mouse("move", x, y)
        tip = browser.eval("document.getElementById('hm-tip').hidden ? null : document.getElementById('hm-tip').textContent")
        assert tip.splitlines()[:3] == ["rank 5 · step 3", "step time 20.000 s (2.00× the step's median rank)",
                                        "goodput 90.0%"]
        assert tip.splitlines()[3].startswith("productive 18.000 s, overhead 2.000 s, idle 0.000 s, wasted 0.000 s")
        browser.mouse("move", x, y - 400)  # off the heatmap: the tooltip goes
        assert browser.eval("document.getElementById('hm-tip').hidden")
        # step 2 is in the page for every rank: a click on it draws its spans
        x, y = browser.eval(_CELL.format(col=1, row=5))
        browser.mouse("click", x, y)
        assert browser.eval("document.getElementById('waterfall-note').textContent").startswith(
            "Step 2, rank 3, rank 4, rank 5, rank 6, rank 7 (rank 5 and its neighbours)")
        lanes = browser.eval("Array.from(document.querySelectorAll('#waterfall text.lane'))"
                             ".map(t => [t.childNodes[0].nodeValue, t.querySelector('title').textContent])")
        assert lanes == [[f"rank {r} · run-rank{r}"] * 2 for r in range(3, 8)]
        # the axis is step 2 on these ranks (30 s to 50 s): the job span (0-210 s) is clipped both ends
        assert browser.eval("document.querySelectorAll('#waterfall rect.clipped').length") == 5
        assert browser.eval("document.querySelectorAll('#waterfall path.clip-mark').length") == 10
        steps = browser.eval("""Array.from(document.querySelectorAll('#waterfall rect')).filter(r =>
            r.querySelector('title').textContent.startsWith('rl.grpo.step')).map(r => [+r.getAttribute('x'),
            +r.getAttribute('width')])""")
        assert len(steps) == 5
        plot = browser.eval("+document.getElementById('waterfall').getAttribute('width')")
        slow = steps[2]  # rank 5's 20 s step spans the whole axis; the others half of it
        assert slow[0] + slow[1] == pytest.approx(plot - 10, abs=1)
        assert steps[0][1] == pytest.approx(slow[1] / 2, abs=1)
        # no lane label is cut off: each fits left of the plot
        assert browser.eval("""Array.from(document.querySelectorAll('#waterfall text.lane')).every(t =>
            t.getBBox().x + t.getBBox().width < +document.querySelector('#waterfall rect').getAttribute('x'))""")
        # step 4 is not in the page: the click shows its bucket split and the command that draws it
        browser.eval("document.getElementById('heatmap').scrollIntoView()")  # the click scrolled to the waterfall
        x, y = browser.eval(_CELL.format(col=3, row=0))
        browser.mouse("click", x, y)
        text = browser.eval("document.getElementById('waterfall-box').textContent")
        assert "The spans of step 4 for these ranks are not in this page" in text
        assert "--step 4 --ranks 0-2" in text
        assert browser.eval("document.querySelectorAll('#waterfall rect.b-productive').length") == 3
        browser.screenshot(tmp_path / "clicked.png")
        assert browser.console() == []
