"""Constructed candidates (plain figures, no model files): a small model that suits task "a" and a
deeper one that suits task "b". Their partial depths cost 1-2% perplexity against the whole
model, as the real ones' do (ee-lm-s: 1.4% at depth 2 of 4 on Shakespeare)."""

from __future__ import annotations

import pytest

from adaserve.planner.helios.repository import Candidate, DepthFigures


def figures(depth: int, rate: float, ppl: float, *, load_s: float = 0.05, weight_mb: float = 1.0) -> DepthFigures:
    return DepthFigures(depth, {1: rate, 4: 3 * rate, 16: 8 * rate}, 1.0 / rate, int(weight_mb * 2**20), 2048,
                        load_s, 1.0 / rate, {"a": ppl, "b": ppl * 1.2}, {"a": 0.5, "b": 0.5})


def small() -> Candidate:
    return Candidate("small", "lm", 0.8, {1: figures(1, 400.0, 5.6), 2: figures(2, 250.0, 5.5)})


def deep() -> Candidate:
    return Candidate("deep", "lm", 0.8, {d: figures(d, 600.0 / d, 4.7 - 0.0125 * d, weight_mb=2.0)
                                         for d in (2, 4, 6, 8)})


@pytest.fixture
def cands() -> list[Candidate]:
    return [small(), deep()]
