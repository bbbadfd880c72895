"""Reading ``Keys(ns).telemetry``: history by time range, or following new events live.

Events are decoded into the typed models of ``broker.events``; entries that do not decode (a newer
producer's event type, say) are counted and skipped, never fatal for a reader.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from adaserve.broker.codec import FIELD, decode
from adaserve.broker.errors import InvalidArgument, InvalidMessage
from adaserve.broker.events import EVENT_TYPES, Event
from adaserve.broker.keys import Keys
from adaserve.broker.outage import Outage, is_transient
from adaserve.broker.settings import Settings
from adaserve.broker.streams import last_id, read


@dataclass(frozen=True)
class EventFilter:
    """Keep events whose type matches one of ``types`` (globs such as ``job.*``; none: all) and,
    when given, that concern ``app`` and ``run``. An event that carries no app (or run) is
    dropped by an app (or run) filter; a batch matches when any of its requests does."""

    types: tuple[str, ...] = ()
    app: str | None = None
    run: str | None = None

    def __post_init__(self) -> None:
        for t in self.types:
            if not any(fnmatch.fnmatchcase(known, t) for known in EVENT_TYPES):
                raise InvalidArgument(f"--type {t!r} matches no event type ({', '.join(EVENT_TYPES)})")

    def matches(self, ev: Event) -> bool:
        if self.types and not any(fnmatch.fnmatchcase(ev.event, t) for t in self.types):
            return False
        if self.app is not None and self.app not in attribute_values(ev, "app"):
            return False
        return self.run is None or self.run in attribute_values(ev, "run")


def attribute_values(ev: Event, name: str) -> set[str]:
    """The values of ``app`` or ``run`` an event concerns (a batch: those of its requests)."""
    val = getattr(ev, name, None)
    if isinstance(val, str):
        return {val}
    return {getattr(item, name) for item in getattr(ev, "items", ())}


@dataclass(frozen=True)
class Received:
    id: str
    event: Event

    @property
    def ms(self) -> int:
        return int(self.id.split("-", 1)[0])


class TelemetryReader:
    def __init__(self, r: redis.Redis[bytes], settings: Settings) -> None:
        self._r = r
        self.outage = Outage("telemetry reader", max_s=settings.max_outage_s, wait_first=False)
        self.stream = Keys(settings.namespace).telemetry
        self.undecodable = 0

    def server_ms(self) -> int:
        """The server's clock: windows are cut in the clock that stamped the entry ids."""
        sec, usec = self._r.time()
        return int(sec) * 1000 + int(usec) // 1000

    def _decode(self, entry_id: str, raw: bytes | None, keep: EventFilter | None) -> Received | None:
        try:
            ev = decode(raw or b"")
        except InvalidMessage:
            self.undecodable += 1
            return None
        if getattr(ev, "type", None) != "event":
            self.undecodable += 1
            return None
        if keep is not None and not keep.matches(ev):  # type: ignore[arg-type]
            return None
        return Received(entry_id, ev)  # type: ignore[arg-type]

    def history(
        self, *, since_ms: int | None = None, until_ms: int | None = None, keep: EventFilter | None = None,
        page: int = 5000,
    ) -> Iterator[Received]:
        """Events with ids in ``[since_ms, until_ms]``, oldest first, read in pages."""
        lo = "-" if since_ms is None else f"{since_ms}-0"
        hi = "+" if until_ms is None else f"{until_ms}-18446744073709551615"
        while True:
            rows = _rows(self._r.xrange(self.stream, min=lo, max=hi, count=page))
            for mid, raw in rows:
                got = self._decode(mid, raw, keep)
                if got is not None:
                    yield got
            if len(rows) < page:
                return
            lo = "(" + rows[-1][0]

    def last(self, n: int, *, keep: EventFilter | None = None, scan_limit: int = 100_000) -> list[Received]:
        """The ``n`` most recent matching events, oldest first (scanning back at most
        ``scan_limit`` entries so that a rare filter on a long stream stays cheap)."""
        out: list[Received] = []
        hi, scanned = "+", 0
        while len(out) < n and scanned < scan_limit:
            rows = _rows(self._r.xrevrange(self.stream, max=hi, min="-", count=min(1000, scan_limit - scanned)))
            for mid, raw in rows:
                got = self._decode(mid, raw, keep)
                if got is not None:
                    out.append(got)
                    if len(out) == n:
                        break
            scanned += len(rows)
            if len(rows) < 1000:
                break
            hi = "(" + rows[-1][0]
        return out[::-1]

    def follow(
        self, *, after: str = "$", keep: EventFilter | None = None, block_ms: int = 500,
        stop: Callable[[], bool] | None = None, idle_s: float | None = None,
    ) -> Iterator[Received]:
        """New events after id ``after`` (``$``: from now), until ``stop()`` or ``idle_s``
        seconds without a matching event. A broker outage is waited out."""
        last = self.latest_id() if after == "$" else after
        quiet_since = time.monotonic()
        while not (stop and stop()):
            try:
                entries = read(self._r, {self.stream: last}, count=1000, block_ms=block_ms)
            except redis.RedisError as exc:
                if not is_transient(exc):
                    raise
                time.sleep(self.outage.failed(exc))
                continue
            self.outage.recovered()
            for e in entries:
                last = e.id
                got = self._decode(e.id, e.raw, keep)
                if got is not None:
                    quiet_since = time.monotonic()
                    yield got
            if idle_s is not None and time.monotonic() - quiet_since >= idle_s:
                return

    def latest_id(self) -> str:
        """Resolving ``$`` once: XREAD with ``$`` again after each block would skip entries
        added between two reads."""
        return last_id(self._r, self.stream)


def _rows(reply: Any) -> list[tuple[str, bytes | None]]:
    """XRANGE/XREVRANGE rows as (id, ``m`` field)."""
    out: list[tuple[str, bytes | None]] = []
    for mid, fields in reply or ():
        raw = fields.get(FIELD) if fields else None
        out.append((mid.decode() if isinstance(mid, bytes) else str(mid), raw if isinstance(raw, bytes) else None))
    return out


def parse_types(values: Sequence[str] | None) -> tuple[str, ...]:
    """``--type job.* --type batch.finished`` or ``--type job.*,batch.finished``."""
    out: list[str] = []
    for v in values or ():
        out += [p.strip() for p in v.split(",") if p.strip()]
    return tuple(out)


# Periodic reports (each worker's and each planner's, every second): shown only when asked for.
HEARTBEATS = ("worker.heartbeat", "planner.state", "placement.state")


def shown_types(types: tuple[str, ...], heartbeats: bool = False) -> tuple[str, ...]:
    """What ``tail`` prints: heartbeats (worker heartbeats and planner reports, one per process
    per second) only when asked for, by ``heartbeats`` or by a type they match; everything else
    unless ``types`` narrows it."""
    if heartbeats:
        return (*types, *HEARTBEATS) if types else ()
    return types or tuple(t for t in EVENT_TYPES if t not in HEARTBEATS)


def run_events(reader: TelemetryReader, run: str | Sequence[str], *, since_ms: int | None = None) -> list[Event]:
    """Every event of one run (``LoadOptions.run``), or of several runs at once (``bench apps``:
    one per app): its jobs' and requests' events, the dispatch of each batch that served them
    (``batch.dispatched`` names no run), and the planners' ``planner.state`` reports made while
    it ran (how late they heard of finishes)."""
    runs = {run} if isinstance(run, str) else set(run)
    evs = [x.event for x in reader.history(since_ms=since_ms)]
    mine = {e.batch_id for e in evs if e.event == "batch.finished" and runs & attribute_values(e, "run")}
    ours = [getattr(e, "batch_id", None) in mine or bool(runs & attribute_values(e, "run")) for e in evs]
    stamps = [e.ts for e, o in zip(evs, ours) if o]
    if not stamps:
        return []
    first, last = min(stamps), max(stamps)
    # a report covers the heartbeat before it: the first one after the run's end still does
    after = min((e.ts for e in evs if e.event == "planner.state" and e.ts > last), default=last)
    return [e for e, o in zip(evs, ours) if o or (e.event == "planner.state" and first < e.ts <= after)]
