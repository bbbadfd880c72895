"""What the live planner remembers between loop iterations (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from adaserve.broker.messages import Job


@dataclass
class HeldJob:
    """An accepted job whose ingress entry stays unacked until every request left the planner."""

    job: Job
    entry_id: str
    submitted_ms: float
    undispatched: int
    planned: bool = False
    accuracy: float | None = None  # effective accuracy as planned, once a policy fixed it


@dataclass
class Ewma:
    """Exponentially weighted mean, for the dispatch-to-start wait of each pool."""

    alpha: float = 0.1
    value: float = 0.0
    n: int = 0

    def add(self, x: float) -> None:
        self.value = x if self.n == 0 else self.value + self.alpha * (x - self.value)
        self.n += 1


@dataclass
class Inflight:
    """Batches this planner dispatched and has not yet seen finish: batch id -> (pool, ms)."""

    dispatched: dict[str, tuple[str, float]] = field(default_factory=dict)

    def add(self, batch_id: str, pool: str, ms: float) -> None:
        self.dispatched[batch_id] = (pool, ms)

    def pop(self, batch_id: str) -> tuple[str, float] | None:
        return self.dispatched.pop(batch_id, None)

    def prune(self, older_than_ms: float) -> None:
        self.dispatched = {b: v for b, v in self.dispatched.items() if v[1] >= older_than_ms}
