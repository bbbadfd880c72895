"""The bundled request traces (``workload/traces/*.csv.gz``): loading, and how they were made.

Each file holds ``t_us,context_tokens,generated_tokens``: arrival time in microseconds since the
trace's first request (the source's timestamps have microsecond resolution, so this is lossless),
and the request's token counts. ``ATTRIBUTION.md`` next to the files says where they come from.
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from datetime import datetime
from importlib.resources import files
from pathlib import Path

import numpy as np

from adaserve.broker.errors import DataError, InvalidArgument

TRACES = ("conv", "code")
_HEADER = "t_us,context_tokens,generated_tokens"


@dataclass(frozen=True)
class Trace:
    name: str
    t_us: np.ndarray
    context_tokens: np.ndarray
    generated_tokens: np.ndarray

    @property
    def timestamps_s(self) -> np.ndarray:
        return self.t_us.astype(np.float64) / 1e6

    @property
    def gaps_s(self) -> np.ndarray:
        return np.diff(self.timestamps_s)

    @property
    def mean_rate(self) -> float:
        """Arrivals per second over the trace's span."""
        span = float(self.t_us[-1] - self.t_us[0]) / 1e6
        return (len(self.t_us) - 1) / span if span > 0 else 0.0

    def __len__(self) -> int:
        return int(self.t_us.size)


def load_trace(name: str = "conv") -> Trace:
    """One of ``TRACES`` from the package data."""
    if name not in TRACES:
        raise InvalidArgument(f"unknown trace {name!r} (bundled: {', '.join(TRACES)})")
    raw = files("adaserve.workload.traces").joinpath(f"azure_{name}_2023.csv.gz").read_bytes()
    with gzip.open(io.BytesIO(raw), "rt") as fh:
        if fh.readline().strip() != _HEADER:
            raise DataError(f"trace {name!r} does not start with the header {_HEADER!r}")
        table = np.loadtxt(fh, delimiter=",", dtype=np.int64, ndmin=2)
    return Trace(name, table[:, 0], table[:, 1], table[:, 2])


def compact(source_csv: Path, target_gz: Path) -> int:
    """Convert an AzureLLMInferenceDataset2023 CSV into the bundled form; returns the row count.

    Kept so that the bundled files can be rebuilt from the public originals and checked.
    """
    with open(source_csv, newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows or [c.strip() for c in rows[0]] != ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]:
        raise DataError(f"{source_csv} is not an Azure LLM inference trace")
    body = [r for r in rows[1:] if r]
    # The source has 7 fractional digits whose last is always 0: microseconds lose nothing.
    stamps = [datetime.strptime(r[0][:26], "%Y-%m-%d %H:%M:%S.%f") for r in body]
    t0 = stamps[0]
    lines = [_HEADER]
    for ts, r in zip(stamps, body):
        delta = ts - t0
        us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        lines.append(f"{us},{int(r[1])},{int(r[2])}")
    data = ("\n".join(lines) + "\n").encode()
    target_gz.parent.mkdir(parents=True, exist_ok=True)
    with open(target_gz, "wb") as out, gzip.GzipFile(filename="", fileobj=out, mode="wb", compresslevel=9, mtime=0) as gz:
        gz.write(data)
    return len(body)
