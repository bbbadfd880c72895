"""What a reply stream carries, read back into ``Result`` objects.

A reply stream holds two entry forms (README, "The wire format"): ``result``, one request's
result, and ``results``, ``{"v", "type": "results", "job_id", "results": [result, ...]}``, the
requests of one job that ended together (a worker's batch, usually). A ``results`` entry is
validated in one call over its list: pydantic's validation runs in compiled code, and building the
objects unvalidated (``model_construct``, in Python) measured twice as slow.
"""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from adaserve.broker.codec import unpack, validate
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Result
from adaserve.broker.settings import Limits, default_limits
from adaserve.broker.violations import invalid_message

__all__ = ["read_reply"]

_RESULTS: TypeAdapter[list[Result]] = TypeAdapter(list[Result])


def read_reply(raw: bytes, limits: Limits | None = None) -> list[Result]:
    """The results of one reply-stream entry of either form; ``InvalidMessage`` when it is not one."""
    limits = _RECEIVE if limits is None else limits
    body = unpack(raw, limits)
    if body.get("type") != "results":
        if body.get("type") != "result":
            raise InvalidMessage("schema", f"a reply entry of type {body.get('type')!r}, not a result")
        res: Result = validate(body, limits, expect=Result)
        return [res]
    if body.get("v") != 1 or not isinstance(body.get("results"), list):
        raise InvalidMessage("schema", "a results entry needs v 1 and a list of results")
    try:
        return _RESULTS.validate_python(body["results"], context={"limits": limits})
    except ValidationError as exc:
        raise invalid_message(exc) from None


# What a client receives is bounded by what workers send, not by the client's own sending limits:
# a results entry may carry a whole batch of one job.
_RECEIVE = default_limits().model_copy(update={"max_message_bytes": 1 << 28, "max_requests_per_job": 1 << 16})
