from __future__ import annotations

import numpy as np

from adaserve.planner.mosel import QueuedJob, StrategyMatrix
from adaserve.planner.mosel.greedy import can_raise, lower_aggressive, lower_random, raise_round_robin
from adaserve.planner.mosel.timeline import QueuePlan, hopeless


def _plan(matrix: StrategyMatrix, deadlines: list[float], floor: float = 0.62) -> QueuePlan:
    jobs = [QueuedJob(f"j{k}", 5, floor, 0.0, d) for k, d in enumerate(deadlines)]
    cands = [matrix.candidates(5, floor) for _ in jobs]
    return QueuePlan(jobs, cands, [len(c) - 1 for c in cands])


def test_lower_random_stops_as_soon_as_the_violator_fits(matrix: StrategyMatrix) -> None:
    rich = matrix.richest(5).latency_s
    fast = matrix.candidates(5, 0.62)[0].latency_s
    # four jobs; the last fits if one of the three ahead of it (or itself) runs fast
    plan = _plan(matrix, [rich + 1e-6, 2 * rich + 1e-6, 3 * rich + 1e-6, 3 * rich + fast + 1e-5])
    assert plan.first_violator(0.0) == 3
    lower_random(plan, 0.0, np.random.default_rng(0))
    assert plan.first_violator(0.0) is None
    assert sum(1 for i in plan.idx if i == 0) == 1


def test_lower_random_is_seeded(matrix: StrategyMatrix) -> None:
    rich = matrix.richest(5).latency_s
    picks = set()
    for seed in range(8):
        plan = _plan(matrix, [3.5 * rich] * 4)
        lower_random(plan, 0.0, np.random.default_rng(seed))
        again = _plan(matrix, [3.5 * rich] * 4)
        lower_random(again, 0.0, np.random.default_rng(seed))
        assert plan.idx == again.idx
        picks.add(tuple(plan.idx))
    assert len(picks) > 1  # the choice of jobs really is random


def test_aggressive_touches_nothing_without_pressure(matrix: StrategyMatrix) -> None:
    plan = _plan(matrix, [1.0, 1.0])
    before = list(plan.idx)
    lower_aggressive(plan, 0.0)
    assert plan.idx == before


def test_raise_spreads_spare_time_and_keeps_deadlines(matrix: StrategyMatrix) -> None:
    fast = matrix.candidates(5, 0.62)[0].latency_s
    rich = matrix.richest(5).latency_s
    plan = _plan(matrix, [3 * fast + 1.2 * (rich - fast)] * 3)
    plan.idx = [0, 0, 0]
    assert can_raise(plan, 0.0)
    raise_round_robin(plan, 0.0)
    assert plan.first_violator(0.0) is None
    assert not can_raise(plan, 0.0)
    assert min(plan.idx) >= 1  # spread over the queue, not all handed to the first job


def test_hopeless_leaves_out_only_what_cannot_make_it(matrix: StrategyMatrix) -> None:
    fast = matrix.candidates(5, 0.62)[0].latency_s
    plan = _plan(matrix, [fast, fast * 1.5, 3 * fast])
    assert hopeless(plan, 0.0) == {1}
    assert hopeless(plan, 10.0) == {0, 1, 2}
