"""The optimized policy's online integer program, side by side on the same queues: the exact
dynamic program the planner uses (``planner/mosel/ilp.py``), CBC in a process of its own through
pulp (what the pass used before, as the offline matrix still does), and HiGHS in this process
(``scipy.optimize.milp``).

The live planner's monitor solves while new jobs wait at the gate for its pass, so a solver's
wall time is time those jobs lose. The queues are the benchmark's: job sizes ~ Normal(16, 6),
floors uniform over the model's accuracy range, deadlines in the order they fall due, tight
enough that the richest mixes do not all fit (a pass with something to decide).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pulp
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from adaserve.planner.mosel.ilp import SolveResult, solve_scope
from adaserve.planner.mosel.matrix import StrategyMatrix
from adaserve.planner.mosel.offline import cbc
from adaserve.planner.mosel.queue import QueuedJob
from adaserve.planner.mosel.timeline import EPS_S, QueuePlan
from adaserve.planner.mosel.workload import WorkloadSpec

TIE_BREAK = 1e-6  # per unit of normalised latency: the faster of two equally accurate plans
CBC_TOL_S = 1e-7  # deadlines tightened by the solvers' feasibility tolerance
# The general solvers stop within 0.2% of the optimal mean accuracy: proving the last bit costs
# them far more time (many near-equal mixes) than the accuracy it could add.
GAP_REL = 2e-3


def queue(matrix: StrategyMatrix, n_jobs: int, rng: np.random.Generator, spec: WorkloadSpec) -> QueuePlan:
    """``n_jobs`` queued jobs at their richest mixes whose deadlines leave room for about half
    of the all-richest work: the solver has to trade accuracy for time."""
    jobs, cands, t = [], [], 0.0
    lo, hi = matrix.floors[0], matrix.floors[-1]
    for k in range(n_jobs):
        size = int(np.clip(round(rng.normal(spec.size_mean, spec.size_std)), 1, matrix.max_size))
        c = matrix.candidates(size, float(rng.uniform(lo, hi)))
        t += c[0].latency_s + 0.5 * (c[-1].latency_s - c[0].latency_s)
        jobs.append(QueuedJob(f"j{k}", size, c[-1].accuracy, 0.0, t))
        cands.append(c)
    return QueuePlan(jobs, cands, [len(c) - 1 for c in cands])


def solve_scope_cbc(plan: QueuePlan, upto: int, t0: float, budget_s: float) -> SolveResult:
    """The same program through pulp and CBC (what the online pass used before HiGHS)."""
    start = time.perf_counter()
    scope = range(upto + 1)
    total_n = sum(plan.jobs[j].size for j in scope)
    horizon = max(plan.jobs[upto].deadline - t0, EPS_S)
    prob = pulp.LpProblem("mosel_online", pulp.LpMaximize)
    x = {(j, c): prob.add_variable(f"x_{j}_{c}", cat="Binary") for j in scope for c in range(len(plan.cands[j]))}
    prob += pulp.lpSum((plan.jobs[j].size * s.accuracy / total_n - TIE_BREAK * plan.cost(j, c) / horizon) * x[j, c]
                       for j in scope for c, s in enumerate(plan.cands[j]))
    for j in scope:
        prob += pulp.lpSum(x[j, c] for c in range(len(plan.cands[j]))) == 1
    prev: Any = 0.0
    for k in scope:
        fin = prob.add_variable(f"f_{k}", lowBound=0)
        prob += fin == prev + pulp.lpSum(plan.cost(k, c) * x[k, c] for c in range(len(plan.cands[k])))
        prob += fin <= plan.jobs[k].deadline - t0 - CBC_TOL_S
        prev = fin
    prob.solve(cbc(budget_s, GAP_REL))
    wall = time.perf_counter() - start
    if pulp.LpStatus[prob.status] != "Optimal":
        return SolveResult(None, wall, pulp.LpStatus[prob.status])
    idx = [next(c for c in range(len(plan.cands[j])) if (x[j, c].value() or 0) > 0.5) for j in scope]
    return SolveResult(idx, wall, "optimal")


def solve_scope_highs(plan: QueuePlan, upto: int, t0: float, budget_s: float) -> SolveResult:
    """The same program through ``scipy.optimize.milp`` (HiGHS, in this process)."""
    start = time.perf_counter()
    scope = range(upto + 1)
    total_n = sum(plan.jobs[j].size for j in scope)
    horizon = max(plan.jobs[upto].deadline - t0, EPS_S)
    owner = [j for j in scope for _ in plan.cands[j]]
    cost = np.array([plan.cost(j, c) for j in scope for c in range(len(plan.cands[j]))])
    gain = np.array([plan.jobs[j].size * s.accuracy / total_n for j in scope for s in plan.cands[j]])
    jobs_of, n_var = np.asarray(owner), len(owner)
    pick = sparse.csr_matrix((np.ones(n_var), (jobs_of, np.arange(n_var))), shape=(upto + 1, n_var))
    rows, cols = np.nonzero(jobs_of[None, :] <= np.arange(upto + 1)[:, None])  # row k: jobs 0..k
    finish = sparse.csr_matrix((cost[cols], (rows, cols)), shape=(upto + 1, n_var))
    limit = np.array([plan.jobs[k].deadline - t0 - CBC_TOL_S for k in scope])
    res = milp(-(gain - TIE_BREAK * cost / horizon), integrality=np.ones(n_var), bounds=Bounds(0, 1),
               constraints=[LinearConstraint(pick, 1, 1), LinearConstraint(finish, -np.inf, limit)],
               options={"time_limit": budget_s, "mip_rel_gap": GAP_REL, "disp": False})
    wall = time.perf_counter() - start
    if res.status != 0 or res.x is None:
        return SolveResult(None, wall, str(res.message))
    idx = [0] * (upto + 1)
    for v in np.flatnonzero(res.x > 0.5):
        idx[owner[v]] = int(v - np.searchsorted(jobs_of, owner[v]))
    return SolveResult(idx, wall, "optimal")


def mean_accuracy(plan: QueuePlan, idx: list[int]) -> float:
    n = sum(j.size for j in plan.jobs[: len(idx)])
    return sum(plan.jobs[j].size * plan.cands[j][c].accuracy for j, c in enumerate(idx)) / n


SOLVERS = {"dp": solve_scope, "cbc": solve_scope_cbc, "highs": solve_scope_highs}


def compare(matrix: StrategyMatrix, sizes: tuple[int, ...] = (4, 8, 16, 32), repeats: int = 7, seed: int = 0,
            spec: WorkloadSpec | None = None) -> dict[str, Any]:
    """Per queue length: each solver's wall times (ms, sorted, and the median) and how far below
    the dynamic program's mean accuracy its answer fell at worst (the general solvers stop within
    ``GAP_REL``; the dynamic program is exact, so it is never below theirs)."""
    spec = spec or WorkloadSpec()
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"gap_rel": GAP_REL, "queues": {}}
    for n in sizes:
        ms: dict[str, list[float]] = {k: [] for k in SOLVERS}
        below: dict[str, float] = {k: 0.0 for k in SOLVERS}
        for _ in range(repeats):
            plan = queue(matrix, n, rng, spec)
            res = {k: f(plan, n - 1, 0.0, 10.0) for k, f in SOLVERS.items()}
            ref = res["dp"].idx
            for k, r in res.items():
                ms[k].append(1e3 * r.wall_s)
                if ref is not None and r.idx is not None:
                    below[k] = max(below[k], mean_accuracy(plan, ref) - mean_accuracy(plan, r.idx))
        out["queues"][str(n)] = {"jobs": n, **{f"{k}_ms": sorted(v) for k, v in ms.items()},
                                 **{f"{k}_p50_ms": float(np.median(v)) for k, v in ms.items()},
                                 "below_dp": below}
    return out
