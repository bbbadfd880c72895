"""The offline integer program of MOSEL Sec. 5.1: the cheapest mix for a job size and a floor.

Paper's problem, for a job of ``n`` requests and accuracy floor ``A``: choose how many requests
``n_m`` use each modality subset ``m`` so that

    minimise    sum_m L(m, n_m)                   (each subset's requests run as one batch run)
    subject to  sum_m n_m = n                     (1) every request gets a subset
                sum_m acc_m * n_m >= A * n        (2) the effective (mean) accuracy meets the floor

``L(m, k)`` is the profiled batch latency, a non-linear, tabulated function of the count, which is
why the paper calls this a non-linear integer program. We linearise it exactly with a one-hot
(SOS1-type) expansion: a binary ``y[m,k]`` for every possible count ``k = 0..n`` of every subset,
``sum_k y[m,k] = 1``, ``n_m = sum_k k*y[m,k]`` and cost ``sum_k L(m,k)*y[m,k]``. Because ``n_m``
only takes the values ``0..n``, this is the same problem, not an approximation (unlike binary
expansion or a piecewise-linear fit, which would need ``L`` convex or would approximate it).
``L(m, k)`` for ``k`` above the largest profiled batch is the cheapest split into profiled batches
(:meth:`SubsetCosts.run_ms`). Among equally fast mixes the more accurate one is preferred through
a tie-break of ``1e-6`` ms per request-accuracy unit, far below any measurable latency difference.
Solved with CBC through pulp, with its log off.
"""

from __future__ import annotations

import warnings

import pulp

from adaserve.broker.errors import AdaserveError

from .costs import SubsetCosts
from .strategy import Strategy

TIE_BREAK_MS = 1e-6


def cbc(time_limit_s: float | None = None, gap_rel: float | None = None) -> pulp.LpSolver:
    """pulp's bundled CBC, log off. PuLP 3 flags this class as deprecated in favour of a CBC
    installed separately; the bundled binary is what ships with the wheel, so we keep it and
    silence the notice rather than require a system package."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=gap_rel)


def cheapest_mix(costs: SubsetCosts, n: int, floor: float) -> Strategy:
    """The minimum-latency strategy for ``n`` requests whose effective accuracy is ``>= floor``.

    Raises ``AdaserveError`` when no mix reaches the floor (it is above every subset's accuracy).
    """
    if n < 1:
        raise ValueError(f"a job has at least one request, got {n}")
    if floor > costs.max_accuracy + 1e-12:
        raise AdaserveError(f"floor {floor} is above the best subset accuracy {costs.max_accuracy}")
    subsets = range(len(costs.subsets))
    prob = pulp.LpProblem("mosel_strategy", pulp.LpMinimize)
    y = {(m, k): prob.add_variable(f"y_{m}_{k}", cat="Binary") for m in subsets for k in range(n + 1)}
    prob += pulp.lpSum(
        (costs.run_ms(m, k) - TIE_BREAK_MS * costs.accuracy[m] * k) * y[m, k]
        for m in subsets for k in range(n + 1))
    for m in subsets:
        prob += pulp.lpSum(y[m, k] for k in range(n + 1)) == 1
    prob += pulp.lpSum(k * y[m, k] for m in subsets for k in range(n + 1)) == n
    # A hair of slack so that a floor equal to a subset's accuracy stays feasible under rounding;
    # the guard below re-checks the rounded answer with the same tolerance as everything else.
    prob += pulp.lpSum(costs.accuracy[m] * k * y[m, k] for m in subsets for k in range(n + 1)) \
        >= floor * n - 1e-9
    prob.solve(cbc())
    if pulp.LpStatus[prob.status] != "Optimal":
        raise AdaserveError(f"CBC found no strategy for n={n}, floor={floor}: "
                            f"{pulp.LpStatus[prob.status]}")
    counts = tuple(sum(k for k in range(n + 1) if (y[m, k].value() or 0) > 0.5) for m in subsets)
    strategy = costs.strategy(counts)
    if strategy.size != n or not strategy.meets(floor):
        raise AdaserveError(f"CBC answer {counts} breaks a constraint for n={n}, floor={floor}")
    return strategy


def cheapest_row(costs: SubsetCosts, n: int, floors: list[float]) -> list[Strategy]:
    """``cheapest_mix`` for every floor of an ascending grid.

    The feasible set only shrinks as the floor rises, so the optimum for one floor is still the
    optimum for the next whenever it already meets it: that skips most solves.
    """
    row: list[Strategy] = []
    for f in floors:
        if row and row[-1].meets(f):
            row.append(row[-1])
        else:
            row.append(cheapest_mix(costs, n, f))
    return row
