"""Rejections: a bad job gets a ``rejected`` result per request it named, a dead letter with
the original bytes, and a ``job.rejected`` event; the planner itself never fails on input."""

from __future__ import annotations

import re
from typing import Any

import redis

from adaserve.broker import streams
from adaserve.broker.codec import encode, encode_per_request, peek, results_entry, summary
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.keys import Keys
from adaserve.broker.messages import Result, Timings
from adaserve.broker.settings import Settings

_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")


def reject(
    pipe: redis.client.Pipeline[bytes], keys: Keys, settings: Settings, *, entry_id: str, entry_ms: float,
    raw: bytes | None, error: InvalidMessage, now_ms: float, dead_letter: bool = True, max_ids: int = 1024,
    body: dict[str, Any] | None = None, ttl_set: set[str] | None = None,
) -> None:
    """Queue on ``pipe`` everything a rejection writes (the caller acks and executes); the dead
    letter keeps the original bytes of a job that was wrong, not of one refused for load.
    ``body``: the entry's map when the caller has unpacked it already (not decoded again).
    The job's results go out as one ``results`` entry: a planner refusing jobs is one that has
    fallen behind, and an entry per request made each refusal cost more the further behind it was.
    ``ttl_set``: reply streams whose expiry this pipeline already sets (one EXPIRE each, not one
    per rejection); the stream's name is added to it."""
    info: dict[str, Any] = summary(body) if body is not None else peek(raw) if raw is not None else {}
    job_id = info.get("id", "") if _ID.match(info.get("id", "")) else ""
    reply_to = info.get("reply_to", "")
    ids = [i for i in info.get("request_ids", []) if isinstance(i, str) and _ID.match(i)] or [""]
    if len(ids) > max_ids:
        # More request ids than a job may hold: one result for the whole job (the SDK files a
        # result without a request id under every request) rather than a flood of replies.
        ids = [""]
    reason = f"{error.reason}: {error.detail}"
    streams_raw = raw if raw is not None else b""
    if dead_letter:
        pipe.xadd(keys.dead, {
            b"reason": error.reason.encode(), b"detail": error.detail.encode()[:4096], b"source": keys.jobs.encode(),
            b"entry": entry_id.encode(), b"ts": str(int(now_ms)).encode(), b"raw": streams_raw,
        }, maxlen=settings.stream_maxlen, approximate=True)
    if job_id and _ID.match(reply_to):
        timings = Timings(submitted_ms=entry_ms, finished_ms=now_ms, total_ms=max(now_ms - entry_ms, 0.0))
        res = Result(job_id=job_id, request_id=ids[0], app=str(info.get("app", "default"))[:64],
                     model=str(info.get("model", ""))[:64], status="rejected", reason=reason, timings=timings)
        if len(ids) == 1:
            entry = encode(res)
        else:
            entry = results_entry(job_id, encode_per_request(res, ids))
        reply = keys.reply(reply_to)
        pipe.xadd(reply, {b"m": entry}, maxlen=settings.stream_maxlen, approximate=True)
        if ttl_set is None or reply not in ttl_set:
            pipe.expire(reply, settings.result_ttl_s)
            if ttl_set is not None:
                ttl_set.add(reply)
    pipe.xadd(keys.telemetry, {b"m": streams.event_bytes(
        event="job.rejected", ts=now_ms, job_id=job_id, app=str(info.get("app", ""))[:64],
        run=str(info.get("run", ""))[:64], requests=max(int(info.get("requests", 1) or 1), 1),
        reason=error.reason, detail=error.detail[:512], model=str(info.get("model", ""))[:64],
        submitted_ms=float(entry_ms),
    )}, maxlen=settings.telemetry_maxlen, approximate=True)
