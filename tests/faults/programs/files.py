"""The file exporter in a shared directory: ``files.py <case>`` with LENS_FILE_DIR set; prints a JSON line.

Cases: ``big`` (one 10 MB attribute among 100 spans of 400 KB values), ``symlink`` (a symlink
planted at this process's next trace file, pointing at a victim file), ``deleted`` (the run
directory deleted, then replaced, mid-run), ``plain`` (a few spans: file modes, names).
"""

import json
import os
import shutil
import sys

from common import setup, span

case = sys.argv[1]
handle = setup()
sink = handle.providers.pipeline.sink
writer = sink._writer
seen = {"pid": os.getpid()}

if case == "big":
    for i in range(100):
        with span("g", "wide", i=i, payload=f"{i:06d}" + "v" * 400_000):
            pass
    handle.force_flush()  # the wide spans go out before the huge one is queued
    with span("g", "huge", payload="x" * (10 << 20), note="kept"):
        pass
elif case == "symlink":
    os.makedirs(writer.directory, exist_ok=True)
    victim = os.path.join(os.environ["LENS_FILE_DIR"], "victim.txt")
    with open(victim, "w") as fh:
        fh.write("do not touch\n")
    os.makedirs(writer.directory, exist_ok=True)
    os.symlink(victim, writer.path)  # where this process's first trace line would go
    for i in range(200):
        with span("g", "after-symlink", i=i):
            pass
    handle.force_flush()
    seen["victim"] = open(victim).read()
    seen["refused"] = writer.refused
elif case == "deleted":
    for i in range(300):
        with span("g", "before-delete", i=i):
            pass
    handle.force_flush()
    shutil.rmtree(writer.directory)  # deleted mid-run
    for i in range(200):
        with span("g", "after-delete", i=i):
            pass
    handle.force_flush()
    moved = str(writer.directory) + ".old"
    os.rename(writer.directory, moved)  # replaced: a new directory at the same path
    os.makedirs(writer.directory)
    for i in range(100):
        with span("g", "after-replace", i=i):
            pass
    handle.force_flush()
    shutil.rmtree(moved)
    seen["reopened"] = writer.reopened
    seen["lost_spans"] = writer.lost_spans
else:
    for i in range(10):
        with span("g", "plain", i=i):
            pass
seen["path"] = str(sink.path)
seen["shutdown"] = handle.shutdown()
print(json.dumps(seen))
