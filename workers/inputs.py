"""Fitting requests' tensors to what a runner takes: names, per-sample shape and dtype.

Requests carry one sample per tensor (no batch axis), as the model manifest's ``InputSpec``
describes them. A runner may declare its specs (``Runner.specs``); then each request is checked
on its own and a bad one fails alone.
Requests are grouped by the shapes and dtypes of their tensors, as they came off the wire, and
each group is stacked straight from the wire bytes (one copy) and run on its own: without specs a
wrong shape still fails only its own group, when the runtime rejects it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from adaserve.broker.errors import InputError as InputError  # defined with every other error; imported from here too
from adaserve.broker.tensors import Tensor, dtype_fits
from adaserve.workers.runtime.base import Runner

Spec = tuple[tuple[int, ...], str]  # per-sample shape (negative or 0 = any size), dtype
Signature = tuple[tuple[str, str, tuple[int, ...]], ...]  # (input, dtype, shape) on the wire


def specs_of(runner: Runner) -> dict[str, Spec] | None:
    """The runner's specs in the form requests are checked against; None when it declares none."""
    if not runner.specs:
        return None
    return {name: (tuple(spec.shape), spec.dtype) for name, spec in runner.specs.items()}


def signature(inputs: Mapping[str, Tensor], names: Sequence[str]) -> Signature:
    """What a request brings for each input ``names`` asks for; ``InputError`` if one is missing."""
    try:
        return tuple((name, inputs[name].dtype, inputs[name].shape) for name in names)
    except KeyError:
        missing = next(n for n in names if n not in inputs)
        have = ", ".join(sorted(inputs)) or "none"
        raise InputError(f"missing input {missing!r} (request has: {have})") from None


def pixel_inputs(runner: Runner) -> frozenset[str]:
    """Inputs the runner also takes as ``uint8`` pixels, normalising them itself (``InputSpec.normalize``)."""
    return frozenset(name for name, spec in (runner.specs or {}).items() if getattr(spec, "normalize", None))


def targets(sig: Signature, specs: Mapping[str, Spec] | None, pixels: frozenset[str] = frozenset()) -> dict[str, Spec]:
    """Per input, the per-sample shape and dtype a group with signature ``sig`` is run with;
    ``uint8`` pixels for an input in ``pixels`` stay ``uint8`` (the runner normalises them)."""
    out: dict[str, Spec] = {}
    for name, dtype, shape in sig:
        spec = specs.get(name) if specs else None
        if spec is None:
            out[name] = (shape, dtype)
        elif dtype == "uint8" and name in pixels:
            out[name] = (_conform(name, spec[1], shape, spec)[0], "uint8")
        else:
            out[name] = _conform(name, dtype, shape, spec)
    return out


def _conform(name: str, dtype: str, shape: tuple[int, ...], spec: Spec) -> Spec:
    want, want_dtype = spec
    if len(shape) == len(want) + 1 and shape[0] == 1:
        shape = shape[1:]  # a producer that kept a batch axis of one: accept it
    if len(shape) != len(want) or any(w > 0 and d != w for d, w in zip(shape, want)):
        raise InputError(f"input {name!r} has shape {list(shape)}, the model takes {list(want)} per request")
    if not dtype_fits(dtype, want_dtype):  # the planner admits by the same rule
        raise InputError(f"input {name!r} is {dtype}, the model takes {want_dtype}")
    return shape, want_dtype


def gather(rows: Sequence[Mapping[str, Tensor]], sig: Signature, target: Mapping[str, Spec]) -> dict[str, np.ndarray]:
    """Stack the requests of one group along axis 0, straight from their wire bytes."""
    out: dict[str, np.ndarray] = {}
    for name, dtype, _ in sig:
        shape, want = target[name]
        buf = bytearray().join(row[name].data for row in rows)  # writable, unlike joined bytes
        arr = np.frombuffer(buf, dtype=np.dtype(dtype).newbyteorder("<")).reshape((len(rows), *shape))
        out[name] = arr if arr.dtype == np.dtype(want) else arr.astype(want)
    return out


def gather_stacked(stacked: Mapping[str, Tensor], n: int, sig: Signature,
                   target: Mapping[str, Spec]) -> dict[str, np.ndarray]:
    """``gather`` for a batch whose inputs came stacked (the columnar form): one array per input
    from its one buffer, copied once so that it is writable as ``gather``'s are."""
    out: dict[str, np.ndarray] = {}
    for name, dtype, _ in sig:
        shape, want = target[name]
        buf = bytearray(stacked[name].data)
        arr = np.frombuffer(buf, dtype=np.dtype(dtype).newbyteorder("<")).reshape((n, *shape))
        out[name] = arr if arr.dtype == np.dtype(want) else arr.astype(want)
    return out
