"""Two-span checkpoints: blocking staging (``rl.grpo.checkpointing``) and a background finalize.

The finalize thread really writes the weights with ``torch.save`` into ``tmp_step_N`` and
renames it to ``step_N``; its span (``rl.checkpoint.finalize``) is a deferred child of the
staging span, carries the iteration that triggered it and outlives the step.
"""

from __future__ import annotations

import copy
import os
import shutil
import threading
from pathlib import Path

import torch

from lens_core import current_trace_carrier, deferred_child_span, managed_span
from lens_core.catalogs.rl import RLSpanGroup as G

from lens_cli.demo._pace import paced

__all__ = ["Checkpointer"]


class Checkpointer:
    """Saves ``step_N`` directories under ``directory``; one finalize in flight at a time."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self.saved: list[Path] = []
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def save(self, step: int, policy, optimizer) -> None:
        """Stage the weights (blocking, in the staging span) and hand the write to a thread."""
        with managed_span(G.CHECKPOINT, "rl.grpo.checkpointing"):
            self.finalize_pending()  # the previous checkpoint must be durable first
            with paced("checkpoint_stage"):
                state = {
                    "step": step,
                    "policy": {k: v.detach().clone() for k, v in policy.state_dict().items()},
                    "optimizer": copy.deepcopy(optimizer.state_dict()),
                }
            carrier = current_trace_carrier()  # captured inside the staging span: its child
            self._thread = threading.Thread(target=self._finalize, args=(step, state, carrier),
                                            name=f"lens-demo-finalize-{step}", daemon=True)
            self._thread.start()

    def finalize_pending(self) -> None:
        """Wait for the in-flight finalize; re-raise its error, if it failed."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise RuntimeError("the previous checkpoint failed to finalize") from error

    def _finalize(self, step: int, state: dict, carrier: dict) -> None:
        try:
            with deferred_child_span(G.CHECKPOINT, "rl.checkpoint.finalize", carrier, iteration=step):
                with paced("checkpoint_finalize"):
                    tmp = self.directory / f"tmp_step_{step}"
                    final = self.directory / f"step_{step}"
                    shutil.rmtree(tmp, ignore_errors=True)
                    tmp.mkdir(parents=True)
                    torch.save(state, tmp / "policy.pt")
                if final.exists():  # a re-run into the same directory
                    shutil.rmtree(final)
                os.replace(tmp, final)  # durable from here on
                self.saved.append(final)
        except BaseException as exc:  # reported by the next finalize_pending()
            self._error = exc
