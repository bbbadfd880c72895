"""The pure scheduling core: what every policy implements, with no I/O.

A policy sees requests (``Pending``) and a clock value ``now`` (seconds; wall clock live, virtual
under the simulator) and answers one question when a worker slot is free: which requests form the
next batch, and which requests can no longer meet their deadline. The live planner loop and
``adaserve sim`` drive the same objects; nothing here reads a clock or touches Redis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(slots=True)
class Pending:
    """One request waiting to be batched. ``payload`` is opaque to policies."""

    job_id: str
    request_id: str
    app: str
    model: str
    arrival: float
    deadline: float
    priority_class: int = 0
    payload: Any = None
    seq: int = 0
    # Job-level facts that job-aware policies (MOSEL's modality selection) need; 0 / 1 otherwise.
    floor: float = 0.0
    job_size: int = 1

    @property
    def key(self) -> tuple[str, str]:
        return (self.job_id, self.request_id)


@dataclass(slots=True)
class Decision:
    """A batch to dispatch now (possibly empty) and requests to end as ``expired``."""

    batch: list[Pending] = field(default_factory=list)
    expired: list[Pending] = field(default_factory=list)
    predicted_s: float = 0.0
    # Which variant serves the batch (and with which inputs): "default" unless the policy
    # chooses, as modality selection does per batch.
    variant: str = "default"
    modalities: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Feedback:
    """What a finished batch tells the policy: its size, how long it ran, and per request."""

    model: str
    size: int
    exec_s: float
    apps: tuple[str, ...] = ()
    request_exec_s: tuple[float, ...] = ()
    pool: str = "cpu"
    variant: str = "default"  # as the worker resolved it (a manifest name, never "default")


def batch_feedback(model: str, size: int, exec_s: float, apps: tuple[str, ...], request_exec_s: tuple[float, ...],
                   pool: str = "cpu", variant: str = "default") -> Feedback:
    """The ``Feedback`` of a batch a worker ran: per-request times only for a batch of one.

    A worker's per-request time is when the request's output was ready inside its batch (an
    early-exit model's exit, say), which includes the other requests' work; ORLOJ's distributions
    are of a request's time alone (Sec. 3.2: the online profiler re-runs requests alone), so
    taking in-batch times for those counted the batch twice in ``c1 k E[max]``. The live planner
    and the pipeline simulator both build feedback here.
    """
    per = request_exec_s if size == 1 else ()
    return Feedback(model, size, exec_s, apps, per, pool, variant)


@runtime_checkable
class Scheduler(Protocol):
    """A batching policy for one model on one pool kind."""

    name: str

    def add(self, item: Pending, now: float) -> None:
        """Admit a request (called in arrival order)."""

    def next_batch(self, now: float, max_size: int) -> Decision:
        """Form the next batch for a free slot; also return what has become infeasible."""

    def expire(self, now: float) -> list[Pending]:
        """Remove and return requests that cannot meet their deadline even when run alone now."""

    def observe(self, feedback: Feedback) -> None:
        """Learn from a finished batch (latency model, execution-time distributions)."""

    def earliest_deadline(self) -> float | None:
        """Deadline of the most urgent pending request, to arbitrate between models."""

    # Optional: ``drain_events() -> list[tuple[str, dict]]``. A policy that changes plans on its
    # own (MOSEL's re-selection) returns telemetry events the live planner then publishes.

    def __len__(self) -> int: ...
