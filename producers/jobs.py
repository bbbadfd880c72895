"""Building jobs from numpy arrays, and checking them against ``Limits`` before they are sent.

The check is the planner's own: encode, then decode with the same limits, so a job the SDK lets
through is one the planner accepts (apart from the model name, which only the planner knows).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import ValidationError

from adaserve.broker.codec import encode_map
from adaserve.broker.errors import InvalidMessage, LimitExceeded
from adaserve.broker.finite import check_finite
from adaserve.broker.messages import Job
from adaserve.broker.settings import Limits, default_limits
from adaserve.broker.tensors import Tensor
from adaserve.broker.violations import invalid_message

UNSET_REPLY = "unset"  # the client replaces it with its own reply channel


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def make_job(
    model: str,
    inputs: Sequence[Mapping[str, np.ndarray] | np.ndarray],
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
    that becomes the input named ``modality``). Request ids default to ``"0"``, ``"1"``, ...
    ``kind`` and ``generation`` (``max_new_tokens``, ``temperature``, ``seed``) apply to every
    request; ``producers.text.generation_job`` builds generation jobs from text.

    Raises ``InvalidMessage`` (``LimitExceeded`` for sizes) when the job does not validate.
    """
    if request_ids is not None and len(request_ids) != len(inputs):
        raise InvalidMessage("schema", f"{len(request_ids)} request ids for {len(inputs)} inputs")
    requests = []
    for i, item in enumerate(inputs):
        arrays = {modality: item} if isinstance(item, np.ndarray) else item
        if not isinstance(arrays, Mapping):
            raise InvalidMessage("schema", f"inputs[{i}] is a {type(item).__name__}, not an array or a map of arrays")
        rid = str(i) if request_ids is None else request_ids[i]
        req: dict[str, Any] = {"id": rid, "kind": kind, "inputs": {k: _tensor(k, v) for k, v in arrays.items()}}
        if generation is not None:
            req["generation"] = dict(generation)
        requests.append(req)
    body: dict[str, Any] = {
        "id": job_id or new_id("job"), "app": app, "model": model, "requests": requests,
        "slo": {"deadline_ms": deadline_ms, "min_accuracy": min_accuracy, "objective": objective},
        "reply_to": reply_to, "priority": priority, "run": run,
    }
    return build_job(body, limits or default_limits())


def _tensor(name: str, value: object) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if not isinstance(value, np.ndarray):
        raise InvalidMessage("schema", f"input {name!r} is a {type(value).__name__}, not a numpy array")
    return Tensor.from_numpy(value)


def build_job(body: Mapping[str, Any], limits: Limits) -> Job:
    """Validate a job map against ``limits``; domain errors only."""
    if isinstance(body.get("requests"), list) and len(body["requests"]) > limits.max_requests_per_job:
        raise LimitExceeded(f"{len(body['requests'])} requests exceed the limit of {limits.max_requests_per_job} per job")
    try:
        return Job.model_validate(dict(body), context={"limits": limits})
    except ValidationError as exc:
        raise invalid_message(exc) from None


def encode_checked(job: Job, limits: Limits) -> bytes:
    """The bytes to XADD, after the checks the planner makes against ``limits`` (tensors included,
    which ``Tensor.from_numpy`` builds unvalidated; NaN and ±Inf too, unless ``limits`` allows them
    for the job's model). The map that is encoded is the one validated: decoding the encoded job
    again cost more than all the rest of a submission."""
    if len(job.requests) > limits.max_requests_per_job:
        raise LimitExceeded(f"{len(job.requests)} requests exceed the limit of {limits.max_requests_per_job} per job")
    body = job.model_dump(mode="python")
    raw = encode_map(body)
    if len(raw) > limits.max_message_bytes:
        raise LimitExceeded(f"job {job.id} encodes to {len(raw)} bytes, above the limit of {limits.max_message_bytes}")
    try:
        Job.model_validate(body, context={"limits": limits})
    except ValidationError as exc:
        err = invalid_message(exc)
        if err.reason == "limit":
            raise LimitExceeded(f"job {job.id}: {err.detail}") from None
        raise InvalidMessage(err.reason, f"job {job.id}: {err.detail}") from None
    try:
        check_finite(job, limits)
    except InvalidMessage as exc:
        raise InvalidMessage(exc.reason, f"job {job.id}: {exc.detail}") from None
    return raw

