"""The page at 1,000 ranks × 500 steps of noisy figures stays under 5 MB, with every cell's figures for the tooltips."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from noisy_run import write_noisy_run

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_1000_rank_500_step_page_is_under_5_mb_and_carries_every_cell(tmp_path):
    write_noisy_run(tmp_path / "run", 1000, 500)
    page_path = tmp_path / "page.html"
    proc = subprocess.run([sys.executable, "-m", "lens_report", str(tmp_path / "run"), "--html", str(page_path)],
                          capture_output=True, text=True, timeout=1200, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    size = page_path.stat().st_size
    assert size <= 5_000_000, size
    page = page_path.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="lens-data">(.*?)</script>', page, re.S)[1])
    cells = zlib.decompress(base64.b64decode(data["cells"]))
    assert (len(data["ranks"]), len(data["steps"]), len(cells)) == (1000, 500, 1000 * 500 * 10)
    assert all(cells[i] or cells[500_000 + i] for i in range(0, 500_000, 997))  # every rank ran every step
