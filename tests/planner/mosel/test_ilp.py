"""The online integer program against brute force (exactly optimal), the general solvers, and its budget."""

from __future__ import annotations

import itertools

import numpy as np

from adaserve.bench.mosel_solve import SOLVERS, compare
from adaserve.planner.mosel import QueuedJob, StrategyMatrix
from adaserve.planner.mosel.ilp import solve_scope
from adaserve.planner.mosel.timeline import EPS_S, QueuePlan


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
        if t > plan.jobs[j].deadline + EPS_S:
            return False
    return True


def test_matches_brute_force(matrix: StrategyMatrix) -> None:
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
        assert _value(plan, tuple(res.idx)) >= best - 1e-12
        solved += 1
    assert solved > 10


def test_of_equally_accurate_plans_the_faster_is_taken(matrix: StrategyMatrix) -> None:
    rng = np.random.default_rng(9)
    for _ in range(25):
        plan = _plan(matrix, rng)
        res = solve_scope(plan, len(plan) - 1, 0.0, 10.0)
        if res.idx is None:
            continue
        combos = [c for c in itertools.product(*(range(len(x)) for x in plan.cands)) if _feasible(plan, c, 0.0)]
        best = _value(plan, tuple(res.idx))
        tied = [c for c in combos if _value(plan, c) >= best - 1e-9]
        spent = sum(plan.cost(j, c) for j, c in enumerate(res.idx))
        assert spent <= min(sum(plan.cost(j, c) for j, c in enumerate(t)) for t in tied) + 1e-12


def test_a_queue_that_cannot_fit_has_no_answer(matrix: StrategyMatrix) -> None:
    plan = _plan(matrix, np.random.default_rng(2))
    late = plan.cands[0][0].latency_s * 2
    assert solve_scope(plan, len(plan) - 1, plan.jobs[0].deadline - late / 4, 1.0).status == "infeasible"


def test_no_general_solver_finds_a_more_accurate_plan(matrix: StrategyMatrix) -> None:
    """CBC and HiGHS (the benchmark's references) stop within their gap of the optimum: never above it."""
    report = compare(matrix, sizes=(3, 6), repeats=3, seed=4)
    for q in report["queues"].values():
        assert set(q["below_dp"]) == set(SOLVERS)
        assert all(v >= -1e-9 for v in q["below_dp"].values())
        assert all(len(q[f"{k}_ms"]) == 3 for k in SOLVERS)


def test_budget_is_honoured(matrix: StrategyMatrix) -> None:
    rng = np.random.default_rng(1)
    plan = next(p for p in (_plan(matrix, rng) for _ in range(50)) if solve_scope(p, len(p) - 1, 0.0, 10.0).idx)
    assert solve_scope(plan, len(plan) - 1, 0.0, 0.0).status == "no_budget"
    res = solve_scope(plan, len(plan) - 1, 0.0, 1e-9)
    assert res.idx is None
    assert res.status == "budget"
