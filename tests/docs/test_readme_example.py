"""The README's training loop, run as written: its program saved as train.py, its two commands run by bash
in a fresh directory, and the report they print has the steps and goodput the README shows."""

import os
import re
import subprocess
import sys

import pytest

from child_env import without_settings
from doc_pages import REPO, blocks, marked

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("duckdb")

README = REPO / "README.md"

# `python` and `lens` in the README's commands are this interpreter and its `lens` command (the console
# script runs lens_cli.main, as `python -m lens_cli` does), whatever is first on PATH
PRELUDE = f"""set -euo pipefail
python() {{ "{sys.executable}" "$@"; }}
lens() {{ "{sys.executable}" -m lens_cli "$@"; }}
"""


def readme_example():
    """The README's program, its commands and the output it shows."""
    (program,) = marked(README, "README example")
    commands = next(b for b in blocks(README) if b.line > program.line)
    assert (program.lang, commands.lang) == ("python", "bash"), (program.where, commands.where)
    shown = next(b for b in blocks(README) if b.lang == "text" and b.line > commands.line)
    return program, commands, shown


def run_readme_example(directory):
    """Save the README's program in ``directory`` and run its commands there; the completed bash process."""
    program, commands, _ = readme_example()
    (directory / "train.py").write_text(program.text, encoding="utf-8")
    env = without_settings()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    return subprocess.run(["bash", "-c", PRELUDE + commands.text], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_readme_training_loop_runs_as_written_and_its_report_finds_steps_and_goodput(tmp_path):
    """The README's first example once opened a step without iteration_scope, and `lens report` on its
    trace said "no steps": here the README's own text is run and its report must number every step."""
    result = run_readme_example(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert list((tmp_path / "lens-traces" / "my-run").glob("traces-rank0-*.jsonl")), "no trace file written"
    out = result.stdout
    assert "5 steps from step spans matching" in out, out
    rows = {int(m.group(1)): float(m.group(2)) for m in
            re.finditer(r"^(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)%$", out, flags=re.M)}
    assert sorted(rows) == [1, 2, 3, 4, 5], out
    assert all(0 < goodput < 100 for goodput in rows.values()), rows
    run = re.search(r"^run\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s.*\s([\d.]+)%$", out, flags=re.M)
    assert run and float(run.group(1)) > 0 and float(run.group(2)) > 0 and 0 < float(run.group(3)) < 100, out
    assert re.search(r"^violations: 0$", out, flags=re.M) and re.search(r"^problems: 0$", out, flags=re.M), out


def test_the_output_the_readme_shows_is_what_the_report_prints(tmp_path):
    """The README's excerpt of the report: its heading lines are the report's own, word for word."""
    _, _, shown = readme_example()
    result = run_readme_example(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout.splitlines()
    for line in shown.text.splitlines():
        if line.startswith(("iteration", "-----", "5 steps")):
            assert line in printed, f"README shows {line!r}; the report printed:\n{result.stdout}"


def test_the_readme_straggler_commands_run_as_written_and_print_the_lines_it_shows(tmp_path):
    """The README's straggler example: its two commands run as written (bench/ as in a checkout) on a synchronous
    run with two slow ranks, and every line of the excerpt it shows (but `...`) is printed word for word."""
    (commands,) = marked(README, "example: tested by tests/docs/test_readme_example.py")
    assert commands.lang == "bash", commands.where
    shown = next(b for b in blocks(README) if b.lang == "text" and b.line > commands.line)
    (tmp_path / "bench").symlink_to(REPO / "bench", target_is_directory=True)
    env = without_settings()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    result = subprocess.run(["bash", "-c", PRELUDE + commands.text], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "report.html").stat().st_size > 0
    printed = result.stdout.splitlines()
    for line in shown.text.splitlines():
        if line.strip() and line != "...":
            assert line in printed, f"README shows {line!r}; the report printed:\n{result.stdout}"
