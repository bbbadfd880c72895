"""The queue as the online stage reasons about it: jobs in deadline order run back to back.

Each job has a list of candidate strategies (cheapest first, all meeting its floor) and the
index of the one currently chosen. With one worker and deadline order, job ``i`` finishes at
``t0 + sum of the chosen latencies of jobs 0..i``; everything below is arithmetic on that.
"""

from __future__ import annotations

from dataclasses import dataclass

from .queue import QueuedJob
from .strategy import Strategy

# Finishing within a nanosecond of the deadline counts as meeting it (float sums of latencies).
EPS_S = 1e-9


@dataclass
class QueuePlan:
    """Jobs in deadline order, their candidate strategies, and the chosen index of each.

    ``scale`` corrects every profiled latency by what execution feedback has shown (1.0: the
    profile is right); ``costs_s``, when given, replaces that with each candidate's own expected
    seconds (the live planner's per-subset correction). All reasoning about time goes through
    :meth:`cost`.
    """

    jobs: list[QueuedJob]
    cands: list[list[Strategy]]
    idx: list[int]
    scale: float = 1.0
    costs_s: list[list[float]] | None = None

    def __len__(self) -> int:
        return len(self.jobs)

    def chosen(self, i: int) -> Strategy:
        return self.cands[i][self.idx[i]]

    def cost(self, i: int, c: int) -> float:
        """Expected seconds of job ``i`` under its candidate ``c``."""
        if self.costs_s is not None:
            return self.costs_s[i][c]
        return self.cands[i][c].latency_s * self.scale

    def lat(self, i: int) -> float:
        return self.cost(i, self.idx[i])

    def finishes(self, t0: float) -> list[float]:
        out, t = [], t0
        for i in range(len(self.jobs)):
            t += self.lat(i)
            out.append(t)
        return out

    def first_violator(self, t0: float) -> int | None:
        t = t0
        for i, job in enumerate(self.jobs):
            t += self.lat(i)
            if t > job.deadline + EPS_S:
                return i
        return None

    def slack_suffix_min(self, t0: float) -> list[float]:
        """``out[i]`` = the least slack (deadline - finish) among jobs ``i..``: how much job ``i``
        may grow before some job at or after it misses its deadline."""
        fin = self.finishes(t0)
        out = [0.0] * len(self.jobs)
        m = float("inf")
        for i in range(len(self.jobs) - 1, -1, -1):
            m = min(m, self.jobs[i].deadline - fin[i])
            out[i] = m
        return out

    def remove(self, drop: set[int]) -> None:
        keep = [i for i in range(len(self.jobs)) if i not in drop]
        self.jobs = [self.jobs[i] for i in keep]
        self.cands = [self.cands[i] for i in keep]
        self.idx = [self.idx[i] for i in keep]
        if self.costs_s is not None:
            self.costs_s = [self.costs_s[i] for i in keep]


def hopeless(plan: QueuePlan, t0: float) -> set[int]:
    """Jobs that miss their deadline even with every job up to them at its fastest strategy.

    Walking in deadline order, such a job is left out of the timeline (it will be expired), so it
    takes no time from the jobs behind it. Every job kept then has a feasible plan: all fastest.
    """
    out: set[int] = set()
    t = t0
    for i, job in enumerate(plan.jobs):
        fast = plan.cost(i, 0)
        if t + fast > job.deadline + EPS_S:
            out.add(i)
        else:
            t += fast
    return out
