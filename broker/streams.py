"""Redis Streams primitives: groups, blocking group reads, ack, reclaim, dead letters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

from adaserve.broker.codec import FIELD, encode_map, unpack, validate
from adaserve.broker.direct import Direct
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.events import Event

T = TypeVar("T")


@dataclass(frozen=True)
class Entry:
    stream: str
    id: str
    raw: bytes | None  # None when the entry was trimmed or deleted while pending

    @property
    def ms(self) -> int:
        """Server arrival time of the entry, from its id."""
        return int(self.id.split("-", 1)[0])


def _s(x: bytes | str) -> str:
    return x.decode() if isinstance(x, bytes) else x


def ensure_group(r: redis.Redis[bytes], stream: str, group: str, start: str = "0") -> bool:
    """Create ``group`` on ``stream`` (and the stream); False when it already existed."""
    try:
        r.xgroup_create(stream, group, id=start, mkstream=True)
        return True
    except redis.ResponseError as exc:
        if "BUSYGROUP" in str(exc):
            return False
        raise


def _id(x: bytes | str) -> tuple[int, int]:
    ms, _, seq = _s(x).partition("-")
    return int(ms), int(seq or 0)


def trim_consumed(r: redis.Redis[bytes], stream: str, group: str, *, keep_ms: float, now_ms: float,
                  approximate: bool = True) -> int:
    """Trim ``stream`` (XTRIM MINID, approximate) of entries older than ``keep_ms`` that ``group``
    has been delivered and has acked; returns how many went. Entries still pending or not yet
    read are never touched. A missing stream or group trims nothing."""
    try:
        summary = r.xpending(stream, group)
        groups = r.xinfo_groups(stream)
    except redis.ResponseError:
        return 0
    last = next((g.get("last-delivered-id") for g in groups if _s(g.get("name", b"")) == group), None)
    if last is None:
        return 0
    bound = min(_id(last), (int(now_ms - keep_ms), 0))
    if summary and summary.get("pending") and summary.get("min") is not None:
        bound = min(bound, _id(summary["min"]))
    if bound <= (0, 0):
        return 0
    return int(r.xtrim(stream, minid=f"{bound[0]}-{bound[1]}", approximate=approximate))


def publish(r: redis.Redis[bytes] | Direct, stream: str, raw: bytes, maxlen: int | None = None) -> str:
    if isinstance(r, Direct):
        return _s(r.call("XADD", stream, *xadd_trim(maxlen), "*", FIELD, raw))
    return _s(r.xadd(stream, {FIELD: raw}, maxlen=maxlen, approximate=True))


def xadd_trim(maxlen: int | None) -> list[Any]:
    """XADD's arguments for an approximate MAXLEN (none without one), as redis-py's ``xadd`` sends them."""
    return [] if maxlen is None else ["MAXLEN", "~", maxlen]


def _entries(reply: Any) -> list[Entry]:
    """The entries of an XREAD or XREADGROUP reply (also one read in a pipeline)."""
    out: list[Entry] = []
    if not reply:
        return out
    items = reply.items() if isinstance(reply, dict) else reply  # RESP3 maps vs RESP2 lists
    for stream, msgs in items:
        if isinstance(msgs, list) and msgs and isinstance(msgs[0], list) and not isinstance(msgs[0][0], (bytes, str)):
            msgs = msgs[0]
        for mid, fields in msgs:
            raw = None if fields is None else fields.get(FIELD)
            out.append(Entry(_s(stream), _s(mid), raw))
    return out


entries_of = _entries


def _raw_entries(reply: Any) -> list[Entry]:
    """The entries of an XREAD or XREADGROUP reply as the server sent it (``Direct``): streams
    as a map (RESP3) or a list of pairs (RESP2), each entry ``[id, [field, value, ...]]``, the
    fields nil for an entry deleted while pending."""
    out: list[Entry] = []
    if not reply:
        return out
    items = reply.items() if isinstance(reply, dict) else reply
    for stream, msgs in items:
        name = _s(stream)
        for mid, fields in msgs:
            raw = None
            if fields:
                for i in range(0, len(fields) - 1, 2):
                    if fields[i] == FIELD:
                        raw = fields[i + 1]
                        break
            out.append(Entry(name, _s(mid), raw))
    return out


def _read_args(streams: dict[str, str], count: int, block_ms: int | None) -> list[Any]:
    args: list[Any] = ["COUNT", count]
    if block_ms is not None:
        args += ["BLOCK", block_ms]
    return [*args, "STREAMS", *streams.keys(), *streams.values()]


def read_group(
    r: redis.Redis[bytes] | Direct, streams: dict[str, str] | list[str], group: str, consumer: str,
    *, count: int = 64, block_ms: int | None = None,
) -> list[Entry]:
    """XREADGROUP of new entries (``>``), or of this consumer's own pending ones with ids; on a
    ``Direct``, without redis-py's per-command machinery."""
    ids = streams if isinstance(streams, dict) else {s: ">" for s in streams}
    if isinstance(r, Direct):
        return _raw_entries(r.call("XREADGROUP", "GROUP", group, consumer, *_read_args(ids, count, block_ms)))
    return _entries(r.xreadgroup(group, consumer, ids, count=count, block=block_ms))


def read(r: redis.Redis[bytes] | Direct, streams: dict[str, str], *, count: int = 512,
         block_ms: int | None = None) -> list[Entry]:
    """Plain XREAD (no group), e.g. for following telemetry or a reply stream."""
    if isinstance(r, Direct):
        return _raw_entries(r.call("XREAD", *_read_args(streams, count, block_ms)))
    return _entries(r.xread(streams, count=count, block=block_ms))


def ack(r: redis.Redis[bytes], stream: str, group: str, *ids: str) -> int:
    return int(r.xack(stream, group, *ids)) if ids else 0


def reclaim(
    r: redis.Redis[bytes], stream: str, group: str, consumer: str, *, min_idle_ms: int, count: int = 100,
) -> Iterator[Entry]:
    """Claim every entry idle past ``min_idle_ms``, walking XAUTOCLAIM's cursor to the end.

    Entries deleted while pending come back with ``raw=None`` (Redis 7 lists them separately;
    their PEL slots are already dropped by the server).
    """
    cursor = "0-0"
    while True:
        reply = r.xautoclaim(stream, group, consumer, min_idle_time=min_idle_ms, start_id=cursor, count=count)
        cursor = _s(reply[0])
        for mid, fields in reply[1]:
            yield Entry(stream, _s(mid), None if fields is None else fields.get(FIELD))
        for mid in (reply[2] if len(reply) > 2 else []):
            yield Entry(stream, _s(mid), None)
        if cursor == "0-0":
            return


def deliveries(r: redis.Redis[bytes], stream: str, group: str, entry_id: str) -> int:
    """How many times the group has delivered ``entry_id`` (0 when it is not pending)."""
    rows = r.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
    return int(rows[0]["times_delivered"]) if rows else 0


def dead_letter(
    r: redis.Redis[bytes], dead_stream: str, *, reason: str, detail: str, source: str,
    entry_id: str, raw: bytes | None, maxlen: int = 100_000,
) -> str:
    """Keep the original bytes with why they could not be served; readable with ``adaserve dead``."""
    fields = {
        b"reason": reason.encode(), b"detail": detail.encode()[:4096], b"source": source.encode(),
        b"entry": entry_id.encode(), b"ts": str(int(time.time() * 1000)).encode(), b"raw": raw or b"",
    }
    return _s(r.xadd(dead_stream, fields, maxlen=maxlen, approximate=True))


def event_bytes(**body: object) -> bytes:
    return encode_map({"v": 1, "type": "event", **body})


def last_id(r: redis.Redis[bytes], stream: str) -> str:
    """The newest entry's id (``0-0`` for an empty stream): a cursor meaning "from now on", which
    XREAD's ``$`` is not once a read has blocked (entries added between two reads are skipped)."""
    newest = r.xrevrange(stream, count=1)
    return _s(newest[0][0]) if newest else "0-0"


def events(
    entries: list[Entry], on_invalid: Callable[[Entry, InvalidMessage], None] | None = None,
    only: frozenset[str] | None = None, quick: Callable[[dict[str, Any]], T | None] | None = None,
) -> Iterator[tuple[Entry, Event | T]]:
    """The telemetry events in ``entries``; deleted, undecodable or non-event entries are skipped
    (a reader of telemetry never stops on one bad entry). ``on_invalid`` hears of each entry that
    did not decode, for a reader that must not let some of them pass unnoticed. With ``only``,
    events of other types are skipped before they are validated (the planner reads the whole
    stream for three of its types). ``quick`` may read an event's map itself, for a reader that
needs only some of its fields (its answer is yielded instead; ``None`` validates the map)."""
    for e in entries:
        if e.raw is None:
            continue
        try:
            body = unpack(e.raw)
            if only is not None and body.get("event") not in only:
                continue
            fast = quick(body) if quick is not None else None
            if fast is not None:
                yield e, fast
                continue
            ev = validate(body)
        except InvalidMessage as exc:
            if on_invalid is not None:
                on_invalid(e, exc)
            continue
        if getattr(ev, "type", None) == "event":
            yield e, ev
