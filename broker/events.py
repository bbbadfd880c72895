"""Typed telemetry events on ``{ns}:telemetry``; ``event`` is the discriminator.

Every event carries ``ts`` (ms since the epoch, server clock where the server stamped it) and the
ids that make it idempotent for a reader (job, request, batch or worker id).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

HEARD_SPAN_MS = 100  # PlannerState.heard: finishes grouped by the 100 ms they fell in
HEARD_QUANTILES = 5  # ... each group as its 0, 25, 50, 75 and 100 % quantiles
HEARD_MAX_SPANS = 64  # per report (one covers a heartbeat: about 10)


class _Ev(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    v: Literal[1] = 1
    type: Literal["event"] = "event"
    ts: float


class JobAccepted(_Ev):
    event: Literal["job.accepted"] = "job.accepted"
    job_id: str
    app: str
    model: str
    run: str = ""
    requests: int
    deadline_ms: float
    # When the producer's XADD landed (the ingress entry's id): ``ts - submitted_ms`` is how long
    # the job waited for the planner, which the pipeline simulator's calibration reads.
    submitted_ms: float | None = None


class JobRejected(_Ev):
    event: Literal["job.rejected"] = "job.rejected"
    job_id: str
    app: str = ""
    run: str = ""
    requests: int = 1
    reason: str
    detail: str = ""
    # As in ``job.accepted``: the job's model and when its XADD landed, so that the pipeline
    # simulator's calibration sees the ingress delay of refused (``overloaded``) jobs too.
    model: str = ""
    submitted_ms: float | None = None


class JobExpired(_Ev):
    event: Literal["job.expired"] = "job.expired"
    job_id: str
    app: str
    run: str = ""
    request_ids: list[str]
    reason: str = "deadline"


class JobCompleted(_Ev):
    """The job's last request reached a terminal state (whatever the states are)."""

    event: Literal["job.completed"] = "job.completed"
    job_id: str
    app: str
    model: str = ""
    run: str = ""
    requests: int
    completed: int = 0
    expired: int = 0
    failed: int = 0
    rejected: int = 0
    latency_ms: float
    deadline_met: bool


class JobPlanned(_Ev):
    event: Literal["job.planned"] = "job.planned"
    job_id: str
    variant: str
    pool: str


class BatchDispatched(_Ev):
    event: Literal["batch.dispatched"] = "batch.dispatched"
    batch_id: str
    pool: str
    model: str
    variant: str = "default"
    size: int
    predicted_ms: float = 0.0
    # HEFT placement (planner/heft): the plan, e.g. ``part1@gpu->part2@cpu``, its predicted
    # finish (server ms), whether it explored an untrusted history, and the batch size chosen
    # for the measured arrival rate.
    placement: str | None = None
    predicted_finish_ms: float | None = None
    explored: bool = False
    rate_batch: int | None = None


class LmScored(BaseModel):
    """A request's prompt as another model read it in a scoring pass (``Plan.score``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    model: str = Field(max_length=64)
    depth: int = Field(ge=0, le=1024)
    prompt_ppl: float | None = None


class LmStats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    tokens: int = Field(ge=0)
    breaches: int = Field(ge=0)
    exits: list[int] = Field(default_factory=list, max_length=1024)
    prompt_ppl: float | None = None
    scored: list[LmScored] = Field(default_factory=list, max_length=8)


class RequestTiming(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    job_id: str
    request_id: str
    app: str
    run: str = ""
    status: str
    queue_ms: float
    exec_ms: float
    total_ms: float
    exit: int | None = None
    confidence: float | None = None
    # A language model's tokens (HELIOS's PHT): tokens, breaches (no exit confident at tau up to
    # the loaded depth), exits[k] = tokens whose first confident exit is k, prompt_ppl.
    lm: LmStats | None = None


# The fields of a ``batch.finished`` event's ``columns`` (docs/telemetry.md): a ``RequestTiming``'s,
# but ``lm``, one list each. ``tests/workers/test_results.py`` holds them to ``RequestTiming``.
TIMING_COLUMNS = ("job_id", "request_id", "app", "run", "status", "queue_ms", "exec_ms", "total_ms", "exit",
                  "confidence")


def timing_rows(columns: Any) -> list[dict[str, Any]]:
    """The per-request ``items`` maps a ``columns`` map stands for (``ValueError`` when it is not
    one: the fields above, each a list, all of one length)."""
    if type(columns) is not dict or columns.keys() != set(TIMING_COLUMNS):
        raise ValueError(f"columns: a map of {', '.join(TIMING_COLUMNS)}")
    lists = [columns[k] for k in TIMING_COLUMNS]
    if any(type(x) is not list or len(x) != len(lists[0]) for x in lists):
        raise ValueError("columns: one list per field, all of one length")
    return [dict(zip(TIMING_COLUMNS, row)) for row in zip(*lists)]


class BatchFinished(_Ev):
    """What a worker reports of a batch it ran. Its requests come as ``items`` (a map each) or, from
    a batch that completed whole without language-model figures, as ``columns`` (one list per
    field, cheaper for the worker to write and for the planner to read); both read as ``items``."""

    event: Literal["batch.finished"] = "batch.finished"
    batch_id: str
    pool: str
    worker: str
    model: str
    variant: str = "default"
    device: str = "cpu"
    size: int
    exec_ms: float
    items: list[RequestTiming]
    # Split models: the part this batch ran, and (for a part that was not the last) the pool its
    # requests went on to and how many; its ``items`` are then only the requests that ended here.
    part: int | None = None
    next_pool: str | None = None
    forwarded: int = 0
    # Seconds this batch waited for its (model, variant) to be loaded first (a partial load of
    # an lm-exit depth, a switch to another model); None when the runner was loaded already.
    load_s: float | None = None
    # Of ``size``, the requests the worker ended ``expired`` without running them (their deadline
    # had passed when the batch came to run): ``exec_ms`` is the run of the others.
    expired: int = Field(default=0, ge=0)
    # Whether the batch's stream entry stays after its ack (until the planner's trim) for ORLOJ's
    # online profiler, which reads a re-run's inputs from it; false: the worker deleted it.
    kept: bool = True

    @model_validator(mode="before")
    @classmethod
    def _columns(cls, v: Any) -> Any:
        if isinstance(v, dict) and "columns" in v and "items" not in v:
            out = {k: x for k, x in v.items() if k != "columns"}
            out["items"] = timing_rows(v["columns"])
            return out
        return v

    @property
    def ran(self) -> int:
        """The requests the batch ran: its size less those ended unrun (``expired``)."""
        return self.size - self.expired

    def ran_items(self) -> list[RequestTiming]:
        """The ``items`` of the requests the batch ran."""
        return [i for i in self.items if i.status != "expired"] if self.expired else self.items


class BatchDeadLettered(_Ev):
    event: Literal["batch.deadlettered"] = "batch.deadlettered"
    batch_id: str
    pool: str
    deliveries: int
    reason: str


class WorkerHeartbeat(_Ev):
    event: Literal["worker.heartbeat"] = "worker.heartbeat"
    worker: str
    pool: str
    slots: int
    busy: int = 0
    models: list[str] = Field(default_factory=list)
    # model -> input name -> {"shape": per-sample shape, "dtype": ...}: lets the planner reject
    # a malformed request before it can fail a whole batch of other producers' requests.
    inputs: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    device: str = "cpu"
    gpu: dict[str, float] | None = None
    memory_mb: int | None = None  # the worker's budget for weights and KV cache (--memory-mb)


class WorkerStopped(_Ev):
    event: Literal["worker.stopped"] = "worker.stopped"
    worker: str
    pool: str


class PlannerReplanned(_Ev):
    """MOSEL's monitor changed a queued job's modality mix. ``before``/``after`` are mixes like
    ``audio+image:12,image:4`` (``after`` is ``expired`` when no mix can meet the deadline);
    ``reason`` is ``cheaper``, ``richer`` or ``expire``; ``part`` numbers the piece of a job
    larger than the strategy matrix (each piece is planned on its own)."""

    event: Literal["planner.replanned"] = "planner.replanned"
    job_id: str
    before: str
    after: str
    reason: str = ""
    model: str = ""
    part: int | None = None
    before_accuracy: float | None = None
    after_accuracy: float | None = None


class OrlojGrouped(_Ev):
    """ORLOJ's apps of ``model`` were grouped anew (planner/orloj/groups.py): each group, apps
    joined by ``+``, is batched apart from the others; none: every app shares batches again.
    ``costs``: each app's cost on one scale (its batches of it alone against the same sizes' of
    the app with the most, or, before two apps have such batches, its requests' seconds alone)."""

    event: Literal["orloj.grouped"] = "orloj.grouped"
    model: str = ""
    groups: list[str] = Field(default_factory=list, max_length=64)
    costs: dict[str, float] = Field(default_factory=dict, max_length=64)


class HeardSpan(BaseModel):
    """The batches that finished in one span (from ``at_ms``, server clock): how many the planner
    read of, and the quantiles (0, 25, 50, 75, 100 %) of how long after finishing, in ms."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    at_ms: float
    batches: int = Field(ge=1)
    quantiles_ms: list[float] = Field(min_length=HEARD_QUANTILES, max_length=HEARD_QUANTILES)


class PlannerState(_Ev):
    """A planner's state, once per ``heartbeat_s``: what it holds and how long its decisions took.

    ``pending`` counts requests waiting per model; ``decisions`` and the percentiles cover the
    scheduler calls (``next_batch``) since the previous report, in wall-clock ms. ``heard``: how
    long after each batch finished (its ``batch.finished`` time) the planner came to dispatch in
    the step that read of it, and so could fill its slot again, per span of ``HEARD_SPAN_MS`` the
    finishes fell in (the pipeline simulator replays this delay at the same moment of a run)."""

    event: Literal["planner.state"] = "planner.state"
    planner: str
    pending: dict[str, int] = Field(default_factory=dict)
    held_jobs: int = 0
    decisions: int = 0
    decision_p50_ms: float | None = None
    decision_p99_ms: float | None = None
    decision_max_ms: float | None = None
    heard: list[HeardSpan] = Field(default_factory=list, max_length=HEARD_MAX_SPANS)
    # Its loop steps that sent a batch: how many, and the 10, 30, 50, 70 and 90 % quantiles of the
    # ms each was busy (its wall time less the blocking reads), each standing for a fifth of them:
    # how soon after sending a batch the planner can send the next, which the pipeline simulator
    # replays. Empty in older reports.
    steps: int = Field(0, ge=0)
    step_quantiles_ms: list[float] = Field(default_factory=list, max_length=HEARD_QUANTILES)
    # Its batches sent: how many, and the same quantiles of the ms from the step's decision to its
    # commands reaching the server (the step's remaining work and its round trip). The wait the
    # planner expects before a batch starts is measured from there, so the pipeline simulator
    # replays it. Empty in older reports.
    sends: int = Field(0, ge=0)
    send_quantiles_ms: list[float] = Field(default_factory=list, max_length=HEARD_QUANTILES)
    # Each pool's slots as its live workers advertise them (the most batches the planner keeps
    # in flight there), which the pipeline simulator keeps to. Empty in older reports.
    slots: dict[str, int] = Field(default_factory=dict, max_length=1024)
    # Its ``--queue-ms`` (planner/pools.py: slot_limit): a pool of long batches holds fewer than
    # its slots, which the pipeline simulator keeps to too. None in older reports (every slot).
    queue_ms: float | None = Field(default=None, ge=0.0, le=10_000.0)


class PlacementFinished(_Ev):
    """A batch HEFT placed finished its last part: the predicted and the measured finish (server
    ms) and their difference, so the prediction error is visible."""

    event: Literal["placement.finished"] = "placement.finished"
    batch_id: str
    model: str
    placement: str
    size: int
    predicted_finish_ms: float
    finish_ms: float
    error_ms: float


class PlacementState(_Ev):
    """A planner's placement state, once per ``heartbeat_s``: the performance histories (one row
    per model, part, device kind and batch size), each model's arrival rate and the batch size
    chosen for it, and the hand-over cost per model."""

    event: Literal["placement.state"] = "placement.state"
    planner: str
    histories: list[dict[str, Any]] = Field(default_factory=list)
    rates: dict[str, float] = Field(default_factory=dict)
    batch_sizes: dict[str, int] = Field(default_factory=dict)
    handover: dict[str, dict[str, float]] = Field(default_factory=dict)


class ModelSwitched(_Ev):
    event: Literal["model.switched"] = "model.switched"
    app: str
    before: str
    after: str
    reason: str = ""


class _HeliosDecision(_Ev):
    """A HELIOS decision for a family (``planner/helios``) with the PHT figures that decided:
    ``options`` holds every option weighed (model, depth, tokens/s, time to first token,
    perplexity, cost per token, load seconds, exit coverage, and the cost it came to)."""

    family: str
    objective: str = "throughput"
    from_model: str = ""
    from_depth: int | None = None
    model: str
    depth: int
    action: str = ""
    breaches: int = 0
    options: list[dict[str, Any]] = Field(default_factory=list, max_length=64)


class HeliosEvaluated(_HeliosDecision):
    event: Literal["helios.evaluated"] = "helios.evaluated"


class HeliosLoadedMore(_HeliosDecision):
    event: Literal["helios.loaded_more"] = "helios.loaded_more"


class HeliosSwitched(_HeliosDecision):
    event: Literal["helios.switched"] = "helios.switched"


class HeliosDroppedBack(_HeliosDecision):
    """After a load-more, the recent tokens exit at the chosen depth again: ``options`` holds each
    depth weighed with its share of the last window's tokens (``coverage``) and ``tokens``."""

    event: Literal["helios.dropped_back"] = "helios.dropped_back"


Event = Annotated[
    JobAccepted | JobRejected | JobExpired | JobCompleted | JobPlanned | BatchDispatched | BatchFinished
    | BatchDeadLettered | WorkerHeartbeat | WorkerStopped | PlannerReplanned | OrlojGrouped | PlannerState | ModelSwitched
    | HeliosEvaluated | HeliosLoadedMore | HeliosSwitched | HeliosDroppedBack | PlacementFinished | PlacementState,
    Field(discriminator="event"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_TYPES: tuple[str, ...] = (
    "job.accepted", "job.rejected", "job.expired", "job.completed", "job.planned",
    "batch.dispatched", "batch.finished", "batch.deadlettered", "worker.heartbeat",
    "worker.stopped", "planner.replanned", "orloj.grouped", "planner.state", "model.switched",
    "helios.evaluated", "helios.loaded_more", "helios.switched", "helios.dropped_back", "placement.finished",
    "placement.state",
)
