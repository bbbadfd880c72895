"""Bundled request traces (data only; ``adaserve.workload.trace`` reads them)."""
