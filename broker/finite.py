"""Non-finite inputs: a float tensor holding NaN or ±Inf is rejected at admission (reason
``non_finite``) unless its model is listed in ``Limits.allow_non_finite``.

A model fed NaN answers anyway: fsdd-cnn answered an all-NaN recording ``completed`` with
prediction 0, a confident answer to garbage. The SDK and the planner make the same check, once per
tensor and vectorised, so it costs one pass over the bytes a decode has already made.
"""

from __future__ import annotations

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
