"""Run bundles: the hash-chained trace, the manifest and the atomic run directory."""
