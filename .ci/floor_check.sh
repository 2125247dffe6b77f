#!/usr/bin/env bash
# The version floors pyproject.toml declares, tested: a fresh venv with every floor version,
# then the upstream-assumption tests and a smoke subset of the suite against them.
# Usage: .ci/floor_check.sh [venv-dir]   (default: a new temporary directory; kept for reuse)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-$(mktemp -d)/floor-venv}"

# The floors (pyproject.toml says why each is the floor). The OpenTelemetry family moves in
# lockstep: the HTTP exporter's serialized-payload client (otel_bridge/sdk/upstream.http_export)
# first shipped in 1.45.0, which requires sdk ~=1.45.0 and semantic-conventions 0.66b0, and
# opentelemetry-instrumentation-logging 0.66b0 is the first whose _get_attributes returns
# (attributes, event_name): so the OTel floor is the pinned release.
FLOORS=(
  "opentelemetry-api==1.45.0" "opentelemetry-sdk==1.45.0" "opentelemetry-proto==1.45.0"
  "opentelemetry-exporter-otlp-proto-grpc==1.45.0" "opentelemetry-exporter-otlp-proto-http==1.45.0"
  "opentelemetry-instrumentation-logging==0.66b0"
  "grpcio==1.63.2" "protobuf==5.26.1" "ray==2.9.3" "duckdb==2.0.0"
)
TOOLS=("pytest>=7" "hypothesis>=6" "cloudpickle" "httpx" "zstandard")

if [ ! -x "$venv/bin/python" ]; then
  python -m venv "$venv"
  "$venv/bin/pip" install -q "${FLOORS[@]}" "${TOOLS[@]}"
fi
echo "== floor versions"
"$venv/bin/pip" list 2>/dev/null | grep -iE "^(opentelemetry-(api|sdk|proto|exporter-otlp-proto-grpc|exporter-otlp-proto-http|instrumentation-logging)|grpcio|protobuf|ray|duckdb) "

echo "== upstream assumptions and a smoke subset at the floors"
# the checkout on PYTHONPATH (nothing installed into the venv but the dependencies), on the pure-Python
# twins: the compiled modules in the checkout are built for the main interpreter's packages (CI sets
# LENS_REQUIRE_CYTHON=1 for its own runs; this one asks for pure Python on purpose)
PYTHONPATH="$PWD" LENS_PURE_PYTHON=1 LENS_REQUIRE_CYTHON=0 "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" \
  tests/upstream tests/test_architecture.py::test_the_sdk_is_imported_only_in_the_sdk_room_and_the_exporters \
  tests/bridge/test_setup.py tests/bridge/test_exporters.py tests/bridge/test_log_redaction.py \
  tests/bridge/test_logging_bridge.py tests/bridge/test_runid.py tests/bridge/test_sampling.py \
  tests/bridge/test_native_sampling.py tests/bridge/test_fork.py tests/report/test_report_reader.py
