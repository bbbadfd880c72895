"""The pure scheduling core: what every policy implements, with no I/O.

A policy sees requests (``Pending``) and a clock value ``now`` (seconds; wall clock live, virtual
under the simulator) and answers one question when a worker slot is free: which requests form the
next batch, and which requests can no longer meet their deadline. The live planner loop and
``adaserve sim`` drive the same objects; nothing here reads a clock or touches Redis.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from adaserve.broker.messages import Job


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
    # The concrete model that serves the batch when the policy chooses it (HELIOS: the job names a
    # family); None: the model the job named.
    model: str | None = None
    # Other models that read the batch's first prompts in a prefill-only pass after it ran:
    # (model, variant, rows) (HELIOS's paired evaluation).
    score: tuple[tuple[str, str, int], ...] = ()
    # The policy's own handle on this batch, given back in its ``Feedback`` (Clockwork's action
    # id): which finish is this batch's cannot be told from the finishes alone.
    token: int | None = None


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
    # Per request, a language model's token figures (``helios.pht.ItemStats``), and the seconds
    # the batch paid for a (partial) load; empty / None for other models.
    lm: tuple[Any, ...] = ()
    load_s: float | None = None
    # When the batch finished, on the worker's clock (server time, s), where known: a policy that
    # judges a slot by when it freed (Clockwork's action windows) must not judge it by when the
    # planner happened to read the event.
    finished_s: float | None = None
    # ``Decision.token`` of the batch, where the caller kept it; None otherwise.
    token: int | None = None


def batch_feedback(model: str, size: int, exec_s: float, apps: tuple[str, ...], request_exec_s: tuple[float, ...],
                   pool: str = "cpu", variant: str = "default", lm: tuple[Any, ...] = (),
                   load_s: float | None = None, finished_s: float | None = None,
                   token: int | None = None) -> Feedback:
    """The ``Feedback`` of a batch a worker ran: per-request times only for a batch of one.

    A worker's per-request time is when the request's output was ready inside its batch (an
    early-exit model's exit, say), which includes the other requests' work; ORLOJ's distributions
    are of a request's time alone (Sec. 3.2: the online profiler re-runs requests alone), so
    taking in-batch times for those counted the batch twice in ``c1 k E[max]``. The live planner
    and the pipeline simulator both build feedback here.
    """
    per = request_exec_s if size == 1 else ()
    return Feedback(model, size, exec_s, apps, per, pool, variant, lm, load_s, finished_s, token)


class Scheduler(ABC):
    """A batching policy for one model on one pool kind.

    The five abstract methods and ``__len__`` are what every policy answers. The rest are
    optional capabilities, declared here with defaults that do nothing, so the planner calls
    them on every policy without probing (as dramatiq's middleware declares its hooks): a
    policy overrides the ones it has.
    """

    name: ClassVar[str]
    # ORLOJ's long-term feedback (Sec. 3.2) re-runs requests alone for the policies that set this.
    takes_samples: ClassVar[bool] = False

    @abstractmethod
    def add(self, item: Pending, now: float) -> None:
        """Admit a request (called in arrival order)."""

    @abstractmethod
    def next_batch(self, now: float, max_size: int) -> Decision:
        """Form the next batch for a free slot; also return what has become infeasible."""

    @abstractmethod
    def expire(self, now: float) -> list[Pending]:
        """Remove and return requests that cannot meet their deadline even when run alone now."""

    @abstractmethod
    def observe(self, feedback: Feedback) -> None:
        """Learn from a finished batch (latency model, execution-time distributions)."""

    @abstractmethod
    def earliest_deadline(self) -> float | None:
        """Deadline of the most urgent pending request, to arbitrate between models."""

    @abstractmethod
    def __len__(self) -> int: ...

    # -- optional capabilities ------------------------------------------------------------------
    def add_many(self, items: Sequence[Pending], now: float) -> None:
        """``add`` for a job's requests, in their order, in one call (the planner admits a job at
        a time). They share app, deadline and class, so a policy may keep them as one (ORLOJ's
        queue slot per job). Default: one ``add`` each."""
        for item in items:
            self.add(item, now)

    def check_job(self, job: Job) -> None:  # noqa: B027 - optional, the default admits
        """Admission of a whole job before its requests are added: raise ``InvalidMessage`` to
        reject it (MOSEL: the job's accuracy floor is out of reach). Default: admit."""

    def add_sample(self, app: str, seconds: float) -> None:  # noqa: B027 - optional, the default ignores
        """A request's execution time measured alone (with ``takes_samples``). Default: ignore."""

    def drain_events(self) -> list[tuple[str, dict[str, object]]]:
        """Telemetry events of plans the policy changed on its own (MOSEL's re-selection), for
        the live planner to publish. Default: none."""
        return []

    def models(self) -> tuple[str, ...]:
        """The concrete models this policy may send batches to, when it chooses among several
        (HELIOS's candidates): their results feed it. Default: none (the job's model only)."""
        return ()

    def runs_on(self, models: set[str]) -> bool:
        """Whether a pool serving ``models`` can take this policy's next batch, when ``models()``
        is not empty. Default: no."""
        return False

    def set_memory(self, memory_mb: float | None) -> None:  # noqa: B027 - optional, the default ignores
        """The memory budget of the pool the next batch goes to (workers' ``--memory-mb``), for
        policies that size batches by memory (HELIOS). Default: ignore."""

    def table(self) -> dict[str, object] | None:
        """A snapshot of the policy's state worth inspecting from the CLI (HELIOS's PHT), which
        the live planner stores on the server. Default: none."""
        return None

    def diagnose(self) -> dict[str, object]:
        """What the policy believes that can hold batches back (a latency model's prediction for
        a batch of one), for the planner's stall report. Default: nothing."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional, nothing to release by default
        """Release what the policy holds beyond its own state. Default: nothing to release."""
