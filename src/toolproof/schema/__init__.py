"""JSON Schema analysis: validators, local references, expansion and fan-out limits."""
