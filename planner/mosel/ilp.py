"""The online integer program of MOSEL Sec. 5.2 (policy ``optimized``), under a solve-time budget.

For a set ``J`` of queued jobs (those up to and including the first job that would miss its
deadline, or the whole queue when none would), pick one precomputed strategy ``c`` per job:

    maximise    sum_j n_j * sum_c acc[j,c] * x[j,c] / sum_j n_j        (mean accuracy per request)
    subject to  sum_c x[j,c] = 1                                       (one strategy per job)
                sum_{j in J} sum_c lat[j,c] * x[j,c] <= T              (the paper's time budget)

with ``T`` = the last job's deadline minus ``t0``, the time the worker is free. We also add the
same constraint for every prefix of ``J`` (each job's own deadline), which the single budget
implies only when all earlier jobs have slack; it keeps "no job in J misses" true. A tie-break of
``1e-6`` per unit of normalised latency prefers the faster of two equally accurate plans. The
candidate sets are the Pareto fronts of the strategy matrix at or above each job's floor, so the
floor holds by construction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pulp

from .offline import cbc
from .timeline import EPS_S, QueuePlan

TIE_BREAK = 1e-6
CBC_TOL_S = 1e-7
# Optimal to within 0.2% of the mean accuracy: proving the last bit costs CBC far more time
# (many near-equal mixes) than the accuracy it could add.
GAP_REL = 2e-3


@dataclass(frozen=True, slots=True)
class SolveResult:
    """``idx`` is the chosen candidate index per job of the scope, or ``None`` when the solver did
    not prove an optimum within the budget (the caller then uses the greedy answer)."""

    idx: list[int] | None
    wall_s: float
    status: str


def solve_scope(plan: QueuePlan, upto: int, t0: float, budget_s: float) -> SolveResult:
    """Re-select strategies for jobs ``0..upto`` of ``plan``, within ``budget_s`` of wall time."""
    start = time.perf_counter()
    if budget_s <= 0:
        return SolveResult(None, 0.0, "no_budget")
    scope = range(upto + 1)
    total_n = sum(plan.jobs[j].size for j in scope)
    horizon = max(plan.jobs[upto].deadline - t0, EPS_S)
    prob = pulp.LpProblem("mosel_online", pulp.LpMaximize)
    x = {(j, c): prob.add_variable(f"x_{j}_{c}", cat="Binary")
         for j in scope for c in range(len(plan.cands[j]))}
    prob += pulp.lpSum(
        (plan.jobs[j].size * s.accuracy / total_n - TIE_BREAK * plan.cost(j, c) / horizon) * x[j, c]
        for j in scope for c, s in enumerate(plan.cands[j]))
    for j in scope:
        prob += pulp.lpSum(x[j, c] for c in range(len(plan.cands[j]))) == 1
    # Finish times as continuous variables keep the constraint matrix sparse (one row per job
    # instead of a row that sums every earlier job's choices).
    prev: pulp.LpAffineExpression | pulp.LpVariable | float = 0.0
    for k in scope:
        fin = prob.add_variable(f"f_{k}", lowBound=0)
        prob += fin == prev + pulp.lpSum(plan.cost(k, c) * x[k, c] for c in range(len(plan.cands[k])))
        # Tightened by CBC's feasibility tolerance so that its answer holds in exact arithmetic.
        prob += fin <= plan.jobs[k].deadline - t0 - CBC_TOL_S
        prev = fin
    remaining = budget_s - (time.perf_counter() - start)
    if remaining <= 0:
        return SolveResult(None, time.perf_counter() - start, "budget_spent_building")
    prob.solve(cbc(remaining, GAP_REL))
    wall = time.perf_counter() - start
    status = pulp.LpStatus[prob.status]
    if prob.sol_status != pulp.LpSolutionOptimal or status != "Optimal":
        return SolveResult(None, wall, f"not_optimal:{status}")
    if wall > budget_s:
        # An optimum that arrives after the budget is too late for the monitor to use.
        return SolveResult(None, wall, "late")
    idx = [next(c for c in range(len(plan.cands[j])) if (x[j, c].value() or 0) > 0.5) for j in scope]
    return SolveResult(idx, wall, "optimal")
