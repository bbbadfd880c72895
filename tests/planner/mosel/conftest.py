"""Small MOSEL fixtures: the synthetic av-digits costs cut to batches of 4, a 1..6 matrix."""

from __future__ import annotations

import pytest

from adaserve.planner.mosel import StrategyMatrix, SubsetCosts, build_matrix, synthetic_av_digits_profile


@pytest.fixture(scope="session")
def costs() -> SubsetCosts:
    return SubsetCosts.from_profile(synthetic_av_digits_profile(max_batch=4))


@pytest.fixture(scope="session")
def matrix(costs: SubsetCosts) -> StrategyMatrix:
    return build_matrix(costs, 6, step=0.05, model="av-digits")
