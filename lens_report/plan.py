"""The report's memory plan: what the engine may hold while reading and rolling up, and how files are batched."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ._units import memory_bytes

__all__ = [
    "EXPORTER_MAX_LINE",
    "MemoryPlan",
    "PARENT_ROW_BYTES",
    "STEP_ROW_BYTES",
    "max_line_bytes",
    "memory_bytes",
    "memory_plan",
]

_MAX_LINE_BYTES = 16 * 1024 * 1024  # one ExportTraceServiceRequest per line; a batch of 512 spans is ~250 KB
EXPORTER_MAX_LINE = 16 * 1024 * 1024
"""The longest line lens's file exporter writes (it splits batches to stay within it): every line
it can write must be readable, whatever ``--memory-limit`` says."""
_LINE_CAP_MAX = 64 * 1024 * 1024  # past this a line is hostile, not a batch: skip it
_SKIP_BUDGET = 1024 * 1024 * 1024  # decompressed bytes read through one over-long line before the file is abandoned


def max_line_bytes(memory_limit: str, threads: int) -> int:
    """The longest line the report reads under ``memory_limit``: DuckDB holds up to twice it per
    reading thread, so an eighth of the limit per thread, never below what the file exporter
    writes (plus 1 MB) nor above 64 MB. Longer lines are skipped, each with a problem."""
    limit = memory_bytes(memory_limit)
    return int(min(_LINE_CAP_MAX, max(EXPORTER_MAX_LINE + 2**20, limit / (8 * max(1, threads)))))


_PROCESS_BYTES = 56 * 10**6
"""What the budget keeps back from the engine while it reads: the interpreter and the DuckDB library
(~70 MB RSS before reading, part of it shared pages), and what DuckDB allocates outside its limit."""
_READER_BYTES = 256 * 10**6
"""The budget one reading statement needs: its JSON buffers (~115 MB for rank files of a few MB), the
rows it is writing and its share of the process; a second reader starts at 512 MB."""
_ROLLUP_SHARE = 0.4
"""The share of the reading limit the rollup's engine gets: its joins hold memory outside the limit too
(a 10M-span report's process sits ~130 MB above the engine's limit while rolling up: at 0.5 it peaked
at 240-247 MiB, past the default budget's 244 MiB once, at 0.4 at 221 MiB)."""
_SMALL_FILE_BYTES = 2 * 10**6
"""Files up to this size are read by two statements at once even at the default memory limit."""
_PIECES_AT_ONCE = 8
"""Pieces of one file read by one statement (a statement costs ~50 ms besides its spans): 64 MB of
the store's directory at a time."""
_PIECE_BYTES = 8 * 10**6
"""A trace file holding more than this (decompressed) is read in line-aligned pieces of about this
size: DuckDB's JSON reader holds memory that grows with the file it reads, not with its lines (one
165 MB file of 590 lines needed a 400 MB limit and peaked at 381 MiB; in pieces, ~200 MiB)."""
_SMALL_PIECE_BYTES = 10**6
"""A file (or piece) that runs out of memory whole at the reading limit's cap is read again in
line-aligned pieces of about this size, one statement each: the JSON reader's ~60 MB plus ~11 MB
per MB read fit where a 5.5 MB rank file's ~120 MB did not (a 50 MB budget lost every file)."""
PARENT_ROW_BYTES = 100
"""The rollup memory one span of the parent join's interior (the spans that are parents, which
its hash table holds) is given: 800,000 a part at the default budget. The synthetic training
trace's interior is a tenth of its spans; a chain's is all of them. At 26 bytes (3M a part,
sized when the join held every span, which is narrower than an interior row), a 10M-span run's
1M-span interior joined in one part and now and then ran out of the default plan's 80 MB: one
report in three ran it again with 152 MB and peaked at 280-297 MiB, with a note."""
STEP_ROW_BYTES = 500
"""The rollup memory one step anchor of the ``steps`` join is given (its hash tables hold the anchor's
name and rank label; 160,000 anchors a part at the default budget). 500,000 anchors (10M spans)
needed 60-80 MB in one statement, and now and then ran out of the default plan's then 100 MB beside the
working tables in the engine's pool; within 50 MB they fit in two parts or more, not in one."""
_THREAD_BYTES = 24 * 10**6
"""What a statement holds per thread of the engine beside its data (its operators' buffers and
partitions), for the statements that run within a limit lowered by ``hold_outside``: the page's
waterfall details of 10M spans (20,000 rows joined with the spans, their resources and ``anc``)
ran out of 40 MB on two threads and ran within it on one; 48 MB was enough for two."""


@dataclass(frozen=True)
class MemoryPlan:
    """How a report keeps its whole process near ``--memory-limit``: the engine's limit while
    reading and while rolling up (bytes), and how many reading statements run at once."""

    read_bytes: int
    rollup_bytes: int
    readers: int


def memory_plan(memory_limit: str, threads: int) -> MemoryPlan:
    """The :class:`MemoryPlan` for a report whose peak RSS should stay near ``memory_limit``.

    At the default 256 MB: one reading statement within 200 MB, the rollup within 80 MB
    (spilling to disk past it). Each further 256 MB adds a reading statement, up to ``threads``.
    """
    total = memory_bytes(memory_limit)
    read = max(total - _PROCESS_BYTES, total // 2)
    return MemoryPlan(read, int(read * _ROLLUP_SHARE), max(1, min(threads, total // _READER_BYTES)))


_BATCH_BYTES = 256 * 1024 * 1024  # files per ingest statement (one thread each); a statement costs ~30 ms besides its spans


def _batches(files: list[str], parts: int = 1, most: int | None = None) -> Iterator[list[str]]:
    """``files`` in consecutive batches of at most ``most`` bytes (``_BATCH_BYTES``), and at least ``parts`` of them
    when there are as many files (one statement runs on one thread: 10,000 small files in one
    batch left the second core idle)."""
    sizes = []
    for file in files:
        try:
            sizes.append(os.path.getsize(file))
        except OSError:
            sizes.append(0)
    limit = min(_BATCH_BYTES if most is None else most, max(1, -(-sum(sizes) // max(1, parts))))
    batch: list[str] = []
    size = 0
    for file, file_size in zip(files, sizes):
        if batch and size + file_size > limit:
            yield batch
            batch, size = [], 0
        batch.append(file)
        size += file_size
    if batch:
        yield batch


def _plain_size(file: str) -> int:
    """About how many bytes ``file`` holds decompressed: its size, a ``.gz`` file's own record of it
    (the last member's, modulo 4 GiB: never below the compressed size), ten times a ``.zst`` file's."""
    try:
        size = os.path.getsize(file)
        if file.endswith(".gz") and size >= 18:
            with open(file, "rb") as fh:
                fh.seek(-4, os.SEEK_END)
                return max(size, int.from_bytes(fh.read(4), "little"))
    except OSError:
        return 0
    return size * 10 if file.endswith(".zst") else size
