"""GoodputRollup: the compiled roll-up (lens_core._native._goodput) and its pure twin (_goodput_py) agree record for record."""

import random
import re

import pytest

from lens_core._native import _goodput_py, _recorder_py

try:
    from lens_core._native import _goodput
    from lens_core._native._recorder import make_record as compiled_make_record
except ImportError:  # pure-Python install: the twin is tested against the report elsewhere
    _goodput = None
    compiled_make_record = None

STEP = re.compile(r"(^|\.)step$").search
NEVER = {"rl.checkpoint.finalize": "overlaps"}
SKIP = frozenset({"idle/validation", "idle/refit_event_wait"})


def _specs(seed):
    """Ended spans in end order: steps of leaves (some nested, some odd), as (name, span, parent, start, end, attrs)."""
    rng = random.Random(seed)
    out, next_id, t = [], 1, 1_000
    job = next_id
    next_id += 1
    job_start = t
    for iteration in range(1, 6):
        step, next_id = next_id, next_id + 1
        step_start = t
        umbrella, next_id = next_id, next_id + 1
        u_start = t
        for _ in range(rng.randrange(1, 30)):
            leaf, next_id = next_id, next_id + 1
            start, t = t, t + rng.randrange(1, 500)
            attrs = {"lens.group": "g", "rl.bucket": rng.choice(["productive", "overhead", "idle", "wasted"]),
                     "rl.iteration": iteration}
            kind = rng.random()
            if kind < 0.05:
                attrs["rl.bucket"] = "nonsense"
            elif kind < 0.1:
                attrs = {"rl.bucket": "idle", "rl.efficiency.category": "idle/validation"}
            elif kind < 0.15:
                attrs = {"rl.bucket": "overhead", "lens.umbrella": True}
            parent = umbrella if rng.random() < 0.5 else step
            name = "rl.checkpoint.finalize" if rng.random() < 0.05 else "leaf"
            out.append((name, leaf, parent, start, t, attrs))
        out.append(("rl.x.generation", umbrella, step, u_start, t, {"lens.group": "rollup", "lens.umbrella": True}))
        out.append(("rl.x.step", step, job, step_start, t, {"rl.iteration": iteration, "lens.group": "step"}))
        t += 5
    out.append(("bad", next_id, job, 50, 10, {"rl.bucket": "productive"}))  # ends before it starts
    out.append(("orphan", next_id + 1, 999_999, t, t + 7, {"rl.bucket": "wasted"}))
    out.append(("rl.x.job", job, 0, job_start, t + 10, {}))
    return out


def _records(make, specs):
    return [make(0, name, 1, 1, span, parent, False, None, start, end, dict(attrs), None, None, 0, None)
            for name, span, parent, start, end, attrs in specs]


def _run(module, make, specs, split):
    rollup = module.GoodputRollup(STEP)
    records = _records(make, specs)
    steps = []
    for i in range(0, len(records), split):
        steps += rollup.feed(records[i:i + split], NEVER, SKIP)
    return steps, rollup.totals, rollup.bounds, rollup.pending


@pytest.mark.skipif(_goodput is None,
                    reason="compiled native wing not built: LENS_BUILD_EXT=1 python setup.py build_ext --inplace")
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("split", [1, 7, 10_000])
def test_the_compiled_rollup_and_its_pure_twin_agree(seed, split):
    specs = _specs(seed)
    compiled = _run(_goodput, compiled_make_record, specs, split)
    pure = _run(_goodput_py, _recorder_py.make_record, specs, split)
    assert compiled == pure
    steps, totals, bounds, pending = pure
    assert [s[0] for s in steps] == [1, 2, 3, 4, 5]
    assert sum(totals) > 0 and pending == 1  # the orphan's remote parent never ends here


def test_the_step_takes_what_ended_below_it_and_nothing_else():
    specs = [("leaf", 3, 2, 110, 120, {"rl.bucket": "productive", "lens.group": "g"}),
             ("rl.x.generation", 2, 1, 105, 125, {"lens.umbrella": True}),
             ("leaf", 4, 1, 130, 134, {"rl.bucket": "idle", "lens.group": "g"}),
             ("rl.x.step", 1, 0, 100, 140, {"rl.iteration": 7}),
             ("leaf", 5, 0, 150, 151, {"rl.bucket": "wasted", "lens.group": "g"})]
    rollup = _goodput_py.GoodputRollup(STEP)
    steps = rollup.feed(_records(_recorder_py.make_record, specs), {}, frozenset())
    assert steps == [(7, 40, [10, 0, 4, 0])]
    assert rollup.totals == [10, 0, 4, 1] and rollup.bounds == (100, 151)
