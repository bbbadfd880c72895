"""Building jobs from numpy arrays, and checking them against ``Limits`` before they are sent.

The check is the planner's own: the map that is encoded is validated with the same models and
limits, so a job the SDK lets through is one the planner accepts (apart from the model name,
which only the planner knows). ``make_job`` validates the job once, with the limits it is
given, and keeps the request maps it came from (keyed by the job, dropped with it):
``encode_checked`` encodes those very maps and validates again only what changed since (the
reply channel), instead of dumping the job and validating the dump again, which cost a producer
as much again as building the job. A job in columns is validated without pydantic's pass over
the requests it built from rows that ``jobform.rows`` checked (``messages.job_in_columns``); a
job that fails any check is validated in full, so that its error is the full validation's.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import TypeAdapter, ValidationError

from adaserve.broker.codec import encode_map
from adaserve.broker.errors import InvalidMessage, LimitExceeded
from adaserve.broker.finite import all_finite, check_finite
from adaserve.broker.messages import Job, job_in_columns
from adaserve.broker.settings import Limits, default_limits
from adaserve.broker.tensors import Tensor, wire_of
from adaserve.broker.violations import invalid_message

UNSET_REPLY = "unset"  # the client replaces it with its own reply channel

# id(job) -> (its Request objects, the validated wire keys they came from, ``requests`` or the
# columnar form's, and the limits they passed): see the docstring.
_VALIDATED: dict[int, tuple[tuple[object, ...], dict[str, Any], Limits]] = {}
# ``Job.reply_to``'s own constraints, read from the model so that the two cannot drift apart
_REPLY_TO: TypeAdapter[str] = TypeAdapter(Annotated[str, Job.model_fields["reply_to"]])


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def make_job(
    model: str,
    inputs: Sequence[Mapping[str, np.ndarray] | np.ndarray] | Mapping[str, np.ndarray],
    deadline_ms: float,
    *,
    min_accuracy: float = 0.0,
    objective: str = "latency",
    app: str = "default",
    run: str = "",
    priority: int = 0,
    job_id: str | None = None,
    request_ids: Sequence[str] | None = None,
    modality: str = "input",
    reply_to: str = UNSET_REPLY,
    limits: Limits | None = None,
    kind: str = "forward",
    generation: Mapping[str, Any] | None = None,
) -> Job:
    """A job with one request per element of ``inputs`` (a modality -> array map, or one array
    that becomes the input named ``modality``), or, when ``inputs`` is one map of modality ->
    array, one request per row of the arrays, sent in the columnar form (forward requests only;
    the cheaper form for a producer and the planner alike). Request ids default to ``"0"``, ``"1"``, ...
    ``kind`` and ``generation`` (``max_new_tokens``, ``temperature``, ``seed``) apply to every
    request; ``producers.text.generation_job`` builds generation jobs from text.

    Raises ``InvalidMessage`` (``LimitExceeded`` for sizes) when the job does not validate.
    """
    if isinstance(inputs, Mapping):
        if kind != "forward" or generation is not None:
            raise InvalidMessage("schema", "a job in columns holds forward requests only; send generation "
                                           "requests one by one (a sequence of inputs)")
        return _columns_job(inputs, request_ids, {
            "id": job_id or new_id("job"), "app": app, "model": model,
            "slo": {"deadline_ms": deadline_ms, "min_accuracy": min_accuracy, "objective": objective},
            "reply_to": reply_to, "priority": priority, "run": run}, limits or default_limits())
    if request_ids is not None and len(request_ids) != len(inputs):
        raise InvalidMessage("schema", f"{len(request_ids)} request ids for {len(inputs)} inputs")
    requests = []
    for i, item in enumerate(inputs):
        arrays = {modality: item} if isinstance(item, np.ndarray) else item
        if not isinstance(arrays, Mapping):
            raise InvalidMessage("schema", f"inputs[{i}] is a {type(item).__name__}, not an array or a map of arrays")
        rid = str(i) if request_ids is None else request_ids[i]
        req: dict[str, Any] = {"id": rid, "kind": kind, "inputs": {k: _tensor_map(k, v) for k, v in arrays.items()}}
        if generation is not None:
            req["generation"] = dict(generation)
        requests.append(req)
    body: dict[str, Any] = {
        "id": job_id or new_id("job"), "app": app, "model": model, "requests": requests,
        "slo": {"deadline_ms": deadline_ms, "min_accuracy": min_accuracy, "objective": objective},
        "reply_to": reply_to, "priority": priority, "run": run,
    }
    lim = limits or default_limits()
    return _kept(build_job(body, lim), {"requests": requests}, lim)


def _columns_job(arrays: Mapping[str, np.ndarray], request_ids: Sequence[str] | None, head: dict[str, Any],
                 limits: Limits) -> Job:
    """A job in the columnar form (docs/wire.md, *Jobs in columns*): each array's first dimension
    is the job's requests, row j request j's input; one check per input, not per request."""
    if not arrays:
        raise InvalidMessage("schema", "a job in columns needs one input or more (a map of name -> array)")
    first = next(iter(arrays.values()))
    n = len(first) if isinstance(first, np.ndarray) and first.ndim > 0 else 0
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.ndim == 0:
            raise InvalidMessage("schema", f"input {name!r} is not an array of one row per request")
        if len(a) != n:
            raise InvalidMessage("schema", f"input {name!r} has {len(a)} rows, another input {n}: one row per request")
    ids = [str(i) for i in range(n)] if request_ids is None else list(request_ids)
    if len(ids) != n:
        raise InvalidMessage("schema", f"{len(ids)} request ids for {n} rows of each input")
    wire = {"request_ids": ids, "inputs": {k: wire_of(a) for k, a in arrays.items()}}
    body = {**head, **wire}
    return _kept(job_in_columns(body, limits) or build_job(body, limits), wire, limits)


def _kept(job: Job, wire: dict[str, Any], limits: Limits) -> Job:
    """``job``, with the validated wire maps its requests came from kept for ``encode_checked``."""
    key = id(job)
    _VALIDATED[key] = (tuple(job.requests), wire, limits)
    weakref.finalize(job, _VALIDATED.pop, key, None)
    return job


def _tensor_map(name: str, value: object) -> dict[str, Any]:
    """An input's wire map, validated with the job (``Tensor``'s own check of the map)."""
    if isinstance(value, Tensor):
        return value.wire()
    if not isinstance(value, np.ndarray):
        raise InvalidMessage("schema", f"input {name!r} is a {type(value).__name__}, not a numpy array")
    return wire_of(value)


def _validated_maps(job: Job, limits: Limits) -> dict[str, Any] | None:
    """The wire keys ``make_job`` validated for this very job, when they still stand for its
    requests (the same objects) and were checked against the same limits; None otherwise."""
    got = _VALIDATED.get(id(job))
    if got is None:
        return None
    reqs, maps, lim = got
    if len(reqs) != len(job.requests) or any(a is not b for a, b in zip(reqs, job.requests)) \
            or (lim is not limits and lim != limits):
        return None
    return maps


def build_job(body: Mapping[str, Any], limits: Limits) -> Job:
    """Validate a job map against ``limits``; domain errors only."""
    if isinstance(body.get("requests"), list) and len(body["requests"]) > limits.max_requests_per_job:
        raise LimitExceeded(f"{len(body['requests'])} requests exceed the limit of {limits.max_requests_per_job} per job")
    try:
        return Job.model_validate(dict(body), context={"limits": limits})
    except ValidationError as exc:
        raise invalid_message(exc) from None


def encode_checked(job: Job, limits: Limits, reply_to: str | None = None) -> bytes:
    """The bytes to XADD, after the checks the planner makes against ``limits`` (tensors included,
    which ``Tensor.from_numpy`` builds unvalidated; NaN and ±Inf too, unless ``limits`` allows them
    for the job's model), with ``reply_to`` in place of the job's when given. The map that is
    encoded is the one validated: decoding the encoded job again cost more than all the rest of a
    submission. A job from ``make_job`` was validated whole against these limits, and is frozen;
    then only ``reply_to`` is validated here (when it is given), and a failure is met by the full
    validation, whose error it raises."""
    if len(job.requests) > limits.max_requests_per_job:
        raise LimitExceeded(f"{len(job.requests)} requests exceed the limit of {limits.max_requests_per_job} per job")
    maps = _validated_maps(job, limits)
    if maps is None:
        body = job.model_dump(mode="python")
        checked: dict[str, Any] = body
    else:
        body = job.model_dump(mode="python", exclude={"requests"})
        checked = {**body, "requests": job.requests}
    if reply_to is not None:
        body["reply_to"] = checked["reply_to"] = reply_to
    if maps is not None:
        body.update(maps)
    raw = encode_map(body)
    if len(raw) > limits.max_message_bytes:
        raise LimitExceeded(f"job {job.id} encodes to {len(raw)} bytes, above the limit of {limits.max_message_bytes}")
    try:
        if maps is None or not _reply_to_fits(reply_to):
            Job.model_validate(checked, context={"limits": limits})
    except ValidationError as exc:
        err = invalid_message(exc)
        if err.reason == "limit":
            raise LimitExceeded(f"job {job.id}: {err.detail}") from None
        raise InvalidMessage(err.reason, f"job {job.id}: {err.detail}") from None
    try:
        if maps is None or "inputs" not in maps or not all_finite(maps["inputs"].values(), job.model, limits):
            check_finite(job, limits)  # names the request and input that hold one
    except InvalidMessage as exc:
        raise InvalidMessage(exc.reason, f"job {job.id}: {exc.detail}") from None
    return raw


def _reply_to_fits(reply_to: str | None) -> bool:
    """Whether a reply channel given to ``encode_checked`` passes ``Job.reply_to``'s checks."""
    if reply_to is None:
        return True
    try:
        _REPLY_TO.validate_python(reply_to)
    except ValidationError:
        return False
    return True
