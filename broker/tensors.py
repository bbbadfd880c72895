"""The wire form of a tensor: ``{dtype, shape, data}``, little-endian, C order."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

from adaserve.broker.settings import ALL_DTYPES, Limits, default_limits
from adaserve.broker.violations import over_limit


def dtype_fits(sent: str, wanted: str) -> bool:
    """Whether a tensor of dtype ``sent`` may feed a model input of dtype ``wanted`` (the worker
    casts it): any float for a float (float16 halves the bytes on the wire; float64 is what many
    languages make), an integer for an integer when the cast cannot wrap (``uint8`` token ids for
    ``int64``), and never an integer for a float: raw ``uint8`` pixels are not the normalised
    input a float model was trained on, and casting them would answer without an error."""
    src, dst = np.dtype(sent), np.dtype(wanted)
    if src == dst or (src.kind == "f" and dst.kind == "f"):
        return True
    return src.kind in "iu" and dst.kind in "iu" and bool(np.can_cast(src, dst, casting="safe"))


_ITEMSIZE = {name: np.dtype(name).itemsize for name in ALL_DTYPES}
_NAMES = {np.dtype(name): name for name in ALL_DTYPES}
_LITTLE = {name: np.dtype(name).newbyteorder("<") for name in ALL_DTYPES}


def limits_of(info: ValidationInfo) -> Limits:
    ctx = info.context or {}
    lim = ctx.get("limits")
    return lim if isinstance(lim, Limits) else default_limits()


def check_wire(v: dict[str, Any], lim: Limits) -> None:
    """A tensor map's checks (``ValueError``, or ``over_limit`` for a size): ``Tensor`` runs them
    on every map it validates, and workers on the tensors of a batch they read without pydantic."""
    dtype, shape, data = v.get("dtype"), v.get("shape"), v.get("data")
    if isinstance(dtype, str) and (dtype not in _ITEMSIZE or dtype not in lim.allowed_dtypes):
        raise ValueError(f"dtype {dtype!r} not allowed (allowed: {', '.join(lim.allowed_dtypes)})")
    if not isinstance(shape, (list, tuple)) or len(shape) > 8:
        raise ValueError("shape must be a list of at most 8 non-negative integers")
    n = 1
    for d in shape:
        if type(d) is not int or d < 0:
            raise ValueError("shape must be a list of at most 8 non-negative integers")
        n *= d
    if n > lim.max_tensor_elements:
        raise over_limit("tensor of {n} elements exceeds the limit of {cap}", n=n, cap=lim.max_tensor_elements)
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError("data must be bytes (msgpack bin)")
    if isinstance(dtype, str) and len(data) != n * _ITEMSIZE[dtype]:
        raise ValueError(f"data holds {len(data)} bytes, shape and dtype need {n * _ITEMSIZE[dtype]}")


def wire_of(array: np.ndarray) -> dict[str, Any]:
    """An array's wire map, unvalidated: little-endian, C order."""
    a = np.ascontiguousarray(array)
    dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    a = a.astype(dt, copy=False)
    # the name from a table: str(dtype) costs more than the rest of this together
    return {"dtype": _NAMES.get(a.dtype) or str(a.dtype), "shape": list(a.shape), "data": a.tobytes()}


class Tensor(BaseModel):
    # Unknown keys are a producer's mistake (a misspelt ``dtype`` would otherwise be ignored).
    model_config = ConfigDict(frozen=True, extra="forbid")

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    # One check of the raw map rather than a validator per field and one after: a job carries a
    # tensor per request and input, and each validator is a call from pydantic's compiled core into
    # Python. A ``Tensor`` object passed in (``from_numpy``) is not a map and is taken as it is.
    @model_validator(mode="before")
    @classmethod
    def _check(cls, v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, dict):
            return v
        check_wire(v, limits_of(info))
        return v

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> Tensor:
        w = wire_of(array)
        return cls.model_construct(dtype=w["dtype"], shape=tuple(w["shape"]), data=w["data"])

    def to_numpy(self) -> np.ndarray:
        dt = _LITTLE.get(self.dtype) or np.dtype(self.dtype).newbyteorder("<")
        return np.frombuffer(self.data, dtype=dt).reshape(self.shape)

    def wire(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "data": self.data}
