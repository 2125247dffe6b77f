"""Ctrl-C at any point of every ``lens`` subcommand: status 130 and one line, nothing left behind; a closed stdout ends quietly.

The command runs as the console script pip writes from pyproject's ``[project.scripts]``, with a
real SIGINT. The assertions are on what happened, never on timing: a command that finished before
the signal (status 0) is fine, anything else must be status 130 and exactly one line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from trace_synth import write_run  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="finds the watch through /proc")


@pytest.fixture(scope="module")
def lens(tmp_path_factory) -> Path:
    """The ``lens`` console script as pip writes it, for the entry point pyproject.toml names."""
    found = re.search(r'^lens = "([\w.]+):(\w+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert found, "pyproject.toml has no [project.scripts] lens entry"
    module, function = found.groups()
    path = tmp_path_factory.mktemp("bin") / "lens"
    path.write_text(f"import re\nimport sys\nfrom {module} import {function}\n"
                    "if __name__ == '__main__':\n"
                    "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                    f"    sys.exit({function}())\n")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A small run (2 ranks x 5 steps), an 80,000-span one, a bench JSON and a span spec file."""
    root = tmp_path_factory.mktemp("inputs")
    write_run(root / "small", 2, 5)
    write_run(root / "medium", 20, 200)
    bench = root / "bench.json"
    bench.write_text(json.dumps({"benchmarks": [{"name": "test_a", "stats": {"min": 0.1}},
                                                {"name": "test_b", "stats": {"min": 1.0}}]}))
    spans = root / "spans.json"
    spans.write_text(json.dumps([{"name": "x", "start": 1700000000.0, "end": 1700000001.0}]))
    return {"small": root / "small" / "synth", "medium": root / "medium" / "synth", "bench": bench, "spans": spans,
            "root": root}


def _pipe_count(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:")
        except OSError:  # closed meanwhile
            pass
    return count


def _start(lens: Path, args: list, tmp: Path, stdout=subprocess.DEVNULL, buffered=False) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO), "LENS_EXPORTER": "file",
           "LENS_FILE_DIR": str(tmp.parent / "spans-out")}
    if buffered:  # as a user's shell runs it: stdout into a pipe is block-buffered, flushed at the end
        env.pop("PYTHONUNBUFFERED", None)
    return subprocess.Popen([sys.executable, str(lens), *map(str, args)], env=env, cwd=tmp.parent,
                            stdout=stdout, stderr=subprocess.PIPE, text=True)


def _wait_for_watch(proc: subprocess.Popen) -> bool:
    """Wait until the command watches Ctrl-C: the watch's wakeup pipe is two more pipe ends than
    the process had when it started (Popen returns after the exec; the interpreter's start makes
    no pipe). False when the command ended first."""
    try:
        start = _pipe_count(proc.pid)
        while proc.poll() is None:
            if _pipe_count(proc.pid) >= start + 2:
                return True
            time.sleep(0.002)
    except FileNotFoundError:  # ended between poll and listdir
        pass
    return False


def _interrupt(lens, args, tmp, delay, after_watch=True, timeout=300):
    """Start the command, send SIGINT ``delay`` s after its watch began (or after the exec); the status and stderr."""
    tmp.mkdir(exist_ok=True)
    proc = _start(lens, args, tmp)
    if not after_watch or _wait_for_watch(proc):
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
    status = proc.wait(timeout)
    return status, proc.stderr.read()


def _check(outcome, prog, finished=(0,)):
    """Interrupted: 130 and one line. Finished first: its own status and no traceback.

    Before the interrupt's line only what the command said it had written may come: regression,
    once the report read faster a Ctrl-C 3.2 s in landed after its page was written, while the
    store closed, and "wrote page.html" then "interrupted" (both true) failed this check."""
    status, err = outcome
    if status == 130:
        *before, last = err.splitlines(keepends=True) or [""]
        assert last == f"{prog}: interrupted\n", outcome
        assert all(line.startswith(f"{prog}: wrote ") for line in before), outcome
    else:
        assert status in finished and "Traceback" not in err and "interrupted" not in err, outcome
    return status == 130


def _before_lens(outcome) -> bool:
    """A signal that came before the watch began (the interpreter's start, site, the console
    script's imports: the lens_cli and lens_core packages, lens_cli.main's module body):
    Python's own default. Never from a command's code: a function of lens_cli.main, or the
    bridge, the report, the CI tools, the demo (none imports before the watch).

    Regression: a Ctrl-C 0.02 s into ``lens demo`` landed in one of the import system's lock
    callbacks, which CPython reports as "Exception ignored ... KeyboardInterrupt" and then runs
    on; the demo finished with status 0, and this check, which knew only status 1 and the
    signal's, failed CI on Python's own default."""
    status, err = outcome
    # CPython cannot raise out of the import system's lock callbacks: a signal that lands in one
    # is printed as ignored and the command runs to its end (status 0), seen at 0.02-0.3 s on a
    # slow machine; the frames below still say whether the interpreter was in Lens's code
    ignored = re.fullmatch(r"Exception ignored in: [^\n]*\nTraceback \(most recent call last\):\n"
                           r"(?:  [^\n]*\n)*KeyboardInterrupt: ?\n", err)
    if status not in (-signal.SIGINT, 1) and not (status == 0 and ignored):
        return False
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', err)
    return all(not re.search(r"(lens_report|lens_ci|lens_cli/demo|otel_bridge)/", file)
               and not (file.endswith("lens_cli/main.py") and name != "<module>") for file, name in frames)


_ORDER_PROBE = """
import signal, sys
COMMAND_MODULES = ("lens_report", "lens_ci", "lens_cli.demo", "otel_bridge", "duckdb", "opentelemetry", "torch")
seen = {}
class Probe:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(COMMAND_MODULES) and not seen:
            seen.update(first=name, handler=getattr(signal.getsignal(signal.SIGINT), "__module__", None),
                        wakeup_fd=signal.set_wakeup_fd(-1) != -1)
        return None
sys.meta_path.insert(0, Probe())
sys.argv = ["lens", "--version"]
from ENTRY_MODULE import ENTRY_FUNCTION
try:
    ENTRY_FUNCTION()
except SystemExit:
    pass
print(seen, file=sys.stderr)
"""


def test_the_console_script_watches_ctrl_c_before_importing_any_command(lens):
    """Regression: the console script imported the commands' modules (the report engine, the CI
    tools, the OpenTelemetry SDK: ~0.3 s on a loaded machine) before any Ctrl-C handling
    existed, so a Ctrl-C then was a traceback. The first of them to import must find the watch."""
    module, function = re.search(r"from (\S+) import (\w+)", lens.read_text()).groups()
    proc = subprocess.run([sys.executable, "-c", _ORDER_PROBE.replace("ENTRY_MODULE", module).replace("ENTRY_FUNCTION", function)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    seen = eval(proc.stderr.strip().splitlines()[-1])  # noqa: S307  the probe's own dict literal
    assert seen["handler"] == "lens_core.interrupts" and seen["wakeup_fd"], seen


def test_ctrl_c_while_the_report_imports_its_engine_is_one_line(lens, inputs, tmp_path):
    """Regression: Ctrl-C in the first ~0.3 s of ``lens report`` (its modules importing) printed
    Python's traceback; the console script now watches Ctrl-C before importing anything heavy."""
    interrupted = [_check(_interrupt(lens, ["report", inputs["small"]], tmp_path / f"t{i}", delay), "lens report")
                   for i, delay in enumerate((0.0, 0.01, 0.05))]
    assert any(interrupted)
    assert not [p for i in range(3) for p in (tmp_path / f"t{i}").iterdir()]


@pytest.mark.slow
def test_ctrl_c_at_staggered_points_of_a_report_is_one_line_and_leaves_no_database(lens, inputs, tmp_path):
    """Regression: Ctrl-C before the report's database existed (while modules imported) gave a
    traceback. SIGINT lands from the moment the watch starts through reading, rolling up and
    writing the page of an 80,000-span run; and very early, counted from the exec."""
    tmp = tmp_path / "tmp"
    args = ["report", inputs["medium"], "--html", tmp_path / "page.html"]
    outcomes = []
    for delay in (0.0, 0.003, 0.01, 0.03, 0.06, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2):
        outcomes.append(_interrupt(lens, args, tmp, delay))
        assert _check(outcomes[-1], "lens report") or outcomes[-1][0] == 0
        assert not list(tmp.iterdir()), f"left behind after {delay} s: {list(tmp.iterdir())}"
    assert sum(status == 130 for status, _ in outcomes) >= 6, outcomes
    for delay in (0.02, 0.05, 0.1, 0.2, 0.3):  # from the exec: the interpreter's start may still run
        outcome = _interrupt(lens, args, tmp, delay, after_watch=False)
        assert _before_lens(outcome) or _check(outcome, "lens report"), (delay, outcome)
        assert not list(tmp.iterdir()), f"left behind after {delay} s from the exec"


@pytest.mark.slow
def test_ctrl_c_at_staggered_points_of_the_demo_is_one_line_and_leaves_nothing_of_lens(lens, tmp_path):
    """Regression: Ctrl-C while the demo imported torch, trained or reported printed a traceback
    (or died silently in the interpreter's teardown); its report's database could stay in TMPDIR.
    A full run first says what the demo leaves there by design (torch's own compile cache)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = ["demo", "--steps", "2", "--out", tmp_path / "out"]
    started = time.monotonic()
    full = _start(lens, args, tmp)
    assert full.wait(600) == 0, full.stderr.read()
    whole = time.monotonic() - started
    by_design = {path.name for path in tmp.iterdir()}
    assert not [name for name in by_design if name.startswith("lens")], by_design
    outcomes = []
    for fraction in (0.0, 0.01, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95):
        outcomes.append(_interrupt(lens, args, tmp, fraction * whole))
        assert _check(outcomes[-1], "lens demo") or outcomes[-1][0] == 0
        left = {path.name for path in tmp.iterdir()} - by_design
        assert not left, f"left behind at {fraction:.0%} of the run: {left}"
    assert sum(status == 130 for status, _ in outcomes) >= 5, outcomes
    for delay in (0.02, 0.1, 0.3):
        outcome = _interrupt(lens, args, tmp, delay, after_watch=False)
        assert _before_lens(outcome) or _check(outcome, "lens demo"), (delay, outcome)


def _commands(inputs):
    return {
        "lens": ["--version"],
        "lens report": ["report", "--help"],
        "lens resolve": ["resolve", "per_step", "--import", "lens_core.catalogs.rl", "--json"],
        "lens import-budget": ["import-budget", "json", "--max-ms", "10000", "--runs", "2"],
        "lens bench-gate": ["bench-gate", inputs["bench"], "--check", "test_a / test_b <= 1"],
        "lens emit-spans": ["emit-spans", inputs["spans"]],
    }


@pytest.mark.slow
def test_ctrl_c_at_staggered_points_of_every_other_command_is_one_line(lens, inputs, tmp_path):
    """Regression: Ctrl-C while ``lens --version``, ``resolve``, ``import-budget``, ``bench-gate``
    or ``emit-spans`` imported or ran printed a traceback (emit-spans: from the SDK's threads)."""
    for prog, args in _commands(inputs).items():
        tmp = tmp_path / prog.replace(" ", "-")
        outcomes = [_interrupt(lens, args, tmp, delay) for delay in (0.0, 0.01, 0.05, 0.2)]
        while not any(status == 130 for status, _ in outcomes) and len(outcomes) < 10:
            outcomes.append(_interrupt(lens, args, tmp, 0.0))  # all finished first: a loaded machine's luck
        for outcome in outcomes:
            _check(outcome, prog)
        assert any(status == 130 for status, _ in outcomes), (prog, outcomes)
        assert not list(tmp.iterdir()), (prog, list(tmp.iterdir()))


def _into_closed_pipe(lens, args, tmp, buffered=False):
    tmp.mkdir(exist_ok=True)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write meets EPIPE
    proc = _start(lens, args, tmp, stdout=write_end, buffered=buffered)
    os.close(write_end)
    err = proc.stderr.read()
    return proc.wait(600), err


def test_every_command_that_writes_stdout_ends_quietly_into_a_closed_pipe(lens, inputs, tmp_path):
    """Regression: ``lens --version | head -c1`` ended in a BrokenPipeError traceback: the
    option prints and exits while the arguments are parsed, before the pipe check (argparse's
    --help too, where stdout is unbuffered); --help's text is flushed inside the check now."""
    commands = {**_commands(inputs), "lens --help": ["--help"], "report": ["report", inputs["small"]],
                "report --json": ["report", inputs["small"], "--json"]}
    for name, args in commands.items():
        read = _start(lens, args, tmp_path / "tmp")  # read to the end: the notes it writes anyway
        normal = read.stderr.read()
        assert read.wait(600) == 0, (name, normal)
        for buffered in (False, True):
            status, err = _into_closed_pipe(lens, args, tmp_path / "tmp", buffered)
            assert status == 0, (name, buffered, err)
            assert set(err.splitlines()) <= set(normal.splitlines()), (name, buffered, err)  # bench-gate stops early
    assert not list((tmp_path / "tmp").iterdir())


@pytest.mark.slow
def test_the_demo_ends_quietly_into_a_closed_pipe(lens, tmp_path):
    """``lens demo | head -1``: the demo stops at its first line, status 0, nothing on stderr."""
    assert _into_closed_pipe(lens, ["demo", "--steps", "2", "--out", tmp_path / "out"], tmp_path / "tmp") == (0, "")


def _python(code: str, tmp: Path) -> subprocess.CompletedProcess:
    tmp.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=120)


def test_ctrl_c_removes_a_report_database_the_command_did_not_guard(tmp_path):
    """Regression: ``lens demo`` reports on its trace in a TraceStore of its own (in TMPDIR, not in
    the report command's guarded folder); a Ctrl-C then left that database behind. A store's
    folder is now removed by any Ctrl-C the watch sees, while the main thread waits in C."""
    proc = _python("import os, signal, threading\n"
                   "from lens_core.interrupts import watch_interrupts\n"
                   "from lens_report import TraceStore\n"
                   "assert watch_interrupts('lens demo')\n"
                   "store = TraceStore()\n"
                   "threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
                   "threading.Event().wait(60)\n", tmp_path / "tmp")
    assert (proc.returncode, proc.stderr) == (130, "lens demo: interrupted\n")
    assert not list((tmp_path / "tmp").iterdir())


def test_a_line_the_command_writes_while_the_watch_removes_its_folders_comes_before_interrupted(tmp_path):
    """Regression: Ctrl-C at 90 % of a 1M-span report with ``--html`` ended ``lens report: interrupted``
    then ``lens report: wrote page.html``: the watch wrote its line, then removed the database while
    the main thread ran on and finished the page. The line now comes last, right before the exit.
    Here a thread of the command writes its line while the folder is removed (the removal waits for it)."""
    proc = _python("import os, signal, threading, tempfile\n"
                   "from lens_core import interrupts\n"
                   "wrote, removing = threading.Event(), threading.Event()\n"
                   "remove = interrupts._remove_all\n"
                   "def slow_remove():\n"
                   "    removing.set(); wrote.wait(10); remove()\n"
                   "interrupts._remove_all = slow_remove\n"
                   "assert interrupts.watch_interrupts('lens report')\n"
                   "interrupts.remove_on_interrupt(tempfile.mkdtemp(prefix='lens-report-'))\n"
                   "threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
                   "def work():  # the command's work, still running while the folder goes\n"
                   "    removing.wait(30); os.write(2, b'lens report: wrote page.html (0.3 MB)\\n'); wrote.set()\n"
                   "threading.Thread(target=work, daemon=True).start()\n"
                   "threading.Event().wait(60)\n", tmp_path / "tmp")
    assert (proc.returncode, proc.stderr.splitlines()) == (
        130, ["lens report: wrote page.html (0.3 MB)", "lens report: interrupted"]), proc.stderr
    assert not list((tmp_path / "tmp").iterdir())


def test_console_spans_into_a_closed_pipe_are_a_failure_in_either_buffering(lens, inputs, tmp_path):
    """``emit-spans --exporter console``'s spans are its output: when the reader is gone they were
    not delivered, status 1 with the SDK's loss line. Regression: with a block-buffered stdout
    the final flush's BrokenPipeError turned that status into 0."""
    for buffered in (False, True):
        status, err = _into_closed_pipe(lens, ["emit-spans", inputs["spans"], "--exporter", "console"],
                                        tmp_path / "tmp", buffered)
        assert status == 1 and "BrokenPipeError" in err and "Traceback" not in err, (buffered, err)
        assert err.endswith("lens emit-spans: 1 span(s) emitted, but not all were exported\n"), err
