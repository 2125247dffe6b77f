"""Every example in the README and docs/ is run as written, or is marked as a fragment of a file or the
example of a test that runs it; every `lens` command they show parses; every link between pages resolves."""

import os
import re
import shlex
import subprocess
import sys

import pytest

from child_env import without_settings
from doc_pages import PAGES, REPO, all_blocks, anchors, marked

RUN = "example: run"
TESTED_BY = re.compile(r"^(?:example: tested by|README example: )\s*(\S+)")
FRAGMENT = re.compile(r"^example: fragment of (\S+)$")

PRELUDE = f"""set -euo pipefail
python() {{ "{sys.executable}" "$@"; }}
lens() {{ "{sys.executable}" -m lens_cli "$@"; }}
"""


def _env(**extra):
    env = without_settings()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def _page(name):
    return REPO / name


def test_every_python_example_is_run_or_marked_as_tested_elsewhere_or_a_fragment():
    unmarked = [b.where for b in all_blocks() if b.lang == "python"
                and not (b.marker == RUN or TESTED_BY.match(b.marker) or FRAGMENT.match(b.marker))]
    assert unmarked == [], ("python blocks need '<!-- example: run -->', '<!-- example: tested by TEST -->' or "
                            f"'<!-- example: fragment of FILE -->' on the line above: {unmarked}")


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.marker == RUN], ids=lambda b: b.where)
def test_a_runnable_example_runs_as_written_with_telemetry_on(block, tmp_path):
    """Run with spans written to files and, where the example registers groups, every group on: each call the
    example makes really records."""
    pytest.importorskip("opentelemetry.sdk")
    (tmp_path / "example.py").write_text(block.text, encoding="utf-8")
    groups = {"LENS_SPAN_GROUPS": "all"} if "SpanRegistry.register(" in block.text else {}
    result = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env=_env(LENS_ENABLED="1", LENS_EXPORTER="file", LENS_FILE_DIR=str(tmp_path / "traces"),
                                     LENS_RUN_ID="doc-example", **groups))
    assert result.returncode == 0, f"{block.where}:\n{result.stderr[-3000:]}"
    stderr = result.stderr
    if not groups:  # an example of setup alone: setup rightly says no library has registered its groups yet
        stderr = "".join(line for line in stderr.splitlines(keepends=True) if "no span groups are registered" not in line)
    assert stderr == "", f"{block.where} printed on stderr (a warning is a mistake in the example):\n{stderr}"


@pytest.mark.parametrize("block", [b for b in all_blocks() if TESTED_BY.match(b.marker)], ids=lambda b: b.where)
def test_an_example_tested_elsewhere_names_a_test_that_reads_its_page(block):
    test = REPO / TESTED_BY.match(block.marker).group(1)
    assert test.is_file(), f"{block.where}: {test} does not exist"
    assert str(block.page.relative_to(REPO)) in test.read_text(encoding="utf-8"), (
        f"{block.where}: {test.relative_to(REPO)} does not read {block.page.relative_to(REPO)}")


@pytest.mark.parametrize("block", [b for b in all_blocks() if FRAGMENT.match(b.marker)], ids=lambda b: b.where)
def test_a_fragment_is_word_for_word_in_its_file(block):
    source = REPO / FRAGMENT.match(block.marker).group(1)
    lines = {line.strip() for line in source.read_text(encoding="utf-8").splitlines()}
    missing = [line for line in block.text.splitlines() if line.strip() and line.strip() not in lines]
    assert missing == [], f"{block.where}: not in {source.relative_to(REPO)}: {missing}"


def _lens_commands(text):
    """The argument lists of the `lens ...` commands of a shell block (continuations joined, comments, pipes and
    `&&` split, leading VAR=value assignments dropped)."""
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        command = []
        for word in [*words, "|"]:
            if word in ("|", "&&", ";"):
                while command and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", command[0]):
                    command.pop(0)
                if command and command[0] == "lens":
                    yield command[1:]
                command = []
            else:
                command.append(word)


def test_every_lens_command_in_the_pages_parses():
    from lens_cli.main import build_parser

    checked = 0
    for block in all_blocks():
        if block.lang != "bash":
            continue
        for args in _lens_commands(block.text):
            try:
                build_parser().parse_args(args)
            except SystemExit as exc:
                pytest.fail(f"{block.where}: `lens {' '.join(args)}` does not parse (exit {exc.code})")
            checked += 1
    assert checked >= 10


def test_every_link_between_pages_resolves():
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []


def test_the_report_page_loads_a_clickhouse_database_from_files_as_written(tmp_path):
    """docs/report.md: the README's run written to files, loaded into chdb by the page's Python, reported by the
    page's command."""
    pytest.importorskip("chdb")
    pytest.importorskip("duckdb")
    from test_readme_example import run_readme_example

    assert run_readme_example(tmp_path).returncode == 0
    load, command = [b for b in marked(_page("docs/report.md"), "tested by tests/docs/test_doc_examples.py")]
    assert (load.lang, command.lang) == ("python", "bash")
    (tmp_path / "load.py").write_text(load.text, encoding="utf-8")
    loaded = subprocess.run([sys.executable, "load.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=_env())
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert re.fullmatch(r"loaded (\d+) spans\n", loaded.stdout) and int(loaded.stdout.split()[1]) > 20, loaded.stdout
    report = subprocess.run(["bash", "-c", PRELUDE + command.text], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env=_env())
    assert report.returncode == 0, report.stderr[-3000:]
    assert "5 steps from step spans matching" in report.stdout, report.stdout
    assert re.search(r"^run\s+[\d.]+\s+[\d.]+\s.*\s[\d.]+%$", report.stdout, flags=re.M), report.stdout


MYLIB = '''
from lens_core import SpanRegistry, trace_fn

SpanRegistry.register("mylib", ["train"], presets={"per_step": ["train"]}, buckets={"train": "productive"})


@trace_fn("train")
def train_step(n):
    return sum(i * i for i in range(n))
'''


def test_the_ci_page_overhead_test_passes_as_written(tmp_path):
    """docs/ci.md's lens_overhead test, saved as a test file beside a small library, run by pytest."""
    pytest.importorskip("opentelemetry.sdk")
    (block,) = marked(_page("docs/ci.md"), "tested by tests/docs/test_doc_examples.py")
    (tmp_path / "mylib.py").write_text(MYLIB, encoding="utf-8")
    (tmp_path / "test_mylib_overhead.py").write_text(block.text, encoding="utf-8")
    env = _env(PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    env.pop("PYTEST_ADDOPTS", None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
