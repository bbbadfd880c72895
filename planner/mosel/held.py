"""A job as the live MOSEL scheduler holds it until its strategy is final, and small helpers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from adaserve.broker.messages import Request
from adaserve.planner.core import Pending
from adaserve.planner.state import HeldJob

from .costs import SubsetCosts
from .strategy import ACC_TOL, Strategy


@dataclass
class MoselJob:
    """The undispatched requests of one job, before its strategy is released.

    ``chunks`` are the job's entries in the selector: one, or several for a job larger than the
    strategy matrix (each chunk meets the floor, so their mean does too). A ``pinned`` job is not
    in the selector at all: it runs on one fixed subset (its inputs lack a modality, or the
    matrix is still being built). ``planned`` opens the gate to dispatch: a monitor pass has
    seen the job (pinned jobs need none).
    """

    key: str
    job_id: str
    floor: float
    arrival: float
    deadline: float
    items: list[Pending] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)
    pinned: Strategy | None = None
    fastest: list[Strategy] = field(default_factory=list)  # per chunk (or the pinned one)
    planned: bool = False

    @property
    def fastest_s(self) -> float:
        """Profiled seconds of the job at its fastest strategies (chunks one after the other)."""
        return sum(s.latency_s for s in self.fastest)

    @property
    def order(self) -> tuple[float, float, str]:
        return (self.deadline, self.arrival, self.key)


def chunk_sizes(n: int, max_size: int) -> list[int]:
    """``n`` split into the fewest near-equal parts of at most ``max_size``."""
    parts = max(1, math.ceil(n / max_size))
    base, extra = divmod(n, parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def modalities(subset: str) -> tuple[str, ...]:
    return tuple(subset.split("+"))


def inputs_of(p: Pending) -> frozenset[str] | None:
    """The input names a request carries (``payload`` is ``(HeldJob, Request)`` live), or
    ``None`` when the payload does not say (then every subset is assumed possible)."""
    req = p.payload[1] if isinstance(p.payload, tuple) and len(p.payload) > 1 else None
    return frozenset(req.inputs) if isinstance(req, Request) else None


def feasible_subsets(costs: SubsetCosts, items: list[Pending]) -> list[int]:
    """Indices of the subsets every request of a job has the inputs for."""
    have: frozenset[str] | None = None
    for p in items:
        got = inputs_of(p)
        if got is not None:
            have = got if have is None else have & got
    return [m for m, s in enumerate(costs.subsets) if have is None or set(modalities(s)) <= have]


def best_subset(costs: SubsetCosts, allowed: list[int]) -> int | None:
    """The most accurate allowed subset (the cheaper one on a tie)."""
    if not allowed:
        return None
    return min(allowed, key=lambda m: (-costs.accuracy[m], costs.batch_ms[m][-1]))


def floor_problem(costs: SubsetCosts, allowed: list[int], floor: float) -> str | None:
    """Why no plan of a job can reach ``floor``, or ``None`` when one can."""
    best = best_subset(costs, allowed)
    if best is None:
        return (f"its requests lack the inputs of every modality subset "
                f"({', '.join(costs.subsets)})")
    if costs.accuracy[best] < floor - ACC_TOL:
        what = "any modality subset" if len(allowed) == len(costs.subsets) else "the inputs its requests carry"
        return (f"accuracy floor {floor:g} is above the best accuracy reachable with {what}: "
                f"{costs.accuracy[best]:.4f} ({costs.subsets[best]})")
    return None


def set_accuracy(items: list[Pending], accuracy: float) -> None:
    """Record the final effective accuracy on the planner's ``HeldJob`` (echoed into results)."""
    for p in items[:1]:
        held = p.payload[0] if isinstance(p.payload, tuple) and p.payload else None
        if isinstance(held, HeldJob):
            held.accuracy = accuracy
