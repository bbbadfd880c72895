"""The strategy matrix (MOSEL Fig. 3b): the cheapest mix per (job size, accuracy-floor grid point).

Built offline by :mod:`.offline`, saved as JSON next to the profile, and looked up online in O(1):
a requested floor is rounded up to the nearest grid floor at or above it, so a looked-up strategy
always meets the requested floor. Per job size the distinct entries form a latency/accuracy
Pareto front; :meth:`StrategyMatrix.candidates` hands the online stage the part of that front a
job may use (every entry at or above its floor), cheapest first.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.profiles import Profile

from .costs import SubsetCosts
from .offline import cheapest_row
from .strategy import ACC_TOL, Strategy
from .synthetic import is_synthetic

MATRIX_VERSION: Literal[1] = 1


def floor_grid(lo: float, hi: float, step: float) -> list[float]:
    """``lo, lo+step, ...`` below ``hi``, then ``hi`` itself so the best accuracy is on the grid."""
    if not step > 0:
        raise ValueError("the floor grid step must be positive")
    n = int(math.floor((hi - lo) / step + 1e-9))
    grid = [round(lo + i * step, 12) for i in range(n + 1) if lo + i * step < hi - 1e-12]
    return [*grid, hi]


class StrategyMatrix(BaseModel):
    """``entries[n-1][i]`` = counts per subset of the cheapest mix for n requests, floor ``floors[i]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = MATRIX_VERSION
    model: str
    device: str
    profile_created_ms: float
    synthetic: bool
    subsets: list[str]
    accuracy: list[float]
    batch_ms: list[list[float]]
    floor_step: float = Field(gt=0)
    floors: list[float]
    max_size: int = Field(ge=1)
    entries: list[list[list[int]]]
    build_s: float = 0.0

    _costs: SubsetCosts = PrivateAttr()
    _rows: list[list[Strategy]] = PrivateAttr()
    _fronts: list[list[Strategy]] = PrivateAttr()
    _starts: list[list[int]] = PrivateAttr()

    def model_post_init(self, _ctx: object) -> None:
        if len(self.entries) != self.max_size or any(len(r) != len(self.floors) for r in self.entries):
            raise ValueError("entries must have one row per job size and one entry per floor")
        self._costs = SubsetCosts(tuple(self.subsets), tuple(self.accuracy),
                                  tuple(tuple(r) for r in self.batch_ms))
        self._rows, self._fronts, self._starts = [], [], []
        for n, row in enumerate(self.entries, start=1):
            strategies = [self._costs.strategy(tuple(c)) for c in row]
            for s, f in zip(strategies, self.floors):
                if s.size != n or not s.meets(f):
                    raise ValueError(f"entry {s.counts} for n={n} does not meet floor {f}")
            self._index(strategies)

    def _index(self, strategies: list[Strategy]) -> None:
        front: list[Strategy] = []
        for s in sorted(set(strategies), key=lambda s: (s.accuracy, s.latency_s)):
            if front and s.accuracy <= front[-1].accuracy + 1e-12:
                continue  # as accurate as the last one kept, and no faster
            while front and front[-1].latency_s >= s.latency_s:
                front.pop()  # dominated: no more accurate and no faster
            front.append(s)
        starts = [next(j for j, s in enumerate(front) if s.meets(f)) for f in self.floors]
        self._rows.append(strategies)
        self._fronts.append(front)
        self._starts.append(starts)

    @property
    def costs(self) -> SubsetCosts:
        return self._costs

    def floor_index(self, floor: float) -> int:
        """Index of the nearest grid floor at or above ``floor``, in O(1)."""
        if floor > self.floors[-1] + ACC_TOL:
            raise InvalidMessage("accuracy_floor", f"accuracy floor {floor} is above what "
                                 f"{self.model} reaches with any modality ({self.floors[-1]})")
        i = max(0, math.ceil((floor - self.floors[0]) / self.floor_step - 1e-9))
        i = min(i, len(self.floors) - 1)
        if self.floors[i] < floor - ACC_TOL:  # float rounding put us one below
            i += 1
        return i

    def _check_size(self, n: int) -> None:
        if not 1 <= n <= self.max_size:
            raise InvalidMessage("limit", f"job of {n} requests; the strategy matrix of "
                                 f"{self.model} covers 1..{self.max_size}")

    def lookup(self, n: int, floor: float) -> Strategy:
        """The cheapest mix for ``n`` requests meeting ``floor`` (the matrix entry), O(1)."""
        self._check_size(n)
        return self._rows[n - 1][self.floor_index(floor)]

    def candidates(self, n: int, floor: float) -> list[Strategy]:
        """The Pareto strategies meeting ``floor`` for ``n`` requests, cheapest (least accurate) first."""
        self._check_size(n)
        front = self._fronts[n - 1]
        return front[self._starts[n - 1][self.floor_index(floor)]:]

    def richest(self, n: int) -> Strategy:
        """The most accurate strategy for ``n`` requests (what a new job starts with)."""
        self._check_size(n)
        return self._fronts[n - 1][-1]

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.model_dump()))

    @classmethod
    def load(cls, path: Path) -> StrategyMatrix:
        return cls.model_validate_json(path.read_text())


def matrix_path(profile_path: Path) -> Path:
    """Where the matrix of a profile lives: ``<model>.mosel.json`` next to ``<model>.json``."""
    return profile_path.with_name(profile_path.stem + ".mosel.json")


def build_matrix(costs: SubsetCosts, max_size: int, *, step: float = 0.01, model: str = "",
                 device: str = "cpu", profile: Profile | None = None,
                 progress: Callable[[int], None] | None = None) -> StrategyMatrix:
    """Solve the offline program for every size ``1..max_size`` and grid floor; ``progress(n)``
    is called after each size."""
    t0 = time.perf_counter()
    floors = floor_grid(costs.min_accuracy, costs.max_accuracy, step)
    entries = []
    for n in range(1, max_size + 1):
        entries.append([list(s.counts) for s in cheapest_row(costs, n, floors)])
        if progress:
            progress(n)
    return StrategyMatrix(
        model=profile.model if profile else model, device=device,
        profile_created_ms=profile.created_ms if profile else 0.0,
        synthetic=is_synthetic(profile) if profile else True,
        subsets=list(costs.subsets), accuracy=list(costs.accuracy),
        batch_ms=[list(r) for r in costs.batch_ms], floor_step=step, floors=floors,
        max_size=max_size, entries=entries, build_s=time.perf_counter() - t0)
