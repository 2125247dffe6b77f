"""The SDK room: OpenTelemetry providers, the span pipeline and every private upstream touch point."""
