"""The offline integer program against brute force on small cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from adaserve.broker.errors import AdaserveError
from adaserve.planner.mosel import ACC_TOL, SubsetCosts, cheapest_mix, cheapest_row


def brute(costs: SubsetCosts, n: int, floor: float) -> float | None:
    """The least latency over every split of n requests into subsets that meets the floor."""
    best = None
    for split in itertools.product(range(n + 1), repeat=len(costs.subsets)):
        if sum(split) != n:
            continue
        acc = sum(a * k for a, k in zip(costs.accuracy, split)) / n
        if acc < floor - ACC_TOL:
            continue
        lat = sum(costs.run_ms(m, k) for m, k in enumerate(split))
        best = lat if best is None else min(best, lat)
    return best


def _random_costs(rng: np.random.Generator, subsets: int, max_batch: int) -> SubsetCosts:
    acc = tuple(float(a) for a in rng.uniform(0.4, 0.95, subsets))
    # Non-monotone rows on purpose: the split into batches must still be optimal.
    rows = tuple(tuple(float(v) for v in rng.uniform(0.5, 6.0, max_batch)) for _ in range(subsets))
    return SubsetCosts(tuple(f"s{i}" for i in range(subsets)), acc, rows)


@pytest.mark.parametrize("seed", range(6))
def test_ilp_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    costs = _random_costs(rng, int(rng.integers(2, 4)), int(rng.integers(2, 4)))
    for n in (1, 2, 5, 7):
        for floor in (min(costs.accuracy), float(rng.uniform(min(costs.accuracy), max(costs.accuracy))),
                      max(costs.accuracy)):
            s = cheapest_mix(costs, n, floor)
            assert s.size == n and s.meets(floor)
            assert s.latency_s * 1e3 == pytest.approx(brute(costs, n, floor), abs=1e-4)


def test_floor_equal_to_a_subset_accuracy_stays_feasible(costs: SubsetCosts) -> None:
    s = cheapest_mix(costs, 3, 0.85)
    assert s.meets(0.85)
    assert s.latency_s * 1e3 == pytest.approx(brute(costs, 3, 0.85), abs=1e-4)


def test_floor_above_every_subset_is_an_error(costs: SubsetCosts) -> None:
    with pytest.raises(AdaserveError):
        cheapest_mix(costs, 2, 0.97)
    with pytest.raises(ValueError):
        cheapest_mix(costs, 0, 0.7)


def test_row_reuses_answers_and_stays_optimal(costs: SubsetCosts) -> None:
    floors = [0.62, 0.7, 0.8, 0.85, 0.9, 0.96]
    row = cheapest_row(costs, 5, floors)
    for s, f in zip(row, floors):
        assert s.meets(f)
        assert s.latency_s * 1e3 == pytest.approx(brute(costs, 5, f), abs=1e-4)
    assert [s.latency_s for s in row] == sorted(s.latency_s for s in row)
