"""msgpack codec: pydantic models <-> the bytes in a stream entry's ``m`` field.

Decoding enforces the limits (message bytes first, then msgpack container sizes, then the
schema with the tensor, request and deadline limits) and raises only ``InvalidMessage``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, overload

import msgpack
from pydantic import BaseModel, ValidationError

from adaserve.broker.errors import InvalidMessage, LimitExceeded
from adaserve.broker.events import EVENT_ADAPTER, Event
from adaserve.broker.messages import SCHEMA_VERSION, Batch, Job, Message, Result
from adaserve.broker.settings import Limits, default_limits
from adaserve.broker.violations import explain, reason_of

FIELD = b"m"
_TYPES: dict[str, type[BaseModel]] = {"job": Job, "batch": Batch, "result": Result}
M = TypeVar("M", Job, Batch, Result)


def encode(message: BaseModel) -> bytes:
    return encode_map(message.model_dump(mode="python"))


def encode_map(body: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb(body, use_bin_type=True)  # msgpack ships no types
    return packed


def encode_per_request(result: BaseModel, request_ids: Sequence[str]) -> list[bytes]:
    """``encode(result)`` once per request id, ``request_id`` replaced: one validated result
    stands for the requests of a job that ended alike (an expiry, a refusal). The other fields
    are packed once and each id spliced in front of them: packing the whole map per request was
    most of what a refusal cost a planner that had fallen behind."""
    base = result.model_dump(mode="python")
    base.pop("request_id", None)
    rest = msgpack.packb(base, use_bin_type=True)
    n = len(base)
    skip = 1 if n < 16 else 3  # the packed map's own header: fixmap, else map16 (never map32 here)
    head = bytes([0x80 | (n + 1)]) if n + 1 < 16 else b"\xde" + (n + 1).to_bytes(2, "big")
    body = rest[skip:]
    key = msgpack.packb("request_id", use_bin_type=True)
    packb = msgpack.packb
    return [head + key + packb(rid, use_bin_type=True) + body for rid in request_ids]


def results_entry(job_id: str, raws: list[bytes]) -> bytes:
    """A ``results`` reply entry, ``{"v", "type": "results", "job_id", "results": [...]}``, around
    ``result`` maps already packed: they are spliced in, not decoded and packed again."""
    n = len(raws)
    if n < 16:
        head = bytes([0x90 | n])
    elif n < 1 << 16:
        head = b"\xdc" + n.to_bytes(2, "big")
    else:
        head = b"\xdd" + n.to_bytes(4, "big")
    job: bytes = msgpack.packb(job_id, use_bin_type=True)
    return _RESULTS_HEAD + job + _RESULTS_KEY + head + b"".join(raws)


_RESULTS_HEAD: bytes = b"\x84" + b"".join(msgpack.packb(x, use_bin_type=True)
                                   for x in ("v", SCHEMA_VERSION, "type", "results", "job_id"))
_RESULTS_KEY: bytes = msgpack.packb("results", use_bin_type=True)


def unpack(raw: bytes, limits: Limits | None = None) -> dict[str, Any]:
    """Bytes -> the raw map, with size limits (``default_limits()`` when none) but no schema."""
    limits = default_limits() if limits is None else limits
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise InvalidMessage("undecodable", f"expected bytes, got {type(raw).__name__}")
    if len(raw) > limits.max_message_bytes:
        raise LimitExceeded(f"message of {len(raw)} bytes exceeds {limits.max_message_bytes}")
    n = limits.max_requests_per_job + 64
    try:
        body = msgpack.unpackb(
            raw, raw=False, strict_map_key=True, max_bin_len=limits.max_message_bytes,
            max_str_len=1 << 20, max_array_len=max(n, 64), max_map_len=max(n, 256), max_ext_len=0,
        )
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        why = str(exc) or ("nested deeper than the unpacker allows" if isinstance(exc, msgpack.StackError)
                           else type(exc).__name__)
        raise InvalidMessage("undecodable", f"not a msgpack message: {why}") from None
    if not isinstance(body, dict):
        raise InvalidMessage("schema", "a message must be a msgpack map")
    return body


@overload
def decode(raw: bytes, limits: Limits | None = ..., *, expect: type[M]) -> M: ...
@overload
def decode(raw: bytes, limits: Limits | None = ..., *, expect: None = None) -> Message: ...
def decode(raw: bytes, limits: Limits | None = None, *, expect: type[BaseModel] | None = None) -> Any:
    limits = default_limits() if limits is None else limits
    return validate(unpack(raw, limits), limits, expect=expect)


def validate(body: dict[str, Any], limits: Limits | None = None, *, expect: type[BaseModel] | None = None,
             views: bool = False) -> Any:
    """The message ``body`` stands for, validated. ``views``: a columnar job's request tensors
    are views of its columns (``memoryview``, not ``bytes``): for a reader that only forwards them."""
    limits = default_limits() if limits is None else limits
    if body.get("v") != SCHEMA_VERSION:
        raise InvalidMessage("version", f"schema version {body.get('v')!r} is not {SCHEMA_VERSION}")
    kind = body.get("type")
    ctx: dict[str, Any] = {"limits": limits, "views": views}
    try:
        if kind == "event":
            msg: Any = EVENT_ADAPTER.validate_python(body, context=ctx)
        elif kind in _TYPES:
            msg = _TYPES[kind].model_validate(body, context=ctx)
        else:
            raise InvalidMessage("schema", f"unknown message type {kind!r}")
    except ValidationError as exc:
        raise InvalidMessage(reason_of(exc), explain(exc)) from None
    if expect is not None and not isinstance(msg, expect):
        raise InvalidMessage("schema", f"expected a {expect.__name__.lower()}, got {kind!r}")
    return msg


def decode_event(raw: bytes) -> Event:
    return decode(raw)  # type: ignore[return-value]


def peek(raw: Any) -> dict[str, Any]:
    """Best-effort ids of an undecodable or invalid message, to address a rejection."""
    try:
        body = msgpack.unpackb(raw, raw=False, max_bin_len=1 << 24, max_str_len=1 << 16)
    except Exception:
        return {}
    return summary(body)


def summary(body: Any) -> dict[str, Any]:
    """``peek`` of a map already unpacked."""
    if not isinstance(body, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("id", "app", "reply_to", "run", "model"):
        val = body.get(key)
        if isinstance(val, str) and len(val) <= 256:
            out[key] = val
    reqs, ids = body.get("requests"), body.get("request_ids")
    if isinstance(reqs, list):
        out["requests"] = len(reqs)
        out["request_ids"] = [r.get("id") for r in reqs if isinstance(r, dict) and isinstance(r.get("id"), str)]
    elif isinstance(ids, list):  # a job in columns (``jobform``)
        out["requests"] = len(ids)
        out["request_ids"] = [i for i in ids if isinstance(i, str)]
    return out

