"""The lifecycle registry runs fork and exit participants in the declared order, whatever the registration order."""

import gc
import os

import pytest

from lens_core import _lifecycle

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


class _Log:
    """An owner for test participants (held weakly by the registry: gone with the test)."""

    def __init__(self):
        self.calls = []


def _fork_and_report(log):
    """Fork; the child sends what its after_in_child participants logged, the parent returns it."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        os.write(write_fd, ",".join(log.calls).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        child = pipe.read().decode().split(",")
    os.waitpid(pid, 0)
    return child


def test_participants_run_in_the_declared_order_not_the_registration_order():
    """Registered last-first, the pipeline's and the log's participants still run log first
    in the child and parent, and pipeline first before the fork."""
    log = _Log()
    for name in ("otel_bridge.pipeline", "lens_core.recorder", "lens_core.log"):
        _lifecycle.on_fork(name, owner=log,
                           before=lambda owner, n=name: owner.calls.append(f"before:{n}"),
                           after_in_parent=lambda owner, n=name: owner.calls.append(f"parent:{n}"),
                           after_in_child=lambda owner, n=name: owner.calls.append(f"child:{n}"))
    child = _fork_and_report(log)
    befores = [c for c in log.calls if c.startswith("before:")]
    assert befores == ["before:otel_bridge.pipeline", "before:lens_core.recorder", "before:lens_core.log"]
    assert [c for c in log.calls if c.startswith("parent:")] == [
        "parent:lens_core.log", "parent:lens_core.recorder", "parent:otel_bridge.pipeline"]
    assert [c for c in child if c.startswith("child:")] == [
        "child:lens_core.log", "child:lens_core.recorder", "child:otel_bridge.pipeline"]


def test_a_participant_goes_away_with_its_owner():
    log = _Log()
    _lifecycle.on_fork("otel_bridge.ids", owner=log, after_in_parent=lambda owner: None)
    before = _lifecycle.participants()["fork"].count("otel_bridge.ids")
    del log
    gc.collect()
    assert _lifecycle.participants()["fork"].count("otel_bridge.ids") == before - 1


def test_an_undeclared_name_is_refused_with_the_declared_ones():
    with pytest.raises(ValueError, match="unknown lifecycle participant 'mylib.cache'.*lens_core.log"):
        _lifecycle.on_fork("mylib.cache", after_in_child=lambda: None)
    with pytest.raises(ValueError, match="EXIT_ORDER"):
        _lifecycle.on_exit("mylib.cache", lambda: None)


def test_a_failing_participant_is_reported_and_the_others_still_run(capfd):
    """One participant raising in the child does not stop the next (a fork never fails for telemetry)."""
    log = _Log()

    def broken(owner):
        raise OSError("disk gone")

    _lifecycle.on_fork("otel_bridge.file_writers", owner=log, after_in_parent=broken)
    _lifecycle.on_fork("otel_bridge.pipeline", owner=log, after_in_parent=lambda owner: owner.calls.append("ran"))
    _fork_and_report(log)
    assert log.calls == ["ran"]
    assert "lifecycle participant 'otel_bridge.file_writers' failed: OSError: disk gone" in capfd.readouterr().err


def test_exit_participants_run_once_per_process():
    """atexit and multiprocessing's exit path may both call run_exit: participants run once."""
    log = _Log()
    _lifecycle.on_exit("otel_bridge.handle", lambda owner: owner.calls.append("exit"), owner=log)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        _lifecycle.run_exit()
        _lifecycle.run_exit()
        os.write(write_fd, ",".join(log.calls).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        assert pipe.read().decode() == "exit"
    os.waitpid(pid, 0)
    assert log.calls == []  # the parent's own exit is still to come
