"""OpenTelemetry bridge for lens: setup, exporters, propagation and tools."""
