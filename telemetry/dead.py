"""Dead letters (``Keys(ns).dead``): what could not be served, why, and how big it was."""

from __future__ import annotations

from typing import Any

import redis
from pydantic import BaseModel

from adaserve.broker.codec import peek
from adaserve.broker.keys import Keys
from adaserve.broker.settings import Settings


class DeadLetter(BaseModel):
    """One entry; the original bytes are summarised (size, and the ids they still show)."""

    id: str
    ts: int
    reason: str
    detail: str
    source: str
    entry: str
    raw_bytes: int
    job_id: str = ""
    app: str = ""
    reply_to: str = ""


def _t(fields: dict[Any, Any], name: str) -> str:
    val = fields.get(name.encode(), b"")
    return val.decode("utf-8", "replace") if isinstance(val, bytes) else str(val)


def read_dead(r: redis.Redis[bytes], settings: Settings, count: int = 20) -> list[DeadLetter]:
    """The ``count`` most recent dead letters, newest first."""
    rows = r.xrevrange(Keys(settings.namespace).dead, count=max(1, count))
    out = []
    for mid, fields in rows or ():
        fields = fields or {}
        raw = fields.get(b"raw", b"")
        raw = raw if isinstance(raw, bytes) else b""
        ids = peek(raw) if raw else {}
        ts = _t(fields, "ts")
        out.append(DeadLetter(
            id=mid.decode() if isinstance(mid, bytes) else str(mid), ts=int(ts) if ts.isdigit() else 0,
            reason=_t(fields, "reason"),
            detail=_t(fields, "detail"), source=_t(fields, "source"), entry=_t(fields, "entry"),
            raw_bytes=len(raw), job_id=ids.get("id", ""), app=ids.get("app", ""), reply_to=ids.get("reply_to", ""),
        ))
    return out


def dead_count(r: redis.Redis[bytes], settings: Settings) -> int:
    return int(r.xlen(Keys(settings.namespace).dead))
