"""OpenTelemetry: ``instrument()``, the spans it emits, the run check."""
