from __future__ import annotations

import numpy as np
import pytest

from adaserve.planner.mosel import MODALITY_POLICIES, ModalitySelector, StrategyMatrix, SubsetCosts
from adaserve.planner.mosel.metrics import summarize
from adaserve.planner.mosel.sim import simulate
from adaserve.planner.mosel.workload import WorkloadSpec, arrival_times, make_jobs

SPEC = WorkloadSpec(size_mean=4, size_std=2, max_size=6, slo_mult=4.0)


def _run(matrix: StrategyMatrix, costs: SubsetCosts, policy: str, rate: float, seed: int,
         true: SubsetCosts | None = None, learn_rate: float = 0.2) -> list:
    gaps = np.random.default_rng(99).exponential(1.0, 500) * np.repeat([0.2, 3.0], 250)  # bursty
    jobs = make_jobs(costs, SPEC, arrival_times(gaps, rate, 150, seed), seed)
    sel = ModalitySelector(matrix, policy, seed=seed, solve_budget_s=2.0, learn_rate=learn_rate)
    return simulate(jobs, sel, true or costs)


@pytest.mark.parametrize("policy", MODALITY_POLICIES)
def test_same_seed_same_run(matrix: StrategyMatrix, costs: SubsetCosts, policy: str) -> None:
    a = _run(matrix, costs, policy, 400.0, 3)
    b = _run(matrix, costs, policy, 400.0, 3)
    assert a == b
    assert len(a) == 150 and len({o.job.job_id for o in a}) == 150  # every job ends exactly once
    s = summarize(a)
    assert s["floor_violations"] == 0
    assert s["completed"] + s["late"] + s["expired"] == 150


def test_exact_profile_means_no_job_runs_late(matrix: StrategyMatrix, costs: SubsetCosts) -> None:
    for policy in MODALITY_POLICIES:
        s = summarize(_run(matrix, costs, policy, 600.0, 1))
        assert s["late"] == 0  # with true = believed costs, misses are expirations, not overruns


def test_modality_aware_beats_none_under_overload(matrix: StrategyMatrix, costs: SubsetCosts) -> None:
    none = summarize(_run(matrix, costs, "none", 600.0, 2))
    aware = summarize(_run(matrix, costs, "aggressive", 600.0, 2))
    assert aware["slo_violation_ratio"] < none["slo_violation_ratio"]
    assert aware["accuracy"]["mean"] < none["accuracy"]["mean"]  # it pays in accuracy


def test_latency_feedback_repairs_an_underestimating_profile(matrix: StrategyMatrix, costs: SubsetCosts) -> None:
    blind = summarize(_run(matrix, costs, "random", 500.0, 4, true=costs.scaled(1.5), learn_rate=0.0))
    taught = summarize(_run(matrix, costs, "random", 500.0, 4, true=costs.scaled(1.5)))
    assert blind["late"] > 0
    assert taught["late"] < blind["late"]
    assert blind["floor_violations"] == taught["floor_violations"] == 0


def test_true_costs_must_match_the_matrix(matrix: StrategyMatrix) -> None:
    other = SubsetCosts(("x",), (0.9,), ((1.0,),))
    with pytest.raises(ValueError):
        simulate([], ModalitySelector(matrix, "none"), other)
