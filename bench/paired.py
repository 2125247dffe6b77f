"""Paired benchmark rounds: two sides timed alternately in one run, for same-run ratio gates."""

import time

__all__ = ["paired_benchmark"]


def paired_benchmark(benchmark, measured, paired, *, label, rounds, warmup, prepare=None, clock=time.perf_counter):
    """Time ``measured`` with ``benchmark.pedantic`` while ``paired`` runs once before every
    round (in its setup, untimed by pytest-benchmark but timed here), so both sides share the
    machine's state round by round. The paired side's time in each round after the warm-up
    goes into ``extra_info["paired_<label>_s"]`` (a list, in the order of the measured side's
    ``stats.data``: the gate takes the median of the rounds' ratios), and its best time into
    ``extra_info["paired_<label>_min_s"]``. ``prepare``, if given, runs untimed before each
    round's paired side. ``clock`` times the paired side: the measured side's timer (e.g.
    ``time.thread_time`` for application-thread CPU), so the two are on one clock."""
    paired_times = []

    def paired_round():
        if prepare is not None:
            prepare()
        started = clock()
        paired()
        paired_times.append(clock() - started)

    benchmark.pedantic(measured, setup=paired_round, rounds=rounds, warmup_rounds=warmup)
    benchmark.extra_info[f"paired_{label}_s"] = paired_times[warmup:]
    benchmark.extra_info[f"paired_{label}_min_s"] = min(paired_times[warmup:])
