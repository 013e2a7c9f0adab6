"""The workload: the schema with every default and its source, loading, `--set`, provenance,
and model resolution (exact parameter counts)."""
