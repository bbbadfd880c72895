"""What a reply stream carries, read back into result maps or ``Result`` objects.

A reply stream holds two entry forms (README, "The wire format"): ``result``, one request's
result, and ``results``, ``{"v", "type": "results", "job_id", "results": [result, ...]}``, the
requests of one job that ended together (a worker's batch, usually).

``read_reply_maps`` is the SDK's hot path: it unpacks an entry and checks, per result, only the
fields a job's summary is made of (ids, status, reason, prediction, ``timings.total_ms``);
``results_of`` validates maps as ``Result`` objects, one call over a list (pydantic's validation
runs in compiled code; building the objects unvalidated, ``model_construct``, measured twice as
slow). Validating every result on arrival was the largest cost of collecting them, and a caller
that counts completions or reads predictions never needs the objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from adaserve.broker.codec import unpack
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import SCHEMA_VERSION, Result
from adaserve.broker.settings import Limits, default_limits
from adaserve.broker.violations import invalid_message

__all__ = ["STATUSES", "read_reply", "read_reply_maps", "results_of"]

STATUSES = frozenset({"completed", "expired", "rejected", "failed"})
_RESULTS: TypeAdapter[list[Result]] = TypeAdapter(list[Result])


def read_reply(raw: bytes, limits: Limits | None = None) -> list[Result]:
    """The results of one reply-stream entry of either form; ``InvalidMessage`` when it is not one."""
    return results_of(read_reply_maps(raw, limits), limits)


def read_reply_maps(raw: bytes, limits: Limits | None = None) -> list[dict[str, Any]]:
    """The result maps of one entry of either form, each with its summary fields checked
    (``check_summary``); ``InvalidMessage`` when the entry is not a reply."""
    body = unpack(raw, _RECEIVE if limits is None else limits)
    kind = body.get("type")
    if kind == "result":
        maps = [body]
    elif kind == "results":
        maps = body.get("results")  # type: ignore[assignment]
        if body.get("v") != SCHEMA_VERSION or not isinstance(maps, list):
            raise InvalidMessage("schema", "a results entry needs v 1 and a list of results")
    else:
        raise InvalidMessage("schema", f"a reply entry of type {kind!r}, not a result")
    for m in maps:
        check_summary(m)
    return maps


def check_summary(m: object) -> None:
    """What a job's summary reads from a result map, checked as ``Result`` would: the rest of
    the map is validated when the ``Result`` objects are asked for (``results_of``)."""
    if not isinstance(m, dict):
        raise InvalidMessage("schema", "a result must be a map")
    if m.get("v") != SCHEMA_VERSION or m.get("type") != "result":
        raise InvalidMessage("version" if m.get("type") == "result" else "schema",
                             f"not a version {SCHEMA_VERSION} result")
    job, rid, status, reason = m.get("job_id"), m.get("request_id"), m.get("status"), m.get("reason", "")
    if not (isinstance(job, str) and isinstance(rid, str) and isinstance(reason, str)):
        raise InvalidMessage("schema", "a result's job_id, request_id and reason must be strings")
    if status not in STATUSES:
        raise InvalidMessage("schema", f"a result's status {status!r} is not one of {sorted(STATUSES)}")
    pred = m.get("prediction")
    if pred is not None and (not isinstance(pred, int) or isinstance(pred, bool)):
        raise InvalidMessage("schema", "a result's prediction must be an integer or null")
    timings = m.get("timings")
    total = timings.get("total_ms") if isinstance(timings, dict) else None
    if not isinstance(total, (int, float)) or isinstance(total, bool):
        raise InvalidMessage("schema", "a result needs timings.total_ms, a number")


def results_of(maps: Sequence[dict[str, Any]], limits: Limits | None = None) -> list[Result]:
    """Result maps validated as ``Result`` objects, in one call."""
    try:
        return _RESULTS.validate_python(maps, context={"limits": _RECEIVE if limits is None else limits})
    except ValidationError as exc:
        raise invalid_message(exc) from None


# What a client receives is bounded by what workers send, not by the client's own sending limits:
# a results entry may carry a whole batch of one job.
_RECEIVE = default_limits().model_copy(update={"max_message_bytes": 1 << 28, "max_requests_per_job": 1 << 16})
