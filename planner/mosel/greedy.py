"""Heuristic re-selection: MOSEL's Algorithm 1 (``random``), ``aggressive``, and raising accuracy.

All three assume :func:`.timeline.hopeless` jobs were removed first, so putting every job at its
fastest strategy meets every deadline; the lowering steps then always end without a violation.
"""

from __future__ import annotations

import numpy as np

from .timeline import EPS_S, QueuePlan


def lower_random(plan: QueuePlan, t0: float, rng: np.random.Generator) -> None:
    """Algorithm 1: while some job would miss its deadline, pick jobs at random from those up to
    and including it and give each its fastest strategy meeting its floor, until it fits.

    The violator itself is a candidate too: its own strategy is part of its finish time.
    """
    t, i = t0, 0
    while i < len(plan):
        t += plan.lat(i)
        over = t - (plan.jobs[i].deadline + EPS_S)
        if over > 0:
            pool = [j for j in range(i + 1) if plan.idx[j] > 0]
            while over > 0 and pool:
                j = pool.pop(int(rng.integers(len(pool))))
                saved = plan.lat(j) - plan.cost(j, 0)
                plan.idx[j] = 0
                t -= saved
                over -= saved
        i += 1


def lower_aggressive(plan: QueuePlan, t0: float) -> None:
    """``aggressive``: on any predicted miss, every queued job takes its fastest strategy."""
    if plan.first_violator(t0) is not None:
        plan.idx = [0] * len(plan)


def can_raise(plan: QueuePlan, t0: float) -> bool:
    """Whether some job could take its next more accurate strategy without a miss."""
    room = plan.slack_suffix_min(t0)
    return any(plan.idx[i] + 1 < len(plan.cands[i])
               and plan.cost(i, plan.idx[i] + 1) - plan.lat(i) <= room[i] + EPS_S
               for i in range(len(plan)))


def raise_round_robin(plan: QueuePlan, t0: float) -> None:
    """Give spare time back as accuracy: passes in deadline order, each job one step up its
    Pareto front per pass when no job at or after it would then miss, until a pass changes none.

    One step per job per pass spreads the spare time over the queue instead of handing it all to
    the first job (the paper stresses an even accuracy distribution across jobs).
    """
    changed = True
    while changed:
        changed = False
        room = plan.slack_suffix_min(t0)
        used = 0.0  # growth so far in this pass: it delays every later job by as much
        for i in range(len(plan)):
            if plan.idx[i] + 1 >= len(plan.cands[i]):
                continue
            grow = plan.cost(i, plan.idx[i] + 1) - plan.lat(i)
            if grow <= room[i] - used + EPS_S:
                plan.idx[i] += 1
                used += grow
                changed = True
