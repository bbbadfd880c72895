"""The profile of a model: the measured trade-offs every planner decision rests on.

Written by the offline profiler (``adaserve profile``) to ``Keys.profile(model)`` as JSON and to
``<data_dir>/profiles/<model>.json``; read by the planner and the simulator. Part of the contract
because producers of profiles (workers, profiler) and consumers (planner) must not import each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adaserve.broker.errors import DataError
from adaserve.broker.violations import explain

PROFILE_VERSION: Literal[1] = 1


class _P(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LatencyPoint(_P):
    """Batch latency of one variant on one device at one batch size (medians over repeats)."""

    variant: str
    device: str
    batch_size: int = Field(ge=1)
    p50_ms: float = Field(ge=0)
    p90_ms: float = Field(ge=0)
    mean_ms: float = Field(ge=0)
    repeats: int = Field(ge=1)


class QualityPoint(_P):
    variant: str
    metric: Literal["accuracy", "perplexity"]
    value: float
    n: int = Field(ge=1)


class ExecHistogram(_P):
    """Per-request execution time of a dynamic variant (early exits): bin edges and counts."""

    variant: str
    device: str
    edges_ms: list[float]
    counts: list[int]
    exits: dict[str, float] = Field(default_factory=dict)  # exit -> fraction of requests


class PartPoint(_P):
    """One part of a split model: latency and the size of the tensor it hands on."""

    variant: str
    device: str
    batch_size: int = Field(ge=1)
    p50_ms: float = Field(ge=0)
    out_bytes: int = Field(ge=0)


class Profile(_P):
    version: Literal[1] = PROFILE_VERSION
    model: str
    created_ms: float
    host: dict[str, str | None] = Field(default_factory=dict)
    latency: list[LatencyPoint] = Field(default_factory=list)
    quality: list[QualityPoint] = Field(default_factory=list)
    exec_hist: list[ExecHistogram] = Field(default_factory=list)
    parts: list[PartPoint] = Field(default_factory=list)

    def latency_ms(self, variant: str, device: str, batch_size: int) -> float | None:
        for p in self.latency:
            if p.variant == variant and p.device == device and p.batch_size == batch_size:
                return p.p50_ms
        return None

    def quality_of(self, variant: str) -> float | None:
        for q in self.quality:
            if q.variant == variant:
                return q.value
        return None

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Profile:
        """The profile in ``text``; ``DataError`` (a ``ValueError``) saying what is wrong otherwise."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise DataError(f"not an adaserve profile: {explain(exc)}") from None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.model_dump(), indent=1))
