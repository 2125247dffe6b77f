"""multiprocessing children record spans: METHOD (fork/spawn) x MODE (pool-with, pool-close,
process), 20 tasks of SPANS spans; the parent shuts down after the children end."""

import multiprocessing
import sys

import lens_core
from common import setup, span

SPANS = 100


def work(i):
    if lens_core.installed_backend() is None:  # a spawned child sets itself up
        setup()
    for _ in range(SPANS):
        with span("g", "child"):
            pass
    return i


if __name__ == "__main__":
    method, mode = sys.argv[1], sys.argv[2]
    ctx = multiprocessing.get_context(method)
    handle = setup()
    if mode == "pool-with":
        with ctx.Pool(4) as pool:
            pool.map(work, range(20))
    elif mode == "pool-close":
        pool = ctx.Pool(4)
        pool.map(work, range(20))
        pool.close()
        pool.join()
    else:
        processes = [ctx.Process(target=work, args=(i,)) for i in range(20)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
    print(handle.shutdown(), flush=True)
