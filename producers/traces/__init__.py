"""Bundled request traces (data only; ``adaserve.producers.trace`` reads them)."""
