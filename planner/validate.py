"""Admission checks beyond the schema: is the model served, do the inputs fit it.

The codec has already enforced the wire schema and the size limits; what remains needs the
planner's view of the workers (which models exist, their input specs). A request that does not fit
is rejected here so that it can never fail a batch shared with other producers' requests.
"""

from __future__ import annotations

from typing import Any

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Job


def check_job(job: Job, *, known: bool, inputs: dict[str, dict[str, Any]] | None) -> None:
    """Raise ``InvalidMessage`` when ``job`` cannot be served; ``inputs`` is the model's spec."""
    if not known:
        raise InvalidMessage("unknown_model", f"no live worker serves model {job.model!r}")
    for req in job.requests:
        # Generation is served by language models, whose one input is the prompt's token ids.
        if req.kind == "generate" and inputs is not None and "tokens" not in inputs:
            raise InvalidMessage("unsupported", f"request {req.id}: model {job.model!r} does not generate tokens")
        if inputs is None:
            continue
        for name, tensor in req.inputs.items():
            spec = inputs.get(name)
            if spec is None:
                raise InvalidMessage(
                    "schema", f"request {req.id}: model {job.model!r} has no input {name!r} (inputs: {', '.join(sorted(inputs))})"
                )
            want = tuple(spec.get("shape", ()))
            if tuple(tensor.shape) != want:
                raise InvalidMessage("schema", f"request {req.id}: input {name!r} has shape {list(tensor.shape)}, model wants {list(want)}")
            if spec.get("dtype") and tensor.dtype != spec["dtype"]:
                raise InvalidMessage("schema", f"request {req.id}: input {name!r} is {tensor.dtype}, model wants {spec['dtype']}")
