"""OpenTelemetry bridge for Lens: the SDK is imported lazily, only when exporting."""
