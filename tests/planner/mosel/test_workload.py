from __future__ import annotations

import numpy as np
import pytest

from adaserve.planner.mosel import SubsetCosts
from adaserve.planner.mosel.workload import WorkloadSpec, arrival_times, make_jobs, size_distribution


def test_arrivals_hit_the_rate_and_keep_bursts() -> None:
    gaps = np.tile([0.01, 0.01, 0.01, 1.0], 100)
    t = arrival_times(gaps, 50.0, 300, seed=2)
    assert t.size == 300 and np.all(np.diff(t) >= 0)
    d = np.diff(t)
    assert d.max() / np.median(d) > 20  # the long gaps survive scaling
    assert 300 / t[-1] == pytest.approx(50.0, rel=0.35)
    assert np.array_equal(t, arrival_times(gaps, 50.0, 300, seed=2))
    assert arrival_times(None, 50.0, 100, seed=1).size == 100


def test_size_distribution_is_a_distribution() -> None:
    p = size_distribution(WorkloadSpec(size_mean=16, size_std=6, max_size=32))
    assert p.sum() == pytest.approx(1.0)
    assert p.argmax() == 15  # size 16


def test_jobs_are_reproducible_and_in_range(costs: SubsetCosts) -> None:
    spec = WorkloadSpec(size_mean=3, size_std=3, max_size=6, slo_mult=5)
    arr = np.linspace(0, 1, 200)
    a, b = make_jobs(costs, spec, arr, 4), make_jobs(costs, spec, arr, 4)
    assert a == b
    assert all(1 <= j.size <= 6 and 0.62 <= j.floor <= 0.96 and j.deadline > j.arrival for j in a)
    big = max(a, key=lambda j: j.size)
    small = min(a, key=lambda j: j.size)
    assert big.deadline - big.arrival > small.deadline - small.arrival
