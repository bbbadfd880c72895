"""What a reply stream carries, read back into result maps or ``Result`` objects.

A reply stream holds three entry forms (docs/wire.md): ``result``, one request's result;
``results``, ``{"v", "type": "results", "job_id", "results": [result, ...]}``, the requests of one
job that ended together; and ``columns``, the requests of one job that completed in one batch,
their fields as arrays and their outputs stacked (what workers send for a batch that ran whole).
A ``columns`` entry is read into the same result maps as the other two (``expand_columns``).

``read_reply_maps`` is the SDK's hot path: it unpacks an entry and checks, per result, only the
fields a job's summary is made of (ids, status, reason, prediction, ``timings.total_ms``);
``results_of`` validates maps as ``Result`` objects, one call over a list (pydantic's validation
runs in compiled code; building the objects unvalidated, ``model_construct``, measured twice as
slow). Validating every result on arrival was the largest cost of collecting them, and a caller
that counts completions or reads predictions never needs the objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from pydantic import TypeAdapter, ValidationError

from adaserve.broker.codec import unpack
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import SCHEMA_VERSION, Result
from adaserve.broker.settings import Limits, default_limits
from adaserve.broker.violations import invalid_message

__all__ = ["STATUSES", "ColumnRef", "ColumnsEntry", "read_reply", "read_reply_entry", "read_reply_maps", "results_of"]

STATUSES = frozenset({"completed", "expired", "rejected", "failed"})
_RESULTS: TypeAdapter[list[Result]] = TypeAdapter(list[Result])


def read_reply(raw: bytes, limits: Limits | None = None) -> list[Result]:
    """The results of one reply-stream entry of either form; ``InvalidMessage`` when it is not one."""
    return results_of(read_reply_maps(raw, limits), limits)


def read_reply_maps(raw: bytes, limits: Limits | None = None) -> list[dict[str, Any]]:
    """The result maps of one entry of either form, each with its summary fields checked
    (``check_summary``); ``InvalidMessage`` when the entry is not a reply."""
    got = read_reply_entry(raw, limits)
    return got.maps() if isinstance(got, ColumnsEntry) else got


def read_reply_entry(raw: bytes, limits: Limits | None = None) -> list[dict[str, Any]] | ColumnsEntry:
    """``read_reply_maps``, but a ``columns`` entry comes back checked and unexpanded: a client
    that files a whole job from it never builds a map per request."""
    body = unpack(raw, _RECEIVE if limits is None else limits)
    kind = body.get("type")
    if kind == "result":
        maps = [body]
    elif kind == "results":
        maps = body.get("results")  # type: ignore[assignment]
        if body.get("v") != SCHEMA_VERSION or not isinstance(maps, list):
            raise InvalidMessage("schema", "a results entry needs v 1 and a list of results")
    elif kind == "columns":
        return check_columns(body)
    else:
        raise InvalidMessage("schema", f"a reply entry of type {kind!r}, not a result")
    for m in maps:
        check_summary(m)
    return maps


_SHARED = ("app", "model", "plan", "worker", "job_accuracy")
_ONE = ("submitted_ms", "dispatched_ms", "started_ms", "finished_ms", "total_ms")


class ColumnRef(NamedTuple):
    """Request ``j`` of a ``columns`` entry, filed without its map (``ColumnsEntry.maps`` builds it)."""

    entry: ColumnsEntry
    j: int


class ColumnsEntry:
    """A ``columns`` entry, checked as ``expand_columns`` checks it, its result maps built only
    when asked (``maps``): a job's summary (statuses, predictions, latency) reads the columns."""

    __slots__ = ("_body", "_maps", "_rows", "job_id", "predictions", "request_ids", "total_ms")

    def __init__(self, body: dict[str, Any], job_id: str, request_ids: list[str], predictions: list[int | None],
                 total_ms: float, rows: dict[str, tuple[object, list[Any], bytes, int]]) -> None:
        self._body, self._rows, self._maps = body, rows, cast(list[dict[str, Any]] | None, None)
        self.job_id, self.request_ids, self.predictions, self.total_ms = job_id, request_ids, predictions, total_ms

    def maps(self) -> list[dict[str, Any]]:
        """The ``result`` maps the entry stands for, in its order (built once)."""
        if self._maps is None:
            self._maps = _expand(self._body, self._rows)
        return self._maps


def expand_columns(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``result`` maps a ``columns`` entry stands for, in its order: each is the map a
    ``result`` entry of that request would hold. The columns are checked as ``check_summary``
    checks each map (types of the summary fields, one value per request); the rest waits for
    ``results_of``, as for the other forms."""
    return check_columns(body).maps()


def check_columns(body: dict[str, Any]) -> ColumnsEntry:
    """A ``columns`` entry's summary fields checked (``InvalidMessage`` when they do not add up)."""
    ids, timings, outputs = body.get("request_ids"), body.get("timings"), body.get("outputs")
    if body.get("v") != SCHEMA_VERSION:
        raise InvalidMessage("version", f"not a version {SCHEMA_VERSION} columns entry")
    if not (isinstance(ids, list) and isinstance(timings, dict) and isinstance(outputs, dict)):
        raise InvalidMessage("schema", "a columns entry needs request_ids, timings and outputs")
    n = len(ids)
    job = body.get("job_id")
    cols = [body.get(k) for k in ("prediction", "confidence", "exit")] + [timings.get(k) for k in ("queue_ms", "exec_ms")]
    if not (isinstance(job, str) and all(isinstance(x, str) for x in ids)):
        raise InvalidMessage("schema", "a result's job_id, request_id and reason must be strings")
    if body.get("status") != "completed":
        raise InvalidMessage("schema", "a columns entry holds completed requests only")
    if not all(isinstance(c, list) and len(c) == n for c in cols):
        raise InvalidMessage("schema", "a columns entry needs one prediction, confidence, exit, queue_ms "
                                       "and exec_ms per request")
    preds = cols[0]
    assert isinstance(preds, list)
    if not all(p is None or (isinstance(p, int) and not isinstance(p, bool)) for p in preds):
        raise InvalidMessage("schema", "a result's prediction must be an integer or null")
    total = timings.get("total_ms")
    if not isinstance(total, (int, float)) or isinstance(total, bool):
        raise InvalidMessage("schema", "a result needs timings.total_ms, a number")
    rows: dict[str, tuple[object, list[Any], bytes, int]] = {}
    for name, t in outputs.items():
        shape = t.get("shape") if isinstance(t, dict) else None
        data = t.get("data") if isinstance(t, dict) else None
        if not (isinstance(shape, list) and shape and shape[0] == n and isinstance(data, bytes)
                and len(data) % max(n, 1) == 0):
            raise InvalidMessage("schema", f"output {name!r} of a columns entry is not one row per request")
        rows[name] = (t.get("dtype"), shape[1:], data, len(data) // max(n, 1))
    return ColumnsEntry(body, job, ids, preds, total, rows)


def _expand(body: dict[str, Any], rows: dict[str, tuple[object, list[Any], bytes, int]]) -> list[dict[str, Any]]:
    timings = body["timings"]
    shared = {k: body.get(k) for k in _SHARED}
    one = {k: timings.get(k) for k in _ONE}
    out: list[dict[str, Any]] = []
    job = body["job_id"]
    ids, preds, confs, exits = body["request_ids"], body["prediction"], body["confidence"], body["exit"]
    for j, (rid, pred, conf, exit_, queue, exe) in enumerate(zip(ids, preds, confs, exits, timings["queue_ms"],
                                                                 timings["exec_ms"])):
        out.append({
            "v": SCHEMA_VERSION, "type": "result", "job_id": job, "request_id": rid, "status": "completed",
            "reason": "", **shared,
            "outputs": {k: {"dtype": dt, "shape": shape, "data": data[j * step:(j + 1) * step]}
                        for k, (dt, shape, data, step) in rows.items()},
            "prediction": pred, "confidence": conf, "exit": exit_,
            "timings": {**one, "queue_ms": queue, "exec_ms": exe},
        })
    return out


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
