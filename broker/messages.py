"""Pydantic models of every message on the wire (schema version ``SCHEMA_VERSION``).

Each stream entry has one field ``m``: a msgpack map ``{"v": 1, "type": <type>, ...body}``
(see ``codec``). The README documents these maps for producers in other languages.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from adaserve.broker import jobform
from adaserve.broker.batchform import expand, is_columnar
from adaserve.broker.settings import Limits
from adaserve.broker.tensors import Tensor, limits_of
from adaserve.broker.violations import over_limit

SCHEMA_VERSION = 1

Status = Literal["completed", "expired", "rejected", "failed"]
Objective = Literal["latency", "accuracy", "throughput", "energy"]
RequestKind = Literal["forward", "generate"]
_ID = r"^[A-Za-z0-9_.:\-]+$"


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_id(v: str, info: ValidationInfo) -> str:
    cap = limits_of(info).max_id_length
    if len(v) > cap:
        raise ValueError(f"id longer than {cap} characters")
    return v


class Slo(_Wire):
    deadline_ms: float
    min_accuracy: float = Field(0.0, ge=0.0, le=1.0)
    objective: Objective = "latency"

    @field_validator("deadline_ms")
    @classmethod
    def _deadline(cls, v: float, info: ValidationInfo) -> float:
        lim = limits_of(info)
        if not lim.min_deadline_ms <= v <= lim.max_deadline_ms:
            raise over_limit("deadline_ms {v} outside [{low}, {high}]", v=v, low=lim.min_deadline_ms,
                             high=lim.max_deadline_ms)
        return v


class Generation(_Wire):
    """Parameters of a token-generation request (``kind == "generate"``).

    ``max_new_tokens`` None means the model's default. ``temperature`` 0 is greedy; above 0
    tokens are sampled from the softmax at that temperature with a generator seeded by ``seed``
    (default: derived from the job and request ids, so that a redelivered batch generates the
    same text).
    """

    max_new_tokens: int | None = Field(None, ge=1, le=4096)
    temperature: float = Field(0.0, ge=0.0, le=10.0)
    seed: int | None = Field(None, ge=0, le=2**63 - 1)


class Request(_Wire):
    id: str = Field(pattern=_ID, min_length=1)
    kind: RequestKind = "forward"
    inputs: dict[str, Tensor]
    generation: Generation | None = None

    _id = field_validator("id")(_check_id)

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, v: dict[str, Tensor], info: ValidationInfo) -> dict[str, Tensor]:
        cap = limits_of(info).max_modalities
        if not v:
            raise ValueError("a request needs at least one input")
        if len(v) > cap:
            raise over_limit("{n} inputs exceed the limit of {cap} modalities", n=len(v), cap=cap)
        return v

    @model_validator(mode="after")
    def _kind(self) -> Request:
        # Generation parameters on a forward request are a producer's mistake, not something to ignore.
        if self.kind == "forward" and self.generation is not None:
            raise ValueError("'generation' is set but kind is 'forward'; use kind 'generate'")
        return self


class Job(_Wire):
    v: Literal[1] = 1
    type: Literal["job"] = "job"
    id: str = Field(pattern=_ID, min_length=1)
    app: str = Field("default", pattern=_ID, min_length=1, max_length=64)
    model: str = Field(pattern=_ID, min_length=1, max_length=64)
    requests: list[Request]
    slo: Slo
    reply_to: str = Field(pattern=_ID, min_length=1, max_length=128)
    priority: int = Field(0, ge=0, le=9)
    run: str = Field("", max_length=64)

    _id = field_validator("id")(_check_id)

    # The columnar form on the wire (``jobform``) is read as the requests it stands for, built
    # from its checked rows without a validation per request and input.
    @model_validator(mode="before")
    @classmethod
    def _columns(cls, v: Any, info: ValidationInfo) -> Any:
        if not (isinstance(v, dict) and jobform.is_columnar(v)):
            return v
        ids, cols = jobform.rows(v, limits_of(info))
        out = {k: x for k, x in v.items() if k not in jobform.COLUMN_KEYS}
        out["requests"] = rows_as_requests(ids, cols, views=bool((info.context or {}).get("views")))
        return out

    @field_validator("requests")
    @classmethod
    def _requests(cls, v: list[Request], info: ValidationInfo) -> list[Request]:
        cap = limits_of(info).max_requests_per_job
        if not v:
            raise ValueError("a job needs at least one request")
        if len(v) > cap:
            raise over_limit("{n} requests exceed the limit of {cap} per job", n=len(v), cap=cap)
        if len({r.id for r in v}) != len(v):
            raise ValueError("request ids must be unique within a job")
        return v


# The slots every pydantic model has, set through their descriptors: what ``model_construct``
# sets, for a third less than ``object.__setattr__`` by name (measured on a columnar job's rows).
_SET_DICT = BaseModel.__dict__["__dict__"].__set__
_SET_FIELDS = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__
# Shared by every row built: a frozen model's fields-set is never changed in place.
_REQUEST_SET = {"id", "inputs"}
_TENSOR_SET = {"dtype", "shape", "data"}


def rows_as_requests(ids: list[str], cols: dict[str, jobform.Column], *, views: bool = False) -> list[Request]:
    """The ``forward`` requests of a columnar job, each the object ``Request`` validates from the
    request's own map (``tests/broker/test_jobform.py`` holds them equal), built as
    ``model_construct`` builds one but without its pass over each field's default: a job's rows
    were checked once per input, and building them cost three times that check. ``views``: each
    row's data is a ``memoryview`` of its column, for the planner, which only joins rows into
    batches: a slice of ``bytes`` copied every tensor byte of a job once more."""
    out: list[Request] = []
    named = [(name, c.dtype, c.row_shape, memoryview(c.data) if views else c.data, c.step) for name, c in cols.items()]
    new_t, new_r = Tensor.__new__, Request.__new__
    for j, rid in enumerate(ids):
        inputs: dict[str, Tensor] = {}
        for name, dtype, shape, data, step in named:
            t = new_t(Tensor)
            _SET_DICT(t, {"dtype": dtype, "shape": shape, "data": data[j * step:(j + 1) * step]})
            _SET_FIELDS(t, _TENSOR_SET)
            _SET_EXTRA(t, None)
            _SET_PRIVATE(t, None)
            inputs[name] = t
        r = new_r(Request)
        _SET_DICT(r, {"id": rid, "kind": "forward", "inputs": inputs, "generation": None})
        _SET_FIELDS(r, _REQUEST_SET)
        _SET_EXTRA(r, None)
        _SET_PRIVATE(r, None)
        out.append(r)
    return out


def job_in_columns(body: dict[str, Any], limits: Limits) -> Job | None:
    """The ``Job`` that ``Job.model_validate(body)`` gives for a job map in columns, for less:
    the rows are checked by ``jobform.rows`` (as ``Job._columns`` checks them), the request ids'
    uniqueness here, the job's own fields by pydantic with the first request alone, and the
    requests built from the rows are put in place without pydantic's pass over each (its
    after-validator and instance check per request; ``tests/broker/test_jobform.py`` holds the
    two equal). None when any check fails: the full validation then says why, with its own
    error. The SDK builds its jobs in columns with it (``producers.jobs.make_job``)."""
    try:
        ids, cols = jobform.rows(body, limits)
    except Exception:  # ValueError or a limit's error: the full validation raises its own
        return None
    if len(set(ids)) != len(ids):
        return None
    requests = rows_as_requests(ids, cols)
    head = {k: x for k, x in body.items() if k not in jobform.COLUMN_KEYS}
    head["requests"] = requests[:1]
    try:
        first = Job.model_validate(head, context={"limits": limits})
    except ValueError:  # pydantic's ValidationError is one
        return None
    return first.model_copy(update={"requests": requests})


class Placement(_Wire):
    """Where a batch runs. For a split model, ``part`` is the part this batch runs (1-based),
    ``next_pool`` where the worker forwards the intermediate tensor, and ``prev_pool`` (on a
    forwarded batch) where the previous part ran."""

    pool: str = "cpu"
    part: int | None = None
    next_pool: str | None = None
    prev_pool: str | None = None


class ScoreWith(_Wire):
    """A prefill-only pass of another model over the first ``rows`` prompts of the batch, after
    it has run: each prompt's perplexity under that model (HELIOS's paired evaluation)."""

    model: str = Field(pattern=_ID, min_length=1, max_length=64)
    variant: str = Field(pattern=_ID, min_length=1, max_length=64)
    rows: int = Field(ge=1, le=1024)


class Plan(_Wire):
    """How a batch is served. Every knob is present from the start; defaults mean 'as built'."""

    modalities: tuple[str, ...] | None = None
    variant: str = "default"
    exit: int | None = None
    placement: Placement = Placement()
    priority: float = 0.0
    score: tuple[ScoreWith, ...] = Field((), max_length=8)


class BatchItem(_Wire):
    job_id: str
    request_id: str
    app: str
    reply_to: str
    run: str = ""
    inputs: dict[str, Tensor]
    submitted_ms: float
    deadline_ms: float
    kind: RequestKind = "forward"
    generation: Generation | None = None
    # The job's effective accuracy as planned (the mean of its requests' planned accuracies),
    # when the planner chose it; echoed into the result.
    job_accuracy: float | None = None
    # Execution time this request already spent in earlier parts of a split model (forwarded
    # batches only), so that its result reports the whole model's execution time.
    prior_exec_ms: float = 0.0


class Batch(_Wire):
    v: Literal[1] = 1
    type: Literal["batch"] = "batch"
    id: str
    model: str
    plan: Plan
    items: list[BatchItem]
    dispatched_ms: float

    # The columnar form on the wire (``batchform``) is read as the per-request one it stands for.
    @model_validator(mode="before")
    @classmethod
    def _columns(cls, v: Any) -> Any:
        return expand(v) if isinstance(v, dict) and is_columnar(v) else v


class Timings(_Wire):
    submitted_ms: float
    dispatched_ms: float | None = None
    started_ms: float | None = None
    finished_ms: float
    queue_ms: float | None = None
    exec_ms: float | None = None
    total_ms: float


class Result(_Wire):
    v: Literal[1] = 1
    type: Literal["result"] = "result"
    job_id: str
    request_id: str
    app: str = "default"
    model: str = ""
    status: Status
    reason: str = ""
    outputs: dict[str, Tensor] = Field(default_factory=dict)
    prediction: int | None = None
    confidence: float | None = None
    exit: int | None = None
    plan: Plan | None = None
    job_accuracy: float | None = None
    worker: str = ""
    timings: Timings


from adaserve.broker.events import Event  # noqa: E402  (events import Plan-free types only)

Message = Job | Batch | Result | Event
