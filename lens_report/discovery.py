"""Which files a report reads: trace files given, or found under directories."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .model import Problem

__all__ = ["TRACE_FILE_SUFFIXES", "find_trace_files"]

_PLAIN_SUFFIXES = (".jsonl", ".json")  # uncompressed: the compiled reader's
TRACE_FILE_SUFFIXES = tuple(base + compression for compression in ("", ".gz", ".zst") for base in _PLAIN_SUFFIXES)
"""File names a directory argument is searched for (recursively)."""

_OTHER_SIGNALS = ("metrics-", "logs-")


def _no_trace_files(other_signals: int) -> str:
    """Why a directory gave no trace file: it holds none, or only the file exporter's metrics and logs."""
    if other_signals:
        return (f"holds {other_signals} metrics/logs file{'s' * (other_signals != 1)} (metrics-*, logs-*) and no "
                "trace file: lens report reads traces (the file exporter's traces-*.jsonl)")
    return f"no trace files found (lens report reads {', '.join(TRACE_FILE_SUFFIXES)})"


def find_trace_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[str], list[Problem]]:
    """Expand the given paths: files are kept as given, directories searched recursively for trace files.

    In a directory, the file exporter's ``metrics-*`` and ``logs-*`` files are skipped. Returns
    the files in order (each once) and a problem for every path that is missing or a directory
    holding no trace file.
    """
    files: list[str] = []
    problems: list[Problem] = []
    for path in map(Path, paths):
        if path.is_dir():
            # the file exporter's metrics and logs files sit beside its traces: not trace files
            named = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(TRACE_FILE_SUFFIXES))
            found = [str(p) for p in named if not p.name.startswith(_OTHER_SIGNALS)]
            if not found:
                problems.append(Problem(str(path), 0, _no_trace_files(len(named))))
            files.extend(found)
        elif path.is_file():
            files.append(str(path))
        else:
            problems.append(Problem(str(path), 0, "no such file or directory"))
    return list(dict.fromkeys(files)), problems
