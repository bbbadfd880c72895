"""What a job's results add up to, for the caller that submitted it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from adaserve.broker.messages import Result

STATUSES = ("completed", "expired", "rejected", "failed")


@dataclass(frozen=True)
class JobResult:
    """Every request's ``Result`` of one job, in request order.

    A job the planner could not read at all is rejected with one result whose ``request_id`` is
    empty; it is repeated here under each request id so that ``results`` always lines up with
    the job's requests.
    """

    job_id: str
    app: str
    model: str
    run: str
    deadline_ms: float
    submitted_ms: float
    results: tuple[Result, ...]

    @property
    def counts(self) -> dict[str, int]:
        c: Counter[str] = Counter(r.status for r in self.results)
        return {s: c.get(s, 0) for s in STATUSES}

    @property
    def completed(self) -> int:
        return sum(r.status == "completed" for r in self.results)

    @property
    def ok(self) -> bool:
        """Every request completed."""
        return self.completed == len(self.results)

    @property
    def latency_ms(self) -> float:
        """Effective latency: from submission until the job's last request ended."""
        return max((r.timings.total_ms for r in self.results), default=0.0)

    @property
    def deadline_met(self) -> bool:
        """Every request completed within the job's deadline."""
        return self.ok and all(r.timings.total_ms <= self.deadline_ms for r in self.results)

    @property
    def on_time(self) -> int:
        """Requests that completed within the deadline."""
        return sum(r.status == "completed" and r.timings.total_ms <= self.deadline_ms for r in self.results)

    @property
    def predictions(self) -> list[int | None]:
        return [r.prediction if r.status == "completed" else None for r in self.results]

    @property
    def reasons(self) -> dict[str, int]:
        """Why requests did not complete: reason -> count."""
        c = Counter(r.reason or r.status for r in self.results if r.status != "completed")
        return dict(c)
