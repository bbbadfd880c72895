"""What the online stage sees (queued jobs, when the worker frees up) and what it answers (changes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .strategy import Strategy


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A job waiting for the worker; times in seconds on the caller's clock."""

    job_id: str
    size: int
    floor: float
    arrival: float
    deadline: float

    @property
    def order(self) -> tuple[float, float, str]:
        """Deadline order (MOSEL queues jobs by deadline), ties by arrival then id."""
        return (self.deadline, self.arrival, self.job_id)


@dataclass(frozen=True, slots=True)
class QueueState:
    """The queued jobs (any order) and the time the worker is free to start the first of them."""

    jobs: Sequence[QueuedJob]
    busy_until: float = 0.0


@dataclass(frozen=True, slots=True)
class Change:
    """One re-selection: ``after`` is ``None`` when the job cannot meet its deadline even at its
    fastest strategy and should end as ``expired``.

    ``reason`` is ``cheaper`` (a queued job would miss its deadline), ``richer`` (spare time was
    given back as accuracy) or ``expire``.
    """

    job_id: str
    before: Strategy
    after: Strategy | None
    reason: str

    def event_fields(self) -> dict[str, str]:
        """The body of a ``planner.replanned`` event (``PlannerReplanned`` in broker.events)."""
        after = self.after.label() if self.after else "expired"
        return {"job_id": self.job_id, "before": self.before.label(), "after": after,
                "reason": self.reason}
