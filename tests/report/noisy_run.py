"""A noisy rank × step run for page-size checks: every step time and bucket split jittered, so nothing compresses well."""

from __future__ import annotations

import random
from pathlib import Path

S = 1_000_000_000
T0 = 1_760_000_000 * S


def write_noisy_run(directory: Path, ranks: int, steps: int, *, seed: int = 7) -> int:
    """One file per rank: per step an umbrella ``rl.grpo.step`` with a productive and an overhead
    child; step time 4 s ± 10 % (a few ranks 1.5×), the productive share 60-90 %. Returns the span count."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for rank in range(ranks):
        head = ('{"resourceSpans":[{"resource":{"attributes":[{"key":"nemo.run.id","value":{"stringValue":"noisy"}},'
                '{"key":"nv.dl.rank","value":{"intValue":"%d"}},{"key":"service.instance.id","value":'
                '{"stringValue":"noisy-rank%d"}}]},"scopeSpans":[{"spans":[' % (rank, rank))
        trace = "%032x" % (rank + 1)
        spans = []
        for step in range(1, steps + 1):
            start = T0 + step * 6 * S
            wall = int(4 * S * rng.uniform(0.9, 1.1) * (1.5 if rng.random() < 0.01 else 1.0))
            prod = int(wall * rng.uniform(0.6, 0.9))
            base = step * 3
            attrs = '{"key":"rl.iteration","value":{"intValue":"%d"}}' % step
            spans.append('{"traceId":"%s","spanId":"%016x","name":"rl.grpo.step","startTimeUnixNano":"%d",'
                         '"endTimeUnixNano":"%d","attributes":[%s]}' % (trace, base, start, start + wall, attrs))
            for n, (lo, hi, bucket) in enumerate(((0, prod, "productive"), (prod, wall - wall // 50, "overhead"))):
                spans.append('{"traceId":"%s","spanId":"%016x","parentSpanId":"%016x","name":"rl.grpo.%s",'
                             '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s,'
                             '{"key":"rl.bucket","value":{"stringValue":"%s"}}]}'
                             % (trace, base + 1 + n, base, bucket, start + lo, start + hi, attrs, bucket))
        with open(directory / f"traces-rank{rank}.jsonl", "w", encoding="utf-8") as out:
            for i in range(0, len(spans), 512):
                out.write(head + ",".join(spans[i:i + 512]) + "]}]}]}\n")
        count += len(spans)
    return count
