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
    heatmap_top = rows[: HEIGHT // 2]  # below the goodput bar, the stragglers and the slowest steps
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


def _click_row(browser, table_heading, rank):
    """Click the row of ``rank`` in the table after the heading ``table_heading``; the waterfall's note."""
    x, y = browser.eval(f"""(() => {{
        const h = Array.from(document.querySelectorAll('h2')).find(e => e.textContent === {table_heading!r});
        let t = h.nextElementSibling; while (t.tagName !== 'TABLE') t = t.nextElementSibling;
        const tr = Array.from(t.querySelectorAll('tr.pick')).find(r => r.dataset.rank === {rank!r});
        tr.scrollIntoView(); const b = tr.getBoundingClientRect(); return [b.left + 10, b.top + b.height / 2]; }})()""")
    browser.mouse("click", x, y)
    return browser.eval("document.getElementById('waterfall-note').textContent")


def test_a_straggler_row_and_a_slow_step_row_open_their_real_waterfalls_at_1024_pixels(tmp_path):
    """Regression: 0 of 10 straggler rows opened a real waterfall (they showed a command with
    placeholder paths). On the issue's 64-rank synchronous run (7,744 spans: the page's first
    waterfall is the slowest step only), a click on rank 53's row draws its step 1 with its
    neighbours from spans the page carries, and a slow step's row draws that step; in a
    1,024-pixel window nothing is wider than the window (the heatmap fits, the waterfall scales)."""
    import sys
    from pathlib import Path

    from cdp import Browser

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_sync_run

    write_sync_run(tmp_path / "run", 64, 40, slow={53: (1.15, 1), 41: (1.3, 20)}, run="sync64")
    page = html_of(tmp_path / "run")
    with Browser(1024, 900) as browser:
        _open(browser, page, tmp_path, "stragglers")
        assert browser.eval("document.documentElement.scrollWidth") <= 1024
        assert browser.eval("document.getElementById('heatmap').getBoundingClientRect().right") <= 1024
        note = _click_row(browser, "Stragglers", "rank 53")
        assert note.startswith("Step 1, rank 51, rank 52, rank 53, rank 54, rank 55 (rank 53 and its neighbours)")
        lanes = browser.eval("Array.from(document.querySelectorAll('#waterfall text.lane')).map(t => t.textContent)")
        assert [lane.split(" · ")[0] for lane in lanes] == [f"rank {r}" for r in range(51, 56)]
        names = browser.eval("""Array.from(document.querySelectorAll('#waterfall rect.span title'))
            .map(t => t.textContent.split('\\n')[0])""")
        assert names.count("rl.grpo.policy_training") == 5 and names.count("rl.idle.barrier") == 5
        assert "not in this page" not in browser.eval("document.getElementById('waterfall-box').textContent")
        browser.screenshot(tmp_path / "straggler-row.png")
        note = _click_row(browser, "Stragglers", "rank 41")
        assert note.startswith("Step 20, rank 39, rank 40, rank 41, rank 42, rank 43 (rank 41 and its neighbours)")
        step = browser.eval(
            """(() => { const h = Array.from(document.querySelectorAll('h2')).find(e => e.textContent === 'Slowest steps');
                let t = h.nextElementSibling; while (t.tagName !== 'TABLE') t = t.nextElementSibling;
                return t.querySelector('tr.pick').dataset.step; })()""")
        note = _click_row(browser, "Slowest steps", "rank 41")
        assert note.startswith(f"Step {step}, rank 39, rank 40, rank 41, rank 42, rank 43")
        assert browser.eval("document.querySelectorAll('#waterfall rect.b-productive').length") == 5
        assert browser.eval("document.documentElement.scrollWidth") <= 1024
        assert browser.console() == []


def test_a_10000_step_heatmap_fits_a_1024_pixel_window(tmp_path, otlp):
    """Regression: one pixel column per step put a 1,200-step heatmap past a 1,024-pixel window
    (steps hidden behind a scroll). Past its width, steps share a column (the slowest shows), and a
    hover still names the step under the mouse."""
    from cdp import Browser

    spans, n = [], 1
    for step in range(1, 2001):
        for rank in range(2):
            trace = f"{rank + 1:032x}"
            wall = 2 if rank == 1 and step == 1500 else 1
            spans.append((rank, otlp.span(n, "rl.grpo.step", step * 3, step * 3 + wall, iteration=step, trace=trace)))
            spans.append((rank, otlp.span(n + 1, "rl.grpo.policy_training", step * 3, step * 3 + wall, n,
                                          bucket="productive", iteration=step, trace=trace)))
            n += 2
    lines = [otlp.request([s for r, s in spans if r == rank], nv_dl_rank=rank, service_instance_id=f"r{rank}",
                          nemo_run_id="long") for rank in range(2)]
    page = html_of(otlp.write(tmp_path / "long.jsonl", *lines))
    with Browser(1024, 900) as browser:
        _open(browser, page, tmp_path, "long")
        assert browser.eval("document.documentElement.scrollWidth") <= 1024
        box = browser.eval("(() => { const b = document.getElementById('heatmap-steptime').getBoundingClientRect();"
                           " return [b.left, b.right, b.top, b.height]; })()")
        assert box[1] <= 1024
        # the column under x = 1500/2000 of the width names a step near 1500
        browser.mouse("move", box[0] + (box[1] - box[0]) * 1499.5 / 2000, box[2] + box[3] * 0.75)
        tip = browser.eval("document.getElementById('hm-tip').textContent")
        assert abs(int(tip.splitlines()[0].split("step ")[1]) - 1500) <= 3
        assert browser.console() == []
