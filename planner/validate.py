"""Admission checks beyond the schema: is the model served, do the inputs fit it.

The codec has already enforced the wire schema and the size limits; what remains needs the
planner's view of the workers (which models exist, their input specs). A request that does not fit
is rejected here so that it can never fail a batch shared with other producers' requests.

Specs come from worker heartbeats: per input ``{"shape", "dtype"}`` and, for some, limits. A
dimension <= 0 takes any size from 1 up to ``max_length`` (when given). A language model's
``tokens`` spec also carries ``context`` (prompt + generated tokens), ``max_new_tokens``,
``default_new_tokens`` (when a request names none) and ``vocab_size``. ``pixels`` (``"uint8"``): the
worker also takes the input as uint8 pixels and normalises them as the model's manifest says.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.finite import all_finite, check_finite
from adaserve.broker.messages import Job, Request
from adaserve.broker.settings import Limits, default_limits
from adaserve.broker.tensors import Tensor, dtype_fits


def check_job(job: Job, *, known: bool, inputs: dict[str, dict[str, Any]] | None,
              limits: Limits | None = None, stacked: dict[str, dict[str, Any]] | None = None) -> None:
    """Raise ``InvalidMessage`` when ``job`` cannot be served; ``inputs`` is the model's spec.
    Float inputs holding NaN or ±Inf are rejected last (``non_finite``), unless ``limits`` allows
    them for the model: a tensor of the wrong shape says so first, whatever its values.
    ``stacked``: the inputs of a job that came in columns (validated with it), checked as they
    came, once per input, with the same answers as its requests would get one by one."""
    if not known:
        raise InvalidMessage("unknown_model", f"no live worker serves model {job.model!r}")
    if stacked is not None and inputs is not None and "tokens" not in inputs:
        _check_stacked(job, inputs, stacked, default_limits() if limits is None else limits)
        return
    checked: set[tuple[str, str, tuple[int, ...]]] = set()
    for req in job.requests:
        # Generation is served by language models, whose one input is the prompt's token ids.
        if req.kind == "generate" and inputs is not None and "tokens" not in inputs:
            raise InvalidMessage("unsupported", f"request {req.id}: model {job.model!r} does not generate tokens")
        if inputs is None:
            continue
        for name, tensor in req.inputs.items():
            # most requests of a job have the same inputs: check each (name, dtype, shape) once
            seen = (name, tensor.dtype, tensor.shape)
            if seen in checked:
                continue
            spec = inputs.get(name)
            if spec is None:
                raise InvalidMessage(
                    "schema", f"request {req.id}: model {job.model!r} has no input {name!r} (inputs: {', '.join(sorted(inputs))})"
                )
            _check_tensor(req.id, name, tensor, spec)
            checked.add(seen)
        tokens = inputs.get("tokens")
        if tokens is not None and "context" in tokens and "tokens" in req.inputs:
            _check_generation(job.model, req, tokens)
    check_finite(job, default_limits() if limits is None else limits)


def _check_stacked(job: Job, inputs: dict[str, dict[str, Any]], stacked: dict[str, dict[str, Any]],
                   limits: Limits) -> None:
    """``check_job`` for a columnar job of a model without token inputs: every request has the
    same inputs with the same dtype and shape (a row of each), so the first request's answer is
    every request's, and the values are checked over each stacked tensor without a join."""
    first = job.requests[0]
    for name, tensor in first.inputs.items():
        spec = inputs.get(name)
        if spec is None:
            raise InvalidMessage(
                "schema", f"request {first.id}: model {job.model!r} has no input {name!r} (inputs: {', '.join(sorted(inputs))})"
            )
        _check_tensor(first.id, name, tensor, spec)
    if not all_finite(stacked.values(), job.model, limits):
        check_finite(job, limits)  # names the request and input


def _check_tensor(rid: str, name: str, tensor: Tensor, spec: dict[str, Any]) -> None:
    want = tuple(int(d) for d in spec.get("shape", ()))
    got = tuple(tensor.shape)
    cap = spec.get("max_length")
    if len(got) != len(want) or any(w > 0 and g != w for g, w in zip(got, want)):
        shown = ["any" if w <= 0 else w for w in want]
        raise InvalidMessage("schema", f"request {rid}: input {name!r} has shape {list(got)}, model wants {shown}")
    for g, w in zip(got, want):
        if w <= 0 and (g < 1 or (cap is not None and g > int(cap))):
            raise InvalidMessage("limit", f"request {rid}: input {name!r} has {g} elements along a free dimension, "
                                          f"the model takes 1 to {cap if cap is not None else 'any number'}")
    # ``pixels``: the worker normalises uint8 images itself (the manifest declares how).
    if spec.get("dtype") and not dtype_fits(tensor.dtype, spec["dtype"]) and tensor.dtype != spec.get("pixels"):
        raise InvalidMessage("schema", f"request {rid}: input {name!r} is {tensor.dtype}, model wants {spec['dtype']}"
                                       " (or another float for a float, a narrower integer for an integer)")


def _check_generation(model: str, req: Request, spec: dict[str, Any]) -> None:
    """A prompt and its generated tokens must fit the model's context; ids its vocabulary."""
    length = int(np.prod(req.inputs["tokens"].shape))
    context = int(spec["context"])
    if req.kind == "forward":
        new = 1  # next-token prediction
    else:
        g = req.generation
        new = g.max_new_tokens if g is not None and g.max_new_tokens is not None else int(spec.get("default_new_tokens", 1))
        most = int(spec.get("max_new_tokens", context - 1))
        if new > most:
            raise InvalidMessage("limit", f"request {req.id}: max_new_tokens {new} is more than the {most} "
                                          f"model {model!r} can generate")
    if length + new > context:
        raise InvalidMessage("limit", f"request {req.id}: a prompt of {length} tokens plus {new} new tokens exceeds "
                                      f"the context of {context} tokens of model {model!r}; send at most "
                                      f"{max(context - new, 0)} prompt tokens (the most recent) or ask for fewer tokens")
    vocab = spec.get("vocab_size")
    if vocab is not None:
        ids = req.inputs["tokens"].to_numpy()
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= int(vocab)):
            raise InvalidMessage("schema", f"request {req.id}: token ids must lie in 0..{int(vocab) - 1} for model {model!r}")
