"""What the planner learns from outside its own decisions: live workers and their free slots,
when each dispatched batch finished, and the latency feedback its schedulers learn from.

Workers announce themselves on the telemetry stream (heartbeats, ``worker.stopped``) and report
every batch there (``batch.finished``). Free slots come from the server, not from counting: a
pool's in-flight batches are its consumer group's ``lag + pending`` (XINFO GROUPS), so several
planners sharing the pools agree on them.

A heartbeat that does not validate (a worker of another adaserve version, say) would make its
worker invisible, and so idle, without a word: the planner logs it as an error instead, once per
worker and reason, and again at most every ``RETELL_S`` while it goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adaserve.broker import streams
from adaserve.broker.codec import unpack, validate
from adaserve.broker.direct import Direct
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.events import BatchFinished, WorkerHeartbeat, WorkerStopped
from adaserve.broker.keys import Keys
from adaserve.broker.messages import SCHEMA_VERSION
from adaserve.planner.core import Scheduler, batch_feedback
from adaserve.planner.helios.pht import ItemStats, item_stats
from adaserve.planner.overload import Overload
from adaserve.planner.pools import Pools, PoolView, slot_limit
from adaserve.planner.state import WAIT_HALF_LIFE_MS, BatchLength, Ewma, Inflight, RecentFloor

if TYPE_CHECKING:
    import redis

__all__ = ["Follower"]

log = logging.getLogger(__name__)
RETELL_S = 60.0


class _Unheard:
    """Rate-limited error lines about workers whose heartbeats this planner cannot read."""

    _MAX_KEPT = 1024  # worker names come and go; forget them all rather than grow without end

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._told: dict[tuple[str, str], tuple[float, int]] = {}  # (worker, reason) -> (when, muted since)

    def tell(self, worker: str, body: Mapping[str, Any], exc: InvalidMessage) -> None:
        key, now = (worker, exc.reason), self._clock()
        told = self._told.get(key)
        if told is not None and now - told[0] < RETELL_S:
            self._told[key] = (told[0], told[1] + 1)
            return
        if len(self._told) >= self._MAX_KEPT:
            self._told.clear()
        self._told[key] = (now, 0)
        pool = body.get("pool")
        muted = f" ({told[1]} more since the last report)" if told is not None and told[1] else ""
        log.error("worker %r (pool %r) sends heartbeats this planner cannot read (%s: %s)%s; it gets no "
                  "batches until both run the same adaserve schema", worker, pool if isinstance(pool, str) else "?",
                  exc.reason, exc.detail, muted)


class Follower:
    """Pools, in-flight batches and per-pool queueing delay, kept current from the server."""

    def __init__(self, r: redis.Redis[bytes], keys: Keys, worker_ttl_s: float, *,
                 overload: Overload | None = None, direct: Direct | None = None) -> None:
        self.r, self.keys = r, keys
        self._direct = direct or Direct(r)  # the blocking read of telemetry, in the loop's thread
        self.overload = overload  # told what finished, to measure each model's drain rate
        self.pools = Pools(worker_ttl_s)
        self.inflight = Inflight()
        # pool -> ms from dispatch to start, plus the worker's time around the runner: the mean while
        # the pool is busy (for sizing batches) and a forgetting lower bound (for expiry)
        self.wait: dict[str, Ewma] = {}
        self.floor: dict[str, RecentFloor] = {}
        self.batch: dict[str, BatchLength] = {}  # pool -> ms its batches ran (the runner's): ``limit_pools``
        self._last = "0-0"
        self._known_groups: set[str] = set()
        self.unheard = _Unheard()
        self.on_finished: Callable[[Finished], None] | None = None  # HEFT's histories learn from each
        self.on_heard: Callable[[float], None] | None = None  # told each finish's time as it is read

    def start(self) -> None:
        """Follow telemetry from now on; the workers alive now come from their registry hash."""
        self._last = streams.last_id(self.r, self.keys.telemetry)
        for name, raw in self.r.hgetall(self.keys.workers).items():
            body: dict[str, Any] = {}
            try:
                body = unpack(raw)
                # what a worker wrote carries "v" and "type"; they only fill in for a bare map
                beat = validate({"v": SCHEMA_VERSION, "type": "event", **body}, expect=WorkerHeartbeat)
            except InvalidMessage as exc:  # an entry under a worker's name that is no heartbeat of ours
                self.unheard.tell(_text(name), body, exc)
                continue
            self.pools.heartbeat(beat)

    def reset(self) -> None:
        """Forget the batches in flight and the groups seen (after an outage the server may have
        lost both); what was measured about the pools stays."""
        self.inflight = Inflight()
        self._known_groups.clear()

    def read(self, block_ms: int | None, scheds: Mapping[str, Scheduler]) -> None:
        """Apply the telemetry that arrived since the last read (waiting up to ``block_ms``)."""
        self._apply(streams.read(self._direct, {self.keys.telemetry: self._last}, count=1024, block_ms=block_ms),
                    scheds)

    def queue(self, p: redis.client.Pipeline[bytes], scheds: Mapping[str, Scheduler], *,
              read: bool) -> Callable[[list[Any]], None]:
        """``read`` (without waiting) when asked, then ``refresh_inflight``, queued on ``p`` so
        that they share a round trip with the step's other commands (the jobs' registration);
        returns what applies their replies, in that order. A pool first heard of in this read
        gets its in-flight count at the next step (0 until then, as a new pool has)."""
        views = self._groups()
        if read:
            p.xread({self.keys.telemetry: self._last}, count=1024)
        for v in views:
            p.xinfo_groups(self.keys.batches(v.name))

        def take(replies: list[Any]) -> None:
            if read:
                got = replies[0]
                if isinstance(got, Exception):
                    raise got
                self._apply(streams.entries_of(got), scheds)
            self._counts(views, replies[1:] if read else replies)

        return take

    def _apply(self, entries: list[streams.Entry], scheds: Mapping[str, Scheduler]) -> None:
        if entries:
            self._last = entries[-1].id
        for _, ev in streams.events(entries, on_invalid=self._invalid, only=_FOLLOWED, quick=_quick_finished):
            if isinstance(ev, Finished):
                self._finished(ev, scheds)
            elif isinstance(ev, WorkerHeartbeat):
                self.pools.heartbeat(ev)
            elif isinstance(ev, WorkerStopped):
                self.pools.forget(ev.worker)
            elif isinstance(ev, BatchFinished):
                self._finished(Finished.of(ev), scheds)

    def _invalid(self, entry: streams.Entry, exc: InvalidMessage) -> None:
        """Tell of a heartbeat that did not validate; other undecodable telemetry is not the
        planner's business (telemetry readers skip it)."""
        try:
            body = unpack(entry.raw or b"")
        except InvalidMessage:
            return  # not even a map: nothing says it is a heartbeat
        if body.get("event") == "worker.heartbeat":
            worker = body.get("worker")
            self.unheard.tell(worker if isinstance(worker, str) else "?", body, exc)

    def _finished(self, ev: Finished, scheds: Mapping[str, Scheduler]) -> None:
        if self.on_heard is not None:
            self.on_heard(ev.ts)
        if self.on_finished is not None:
            self.on_finished(ev)
        sent = self.inflight.pop(ev.batch_id)
        if ev.size > 0:
            self.batch.setdefault(ev.pool, BatchLength()).add(ev.exec_ms)
        if sent is not None:
            gap = max(ev.ts - ev.exec_ms - sent.ms, 0.0)
            self.wait.setdefault(ev.pool, Ewma()).add(gap, ev.ts)
            if not sent.busy:  # it went out to an idle pool: no queueing in this one
                self.floor.setdefault(ev.pool, RecentFloor()).add(ev.ts, gap)
        if self.overload is not None and ev.next_pool is None:
            self.overload.finished(ev.model, ev.size, ev.ts / 1000.0)
        sched = scheds.get(ev.model) or _chooser(scheds, ev.model)
        # One part of a split model is not the batch latency the policy models; the planner keeps
        # learning from whole runs (per-part models belong to placement).
        if sched is not None and ev.part is None and ev.size > 0:
            sched.observe(batch_feedback(ev.model, ev.size, ev.exec_ms / 1000.0, ev.apps,
                                         tuple(x / 1000.0 for x in ev.item_exec_ms), ev.pool, ev.variant,
                                         ev.lm, ev.load_s, ev.ts / 1000.0, None if sent is None else sent.token))

    def wait_ms(self, pool: str, now_ms: float) -> float:
        """Expected ms before a batch sent to ``pool`` now starts (and the worker's overhead):
        the recent mean while batches are in flight there, its lower bound when it is idle."""
        v = self.pools.views.get(pool)
        floor = self.floor_ms(pool, now_ms)
        if v is not None and v.inflight > 0 and pool in self.wait:
            return self.wait[pool].recent(now_ms, floor, WAIT_HALF_LIFE_MS)
        return floor

    def limit_pools(self, queue_ms: float) -> None:
        """Each pool's batch limit (``pools.slot_limit``) from its recent batches' length."""
        for v in self.pools.views.values():
            got = self.batch.get(v.name)
            v.limit = slot_limit(v.slots, v.workers, queue_ms, got.value if got is not None else None)

    def floor_ms(self, pool: str, now_ms: float) -> float:
        got = self.floor.get(pool)
        return got.value(now_ms) if got is not None else 0.0

    def ahead_ms(self, model: str, now_ms: float) -> float:
        """The least any pool serving ``model`` has recently needed before a batch's execution
        (0 when unknown): a request that cannot finish even then is expired."""
        waits = [self.floor_ms(p.name, now_ms) for p in self.pools.serving(model)]
        return min(waits) if waits else 0.0

    def refresh_inflight(self) -> None:
        """Read each pool's in-flight count (``lag + pending`` of its group) from the server."""
        views = self._groups()
        with self.r.pipeline(transaction=False) as p:
            for v in views:
                p.xinfo_groups(self.keys.batches(v.name))
            replies = p.execute(raise_on_error=False)
        self._counts(views, replies)

    def _groups(self) -> list[PoolView]:
        """The pools, each with its consumer group created once."""
        views = list(self.pools.views.values())
        for v in views:
            if v.name not in self._known_groups:
                streams.ensure_group(self.r, self.keys.batches(v.name), v.name)
                self._known_groups.add(v.name)
        return views

    def _counts(self, views: list[PoolView], replies: list[Any]) -> None:
        for v, groups in zip(views, replies):
            if isinstance(groups, Exception):
                continue
            for g in groups:
                if _text(g.get("name")) == v.name:
                    lag = g.get("lag")
                    v.inflight = int(g.get("pending", 0)) + int(lag if lag is not None else 0)


@dataclass(frozen=True, slots=True)
class Finished:
    """What the planner uses of a ``batch.finished`` event."""

    batch_id: str
    ts: float
    pool: str
    model: str
    variant: str
    size: int
    exec_ms: float
    part: int | None
    next_pool: str | None
    apps: tuple[str, ...]
    item_exec_ms: tuple[float, ...]
    lm: tuple[ItemStats, ...] = ()  # a language model's token figures per request (HELIOS's PHT)
    load_s: float | None = None

    @classmethod
    def of(cls, ev: BatchFinished) -> Finished:
        """``size``, ``apps`` and the times are of the requests the batch ran: those the worker
        ended unrun (``expired``) neither took its time nor drained the queue."""
        ran = ev.ran_items()
        lm = tuple(s for s in (item_stats(i.lm) for i in ran) if s is not None)
        return cls(ev.batch_id, ev.ts, ev.pool, ev.model, ev.variant, ev.ran, ev.exec_ms, ev.part,
                   ev.next_pool, tuple(i.app for i in ran), tuple(i.exec_ms for i in ran), lm, ev.load_s)


def _quick_finished(body: dict[str, Any]) -> Finished | None:
    """A worker's ``batch.finished`` read straight from its map: validating its per-request items
    cost the planner more than the batch's scheduling. The worker's map is held to the schema by
    ``tests/workers/test_results.py``; a map without the expected types is validated in full
    (``None``), which names what is wrong."""
    if body.get("event") != "batch.finished":
        return None
    try:
        expired = body.get("expired", 0)
        if type(expired) is not int or expired < 0:
            return None
        cols = body.get("columns")
        if cols is not None and "items" not in body:
            # a batch that completed whole: its requests' fields as columns, read per batch
            apps, execs = cols["app"], cols["exec_ms"]
            if type(apps) is not list or type(execs) is not list or len(apps) != len(execs):
                return None
            got: tuple[tuple[str, ...], tuple[float, ...], tuple[ItemStats, ...]] = (
                tuple(apps), tuple(map(float, execs)), ())
        else:
            items = body["items"]
            if expired:
                items = [i for i in items if i["status"] != "expired"]
            got = (tuple(i["app"] for i in items), tuple(float(i["exec_ms"]) for i in items),
                   tuple(s for s in (item_stats(i.get("lm")) for i in items) if s is not None))
        load = body.get("load_s")
        f = Finished(body["batch_id"], float(body["ts"]), body["pool"], body["model"], body.get("variant", "default"),
                     int(body["size"]) - expired, float(body["exec_ms"]), body.get("part"), body.get("next_pool"),
                     got[0], got[1], got[2], None if load is None else float(load))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    ok = (isinstance(f.batch_id, str) and isinstance(f.pool, str) and isinstance(f.model, str)
          and isinstance(f.variant, str) and all(isinstance(a, str) for a in f.apps))
    return f if ok else None


# What the planner acts on; the rest of the stream (its own events among them) is not validated.
_FOLLOWED = frozenset(("worker.heartbeat", "worker.stopped", "batch.finished"))


def _chooser(scheds: Mapping[str, Scheduler], model: str) -> Scheduler | None:
    """The policy that chose ``model`` for a batch (HELIOS: a family's scheduler), if any."""
    for s in scheds.values():
        if model in s.models():
            return s
    return None


def _text(x: object) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
