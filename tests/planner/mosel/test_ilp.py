"""The online integer program against brute force, and its budget."""

from __future__ import annotations

import itertools

import numpy as np

from adaserve.planner.mosel import QueuedJob, StrategyMatrix
from adaserve.planner.mosel.ilp import CBC_TOL_S, GAP_REL, solve_scope
from adaserve.planner.mosel.timeline import QueuePlan


def _plan(matrix: StrategyMatrix, rng: np.random.Generator) -> QueuePlan:
    jobs, cands = [], []
    t = 0.0
    for k in range(int(rng.integers(1, 4))):
        n = int(rng.integers(1, matrix.max_size + 1))
        f = float(rng.uniform(0.62, 0.9))
        c = matrix.candidates(n, f)[:4]
        t += float(rng.uniform(0.3, 1.2)) * c[-1].latency_s
        jobs.append(QueuedJob(f"j{k}", n, f, 0.0, t))
        cands.append(c)
    return QueuePlan(jobs, cands, [len(c) - 1 for c in cands])


def _value(plan: QueuePlan, choice: tuple[int, ...]) -> float:
    total = sum(j.size for j in plan.jobs)
    return sum(plan.jobs[j].size * plan.cands[j][c].accuracy for j, c in enumerate(choice)) / total


def _feasible(plan: QueuePlan, choice: tuple[int, ...], t0: float) -> bool:
    t = t0
    for j, c in enumerate(choice):
        t += plan.cands[j][c].latency_s
        if t > plan.jobs[j].deadline - CBC_TOL_S:
            return False
    return True


def test_matches_brute_force_within_the_gap(matrix: StrategyMatrix) -> None:
    rng = np.random.default_rng(5)
    solved = 0
    for _ in range(25):
        plan = _plan(matrix, rng)
        combos = [c for c in itertools.product(*(range(len(x)) for x in plan.cands)) if _feasible(plan, c, 0.0)]
        res = solve_scope(plan, len(plan) - 1, 0.0, 10.0)
        if not combos:
            assert res.idx is None
            continue
        assert res.idx is not None, res.status
        assert _feasible(plan, tuple(res.idx), 0.0)
        best = max(_value(plan, c) for c in combos)
        assert _value(plan, tuple(res.idx)) >= best * (1 - GAP_REL) - 1e-12
        solved += 1
    assert solved > 10


def test_budget_is_honoured(matrix: StrategyMatrix) -> None:
    plan = _plan(matrix, np.random.default_rng(1))
    assert solve_scope(plan, len(plan) - 1, 0.0, 0.0).status == "no_budget"
    res = solve_scope(plan, len(plan) - 1, 0.0, 1e-7)
    assert res.idx is None
    assert res.status in {"budget_spent_building", "late"} or res.status.startswith("not_optimal")
