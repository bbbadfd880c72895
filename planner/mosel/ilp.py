"""The online integer program of MOSEL Sec. 5.2 (policy ``optimized``), under a solve-time budget.

For the queued jobs in deadline order, pick one precomputed strategy ``c`` per job:

    maximise    sum_j n_j * sum_c acc[j,c] * x[j,c] / sum_j n_j        (mean accuracy per request)
    subject to  sum_c x[j,c] = 1                                       (one strategy per job)
                t0 + sum_{i <= j} sum_c lat[i,c] * x[i,c] <= deadline_j   for every job j

with ``t0`` the time the worker is free. The paper states one time budget (the last job's
deadline); a constraint per job keeps "no job misses" true when earlier jobs have no slack. Of
two equally accurate plans the faster is taken. The candidate sets are the Pareto fronts of the
strategy matrix at or above each job's floor, so the floor holds by construction.

The program is solved exactly by dynamic programming (:func:`solve_scope`); the general solvers
it replaced (CBC through pulp, HiGHS) are kept beside the benchmark that compares them
(``bench/mosel_solve.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .timeline import EPS_S, QueuePlan

# Plans whose accuracy sums differ by less than this are equally accurate (float sums).
ACC_EPS = 1e-9
# A front this wide is left to the greedy answer (the budget's guard against a pathological queue).
MAX_FRONT = 200_000


@dataclass(frozen=True, slots=True)
class SolveResult:
    """``idx`` is the chosen candidate index per job of the scope, or ``None`` when the solver did
    not prove an optimum within the budget (the caller then uses the greedy answer)."""

    idx: list[int] | None
    wall_s: float
    status: str


def solve_scope(plan: QueuePlan, upto: int, t0: float, budget_s: float) -> SolveResult:
    """Re-select strategies for jobs ``0..upto`` of ``plan``, within ``budget_s`` of wall time.

    Solved exactly by dynamic programming over the jobs in deadline order: after each job, the
    plans of the jobs so far that no other plan beats on both time used and accuracy (a Pareto
    front of (finish time, requests x accuracy)), each meeting every deadline so far. The last
    front's most accurate plan is the optimum (the fastest of equally accurate ones). Unlike a
    general solver it needs no process (CBC through pulp: 10-50 ms a solve on a busy 2-core
    machine, during which new jobs wait at the gate for the monitor's pass) and no model building
    under the GIL; ``bench/mosel_solve.py`` compares it with CBC and HiGHS on the same queues.
    """
    start = time.perf_counter()
    if budget_s <= 0:
        return SolveResult(None, 0.0, "no_budget")
    end = start + budget_s
    t = np.zeros(1)  # time used by each plan on the front
    acc = np.zeros(1)  # sum of requests x accuracy of each plan
    parent: list[np.ndarray] = []  # per job: for each plan on its front, the plan it extends
    choice: list[np.ndarray] = []  # ... and the candidate it gives the job
    for j in range(upto + 1):
        cost = np.array([plan.cost(j, c) for c in range(len(plan.cands[j]))])
        gain = np.array([plan.jobs[j].size * s.accuracy for s in plan.cands[j]])
        tt = (t[:, None] + cost[None, :]).ravel()
        aa = (acc[:, None] + gain[None, :]).ravel()
        ok = np.flatnonzero(tt <= plan.jobs[j].deadline - t0 + EPS_S)
        if not len(ok):
            return SolveResult(None, time.perf_counter() - start, "infeasible")
        # Fastest first (most accurate first among equally fast); a plan stays only when it is
        # more accurate than every faster one.
        ok = ok[np.lexsort((-aa[ok], tt[ok]))]
        best_before = np.maximum.accumulate(np.concatenate(([-np.inf], aa[ok][:-1])))
        ok = ok[aa[ok] > best_before + ACC_EPS]
        if len(ok) > MAX_FRONT or time.perf_counter() > end:
            return SolveResult(None, time.perf_counter() - start, "budget")
        t, acc = tt[ok], aa[ok]
        parent.append(ok // len(cost))
        choice.append(ok % len(cost))
    k = int(np.argmax(acc))  # the front's most accurate plan is its last, the slowest of them
    idx = [0] * (upto + 1)
    for j in range(upto, -1, -1):
        idx[j] = int(choice[j][k])
        k = int(parent[j][k])
    return SolveResult(idx, time.perf_counter() - start, "optimal")
