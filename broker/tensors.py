"""The wire form of a tensor: ``{dtype, shape, data}``, little-endian, C order."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

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


class Tensor(BaseModel):
    # Unknown keys are a producer's mistake (a misspelt ``dtype`` would otherwise be ignored).
    model_config = ConfigDict(frozen=True, extra="forbid")

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str, info: ValidationInfo) -> str:
        allowed = limits_of(info).allowed_dtypes
        if v not in _ITEMSIZE or v not in allowed:
            raise ValueError(f"dtype {v!r} not allowed (allowed: {', '.join(allowed)})")
        return v

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: tuple[int, ...], info: ValidationInfo) -> tuple[int, ...]:
        if len(v) > 8 or any(d < 0 for d in v):
            raise ValueError("shape must have at most 8 non-negative dimensions")
        n = math.prod(v)
        cap = limits_of(info).max_tensor_elements
        if n > cap:
            raise over_limit("tensor of {n} elements exceeds the limit of {cap}", n=n, cap=cap)
        return v

    @model_validator(mode="after")
    def _size(self) -> Tensor:
        # a table, not np.dtype(): this runs for every tensor of every job
        want = math.prod(self.shape) * _ITEMSIZE.get(self.dtype, 0)
        if len(self.data) != want and self.dtype in _ITEMSIZE:
            raise ValueError(f"data holds {len(self.data)} bytes, shape and dtype need {want}")
        return self

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> Tensor:
        a = np.ascontiguousarray(array)
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        a = a.astype(dt, copy=False)
        # the name from a table: str(dtype) costs more than the rest of this together
        name = _NAMES.get(a.dtype) or str(a.dtype)
        return cls.model_construct(dtype=name, shape=a.shape, data=a.tobytes())

    def to_numpy(self) -> np.ndarray:
        dt = _LITTLE.get(self.dtype) or np.dtype(self.dtype).newbyteorder("<")
        return np.frombuffer(self.data, dtype=dt).reshape(self.shape)

    def wire(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "data": self.data}
