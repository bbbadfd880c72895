"""Non-finite inputs: a float tensor holding NaN or ±Inf is rejected at admission (reason
``non_finite``) unless its model is listed in ``Limits.allow_non_finite``.

A model fed NaN answers anyway: fsdd-cnn answered an all-NaN recording ``completed`` with
prediction 0, a confident answer to garbage. The SDK and the planner make the same check, once per
tensor and vectorised, so it costs one pass over the bytes a decode has already made.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Job
from adaserve.broker.settings import Limits
from adaserve.broker.tensors import Tensor

REASON = "non_finite"


def is_finite(tensor: Tensor) -> bool:
    """True unless ``tensor`` is a float tensor with a NaN or an infinity."""
    if np.dtype(tensor.dtype).kind != "f" or not tensor.data:
        return True
    return bool(np.isfinite(tensor.to_numpy()).all())


def all_finite(tensors: Iterable[dict[str, Any]], model: str, limits: Limits) -> bool:
    """Whether wire tensor maps (a columnar job's stacked inputs) hold no NaN or ±Inf, or the
    model takes them: one pass per tensor, no join. ``check_finite`` names the culprit."""
    if model in limits.allow_non_finite:
        return True
    for t in tensors:
        dtype = t["dtype"]
        if dtype in _FLOATS and t["data"] and not np.isfinite(np.frombuffer(t["data"], dtype=_LE[dtype])).all():
            return False
    return True


def check_finite(job: Job, limits: Limits) -> None:
    """Raise ``InvalidMessage("non_finite", ...)`` naming the first input that holds NaN or ±Inf.

    One pass per float dtype over the whole job's bytes, joined: a job of 32 small inputs costs one
    ``isfinite`` instead of 32. Only a job that fails is searched for the input to name."""
    if job.model in limits.allow_non_finite:
        return
    by_dtype: dict[str, list[bytes]] = {}
    for req in job.requests:
        for tensor in req.inputs.values():
            if tensor.dtype in _FLOATS and tensor.data:
                by_dtype.setdefault(tensor.dtype, []).append(tensor.data)
    if all(np.isfinite(np.frombuffer(b"".join(parts), dtype=np.dtype(dt).newbyteorder("<"))).all()
           for dt, parts in by_dtype.items()):
        return
    for req in job.requests:
        for name, tensor in req.inputs.items():
            if not is_finite(tensor):
                raise InvalidMessage(REASON, f"request {req.id}: input {name!r} holds NaN or infinite values; "
                                             f"model {job.model!r} does not take them (ADASERVE_LIMIT_ALLOW_NON_FINITE "
                                             "lists the models that do)")


_FLOATS = frozenset(("float16", "float32", "float64"))
_LE = {name: np.dtype(name).newbyteorder("<") for name in _FLOATS}
