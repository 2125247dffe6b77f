"""Print this process's resource: service.instance.id and service.version (JSON)."""

import json
import sys

from common import setup

handle = setup(**({"run_id": sys.argv[1]} if len(sys.argv) > 1 else {}))
attrs = dict(handle.providers.resource.attributes)
print(json.dumps({k: attrs.get(k) for k in ("service.instance.id", "service.version", "telemetry.distro.name")}))
handle.shutdown()
