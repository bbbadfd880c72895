"""The columnar form of a job: its request ids in one list, each input in one stacked tensor.

Most jobs are n requests of one model with the same inputs, dtypes and shapes. The per-request
form (``requests``) makes a producer build, and the planner unpack and validate, one map per
request and input; the columnar form sends ``request_ids`` (n ids) and ``inputs``
(``{name: {"dtype", "shape": [n, ...], "data"}}``, row j request j's tensor) in place of
``requests``, and is read as the n ``forward`` requests it stands for (docs/wire.md, *Jobs in
columns*). Checking it costs one pass per input, not one per request and input.

``expand`` turns it into the per-request map, which is what the form means; ``rows`` checks it
and gives each input's rows without building a map per request (``messages.Job`` builds the
requests from them). ``tests/broker/test_jobform.py`` holds the two to each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from adaserve.broker.settings import Limits
from adaserve.broker.violations import over_limit

# What the form has in place of ``requests``; ``tests/broker/test_jobform.py`` holds this to
# docs/wire.md's table.
COLUMN_KEYS = frozenset({"request_ids", "inputs"})
TENSOR_KEYS = frozenset({"dtype", "shape", "data"})
_ID = re.compile(r"[A-Za-z0-9_.:\-]+")
_IDS = re.compile(r"[A-Za-z0-9_.:\- ]+")
_ITEMSIZE = {"float32": 4, "float16": 2, "float64": 8, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
             "bool": 1}


def _ids_fit(joined: str, n: int) -> bool:
    """Every id of the ``n`` joined by spaces is made of the id characters (none holds a space)."""
    return joined.count(" ") == n - 1 and _IDS.fullmatch(joined) is not None


def is_columnar(body: dict[str, Any]) -> bool:
    """Whether a job map is in the columnar form (or means to be: a map with both forms' keys is
    one, and is refused as such)."""
    return "request_ids" in body or ("inputs" in body and "requests" not in body)


@dataclass(frozen=True, slots=True)
class Column:
    """One stacked input, checked: its dtype, a row's shape, the data and a row's bytes."""

    dtype: str
    row_shape: tuple[int, ...]
    data: bytes
    step: int

    def row(self, j: int) -> bytes:
        return self.data[j * self.step:(j + 1) * self.step]


def rows(body: dict[str, Any], limits: Limits) -> tuple[list[str], dict[str, Column]]:
    """The request ids and the checked inputs of a columnar job map. Raises ``ValueError`` for a
    malformed one, or pydantic's limit error (``over_limit``) for a size above ``limits``: the
    same checks, limits and reasons as the per-request form, applied per input and row."""
    if "requests" in body:
        raise ValueError("a job has either requests or request_ids and inputs, not both")
    ids, inputs = body.get("request_ids"), body.get("inputs")
    if type(ids) is not list or not ids:
        raise ValueError("request_ids: a list of one request id or more, one per row of each input")
    n = len(ids)
    if n > limits.max_requests_per_job:
        raise over_limit("{n} requests exceed the limit of {cap} per job", n=n, cap=limits.max_requests_per_job)
    cap = limits.max_id_length
    # One match over the ids joined by a character no id holds, rather than one per id (a sixth of
    # reading a 32-request job); the loop below runs only to name a bad id.
    if not (all(type(rid) is str for rid in ids) and 0 < min(map(len, ids)) and max(map(len, ids)) <= cap
            and _ids_fit(" ".join(ids), len(ids))):
        for rid in ids:
            if type(rid) is not str or len(rid) > cap or not _ID.fullmatch(rid):
                raise ValueError(f"request_ids: {rid!r} is not an id of 1 to {cap} characters from [A-Za-z0-9_.:-]")
    if type(inputs) is not dict or not inputs:
        raise ValueError("inputs: a map of one input or more, each a tensor of shape [n, ...]")
    if len(inputs) > limits.max_modalities:
        raise over_limit("{n} inputs exceed the limit of {cap} modalities", n=len(inputs), cap=limits.max_modalities)
    return ids, {name: _column(name, t, n, limits) for name, t in inputs.items()}


def _column(name: object, t: object, n: int, limits: Limits) -> Column:
    if type(name) is not str:
        raise ValueError("inputs: input names are strings")
    if type(t) is not dict or t.keys() != TENSOR_KEYS:
        raise ValueError(f"inputs.{name}: a tensor map of dtype, shape and data")
    dtype, shape, data = t["dtype"], t["shape"], t["data"]
    if type(dtype) is not str or dtype not in _ITEMSIZE or dtype not in limits.allowed_dtypes:
        raise ValueError(f"inputs.{name}: dtype {dtype!r} not allowed (allowed: {', '.join(limits.allowed_dtypes)})")
    # a row is a request's tensor: at most 8 dimensions, as the per-request form allows
    if type(shape) is not list or not 1 <= len(shape) <= 9 or any(type(d) is not int or d < 0 for d in shape):
        raise ValueError(f"inputs.{name}: shape must be [n, ...], a list of 1 to 9 non-negative integers")
    if shape[0] != n:
        raise ValueError(f"inputs.{name}: shape {shape} has {shape[0]} rows for {n} request ids")
    elements = 1
    for d in shape[1:]:
        elements *= d
    if elements > limits.max_tensor_elements:
        raise over_limit("inputs.{name}: a row of {n} elements exceeds the limit of {cap}", name=name, n=elements,
                         cap=limits.max_tensor_elements)
    step = elements * _ITEMSIZE[dtype]
    if type(data) is not bytes or len(data) != n * step:
        got = f"{len(data)} bytes" if isinstance(data, bytes) else type(data).__name__
        raise ValueError(f"inputs.{name}: data holds {got}, shape {shape} and dtype {dtype} need {n * step} bytes")
    return Column(dtype, tuple(shape[1:]), data, step)


def expand(body: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """The per-request map a columnar job map stands for: request j is ``{"id": request_ids[j],
    "inputs": {name: row j of each input}}`` (a ``forward`` request without ``generation``)."""
    ids, cols = rows(body, limits)
    requests = [{"id": rid, "inputs": {name: {"dtype": c.dtype, "shape": list(c.row_shape), "data": c.row(j)}
                                       for name, c in cols.items()}}
                for j, rid in enumerate(ids)]
    out = {k: v for k, v in body.items() if k not in COLUMN_KEYS}
    out["requests"] = requests
    return out

