"""A batch as a worker reads it: the planner's map checked field by field, without pydantic objects.

A batch's requests were validated at admission, and the planner builds the batch map itself
(``planner/dispatch.py``, held to the ``Batch`` schema by its tests). Validating it again into a
``Batch`` of ``BatchItem`` and ``Tensor`` objects cost a worker 6.5 µs per request (9.1 against
2.6 for unpacking, fsdd-cnn, 32 requests), more than the model. ``read_batch`` keeps every check
the schema makes (types, the kind, unknown keys, the tensor limits, via ``broker.tensors``'s own
``check_wire``) and builds slotted objects with the same attribute names; the plan, one per
batch, is still a pydantic ``Plan``. ``tests/workers/test_wire.py`` holds these types to
``Batch`` and ``BatchItem`` (their fields and defaults) and ``read_batch`` to ``decode`` on
valid and broken maps, so the two forms cannot drift apart. ``full()`` gives the pydantic
``Batch`` for the rare paths that copy one (a split model's forward).

A batch in the columnar form (``broker/batchform.py``) is read without a map per request: each
input's stacked tensor is checked once (its rows' shape, dtype and size, the element limit per
row) and kept as ``WireBatch.stacked``, which the executor turns into one array per input; each
request's ``inputs`` are views of its row, cut only if something reads them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaserve.broker.batchform import COLUMN_KEYS, is_columnar, row_bytes, rows_of
from adaserve.broker.codec import decode, unpack
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import SCHEMA_VERSION, Batch, BatchItem, Generation, Plan
from adaserve.broker.settings import ALL_DTYPES, Limits, default_limits

_LITTLE: dict[str, np.dtype[Any]] = {}
_BATCH_KEYS = frozenset({"v", "type", "id", "model", "plan", "items", "dispatched_ms"})
_FORMS = (_BATCH_KEYS, COLUMN_KEYS)


@dataclass(slots=True)
class WireTensor:
    """``broker.tensors.Tensor``'s fields, checked by the same ``check_wire``."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def to_numpy(self) -> np.ndarray:
        dt = _LITTLE.get(self.dtype)
        if dt is None:
            dt = _LITTLE[self.dtype] = np.dtype(self.dtype).newbyteorder("<")
        return np.frombuffer(self.data, dtype=dt).reshape(self.shape)


@dataclass(slots=True)
class WireItem:
    """``BatchItem``'s fields, in its order, with its defaults."""

    job_id: str
    request_id: str
    app: str
    reply_to: str
    inputs: Mapping[str, WireTensor]
    submitted_ms: float
    deadline_ms: float
    run: str = ""
    kind: str = "forward"
    generation: Generation | None = None
    job_accuracy: float | None = None
    prior_exec_ms: float = 0.0


@dataclass(slots=True)
class WireBatch:
    """``Batch``'s fields (``v`` and ``type`` are checked, not kept) and the map it was read from.
    Stricter than pydantic's lax mode in one way: a number must be a number (not a bool), a
    string a string (not bytes); the planner sends nothing else."""

    id: str
    model: str
    plan: Plan
    items: list[WireItem]
    dispatched_ms: float
    body: dict[str, Any]
    # The columnar form's inputs, one tensor of shape [n, ...] each (rows: ``items`` in order).
    stacked: dict[str, WireTensor] | None = None

    def full(self) -> Batch:
        """The pydantic ``Batch`` of the same map (validated: it passed the same checks)."""
        return Batch.model_validate(self.body)


_ITEM_KEYS = frozenset(WireItem.__dataclass_fields__)
_KINDS = ("forward", "generate")
_ITEMSIZE = {name: np.dtype(name).itemsize for name in ALL_DTYPES}


AnyBatch = Batch | WireBatch  # what a worker's stages take: read from the stream, or built by a test
AnyItem = BatchItem | WireItem


def items_of(batch: AnyBatch) -> Sequence[AnyItem]:
    return batch.items


def read_batch(raw: bytes, limits: Limits | None = None) -> WireBatch:
    """A batch entry's bytes as a ``WireBatch``; ``InvalidMessage`` (with ``decode``'s reason)
    for a map that is not a batch. The map's layout is trusted (the planner built it); what could
    harm the worker is still checked per tensor: a known dtype, and data of the size its shape
    and dtype need, within the element limit. A map that does not fit goes through ``decode`` for
    the reason it is refused."""
    lim = default_limits() if limits is None else limits
    body = unpack(raw, lim)
    try:
        columnar = is_columnar(body)
        if body["v"] != SCHEMA_VERSION or body["type"] != "batch" or not body.keys() <= _FORMS[columnar]:
            raise ValueError("not a version 1 batch")
        plan = Plan.model_validate(body["plan"], context={"limits": lim})
        stacked = None
        if columnar:
            items, stacked = _columns(body, lim)
        else:
            items = [_item(it, lim) for it in body["items"]]
        bid, model = body["id"], body["model"]
        if type(bid) is not str or type(model) is not str:
            raise ValueError("not a batch")
        return WireBatch(bid, model, plan, items, _num(body["dispatched_ms"]), body, stacked)
    except (KeyError, TypeError, ValueError, AttributeError):
        pass
    decode(raw, lim, expect=Batch)  # raises with the reason
    raise InvalidMessage("schema", "a batch map the worker cannot read")  # what decode took but this did not


def _item(it: dict[str, Any], lim: Limits) -> WireItem:
    if not it.keys() <= _ITEM_KEYS:
        raise ValueError("unknown key")
    job, rid, app, reply, run, kind = (it["job_id"], it["request_id"], it["app"], it["reply_to"], it.get("run", ""),
                                       it.get("kind", "forward"))
    if not (type(job) is type(rid) is type(app) is type(reply) is type(run) is str) or kind not in _KINDS:
        raise ValueError("not an item")
    gen, acc = it.get("generation"), it.get("job_accuracy")
    inputs = {name: _tensor(t, lim) for name, t in it["inputs"].items()}
    return WireItem(job, rid, app, reply, inputs, _num(it["submitted_ms"]), _num(it["deadline_ms"]), run, kind,
                    None if gen is None else Generation.model_validate(gen, context={"limits": lim}),
                    None if acc is None else _num(acc), _num(it.get("prior_exec_ms", 0.0)))


def _num(v: object) -> float:
    if type(v) is float or type(v) is int:
        return float(v)
    raise ValueError("not a number")


def _tensor(t: dict[str, Any], lim: Limits) -> WireTensor:
    dtype, shape, data = t["dtype"], tuple(t["shape"]), t["data"]
    n = _elements(shape)
    if len(t) != 3 or type(data) is not bytes or n > lim.max_tensor_elements or len(data) != n * _ITEMSIZE[dtype] \
            or dtype not in lim.allowed_dtypes:
        raise ValueError("not a tensor map")
    return WireTensor(dtype, shape, data)


class RowInputs(Mapping[str, WireTensor]):
    """Request ``j``'s inputs in a columnar batch: its row of each stacked tensor, cut on access."""

    __slots__ = ("_j", "_n", "_stacked")

    def __init__(self, stacked: dict[str, WireTensor], j: int, n: int) -> None:
        self._stacked, self._j, self._n = stacked, j, n

    def __getitem__(self, name: str) -> WireTensor:
        t = self._stacked[name]
        step = len(t.data) // self._n
        return WireTensor(t.dtype, t.shape[1:], t.data[self._j * step:(self._j + 1) * step])

    def __iter__(self) -> Iterator[str]:
        return iter(self._stacked)

    def __len__(self) -> int:
        return len(self._stacked)


def _columns(body: dict[str, Any], lim: Limits) -> tuple[list[WireItem], dict[str, WireTensor]]:
    """A columnar batch's items and stacked inputs, every check of the per-request form made once
    per input (per row: the shape, the dtype, the size, the element limit) or once per job."""
    jobs = body["jobs"]
    n = rows_of(jobs)
    if n < 1 or type(body["inputs"]) is not dict:
        raise ValueError("not a columnar batch")
    stacked: dict[str, WireTensor] = {}
    for name, t in body["inputs"].items():
        step = row_bytes(t, n)
        dtype, shape = t["dtype"], tuple(t["shape"])
        row = _elements(shape[1:])
        if len(shape) > 9 or row > lim.max_tensor_elements or step != row * _ITEMSIZE[dtype] \
                or dtype not in lim.allowed_dtypes:
            raise ValueError("not a stacked tensor map")
        stacked[name] = WireTensor(dtype, shape, t["data"])
    items: list[WireItem] = []
    for job in jobs:
        jid, app, reply, run = job["job_id"], job["app"], job["reply_to"], job.get("run", "")
        if not (type(jid) is type(app) is type(reply) is type(run) is str):
            raise ValueError("not a job of a batch")
        sub, dl, acc = _num(job["submitted_ms"]), _num(job["deadline_ms"]), job.get("job_accuracy")
        acc = None if acc is None else _num(acc)
        for rid in job["request_ids"]:
            if type(rid) is not str:
                raise ValueError("not a request id")
            items.append(WireItem(jid, rid, app, reply, RowInputs(stacked, len(items), n), sub, dl, run,
                                  job_accuracy=acc))
    return items, stacked


def _elements(shape: tuple[Any, ...]) -> int:
    n = 1
    for d in shape:
        if type(d) is not int or d < 0:
            raise ValueError("not a shape")
        n *= d
    return n
