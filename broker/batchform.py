"""The columnar form of a batch message: per job one map, per input one stacked tensor.

A batch's requests usually share everything but their ids and their bytes: they come from a few
jobs, and every request of a model sends the same inputs with the same dtype and shape. The
per-request form (``items``) repeats the job's fields and builds, packs, unpacks and checks one
tensor map per request and input; the columnar form carries the job's fields once (``jobs``, each
with its ``request_ids``) and each input once, its rows the requests in ``jobs`` order
(``inputs``: ``{name: {"dtype", "shape": [n, ...], "data"}}``). The planner sends it when every
request of the batch is a ``forward`` request with the same inputs, dtypes and shapes; anything
else keeps ``items`` (docs/wire.md, *Batches*).

``expand`` turns it into the per-request map, so that ``Batch`` (and everything that validates a
batch with it: a dead letter's reason, a split model's forward) reads both forms as one; a worker's
hot path reads the columns directly (``workers/wire.py``).
"""

from __future__ import annotations

from typing import Any

# The keys of each form; ``tests/broker/test_batchform.py`` holds them to docs/wire.md's tables.
COLUMN_KEYS = frozenset({"v", "type", "id", "model", "plan", "dispatched_ms", "jobs", "inputs"})
JOB_KEYS = frozenset({"job_id", "app", "reply_to", "run", "submitted_ms", "deadline_ms", "job_accuracy",
                      "request_ids"})
TENSOR_KEYS = frozenset({"dtype", "shape", "data"})


def is_columnar(body: dict[str, Any]) -> bool:
    return "jobs" in body and "items" not in body


def rows_of(jobs: list[dict[str, Any]]) -> int:
    """How many requests ``jobs`` hold (``ValueError`` when that is not a list of job maps)."""
    if type(jobs) is not list:
        raise ValueError("jobs must be a list")
    n = 0
    for job in jobs:
        if type(job) is not dict or not job.keys() <= JOB_KEYS or type(job.get("request_ids")) is not list:
            raise ValueError("a job of a columnar batch is a map with request_ids")
        n += len(job["request_ids"])
    return n


def row_bytes(t: dict[str, Any], n: int) -> int:
    """Bytes per request of a stacked tensor map of ``n`` rows (``ValueError`` when its first
    dimension is not ``n`` or its data does not split into ``n`` equal rows)."""
    if type(t) is not dict or not t.keys() == TENSOR_KEYS:
        raise ValueError("a stacked input is a map of dtype, shape and data")
    shape, data = t["shape"], t["data"]
    if type(shape) is not list or not shape or shape[0] != n or type(data) is not bytes or len(data) % n:
        raise ValueError(f"a stacked input has {n} rows: shape [{n}, ...] and data in {n} equal parts")
    return len(data) // n


def expand(body: dict[str, Any]) -> dict[str, Any]:
    """The per-request (``items``) map of a columnar batch map; ``ValueError`` for one that is not
    (the row tensors are then checked where each ``Tensor`` is validated, sizes and limits included)."""
    try:
        if not body.keys() <= COLUMN_KEYS:
            raise ValueError(f"unknown keys in a columnar batch: {sorted(body.keys() - COLUMN_KEYS)}")
        jobs, inputs = body["jobs"], body["inputs"]
        n = rows_of(jobs)
        if n < 1 or type(inputs) is not dict:
            raise ValueError("a columnar batch holds one request or more and a map of inputs")
        rows: dict[str, list[dict[str, Any]]] = {}
        for name, t in inputs.items():
            step, data = row_bytes(t, n), t["data"]
            rows[name] = [{"dtype": t["dtype"], "shape": t["shape"][1:], "data": data[j * step:(j + 1) * step]}
                          for j in range(n)]
        items: list[dict[str, Any]] = []
        for job in jobs:
            shared = {k: v for k, v in job.items() if k != "request_ids"}
            for rid in job["request_ids"]:
                j = len(items)
                items.append({**shared, "request_id": rid, "inputs": {name: r[j] for name, r in rows.items()}})
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a columnar batch: {exc}") from None
    out = {k: v for k, v in body.items() if k not in ("jobs", "inputs")}
    out["items"] = items
    return out


def heads(body: dict[str, Any]) -> list[Any]:
    """Best effort, for a batch that cannot be read whole: the per-request fields its columnar map
    still names (each job's fields and one request id), without inputs; what does not look like a
    job map is skipped. A per-request map's ``items`` as they are."""
    if not is_columnar(body):
        items = body.get("items")
        return items if isinstance(items, list) else []
    jobs = body.get("jobs")
    out: list[Any] = []
    for job in jobs if isinstance(jobs, list) else []:
        if isinstance(job, dict) and isinstance(job.get("request_ids"), list):
            shared = {k: v for k, v in job.items() if k != "request_ids"}
            out += [{**shared, "request_id": rid} for rid in job["request_ids"]]
    return out
