"""The planner's side of ORLOJ's long-term feedback (Sec. 3.2), called from its housekeeping.

``OnlineFeedback.tick(schedulers)`` runs on every pass of the planner loop and does nothing but
read a clock until ``period_s`` has passed. Then, never blocking: it reads the newest telemetry
since the last round (at most ``read_count`` entries, newest first, because a re-run needs its
batch still in the pool's stream), samples completed requests of the models whose policy takes
samples (``add_sample``: ORLOJ) until it has ``per_tick`` of them, so a busy round decodes a few
dozen events rather than thousands, enqueues their re-runs on the profiling queue in one round
trip, and hands the schedulers the measured times recorded since its last round (the rq jobs' and
the workers' idle re-runs'; the first round, the newest ``drain_limit`` of them).

``mode`` decides the enqueueing. ``auto`` (the planner's default) enqueues only while an rq
worker serves the profiling queue (``adaserve profiler``): without one the jobs would only pile up
in Redis, so running the profiler is the switch. ``on`` enqueues regardless (a worker started
later works through them), ``off`` does nothing at all. Either way the queue is never filled past
``max_queued`` waiting jobs, so the profiler's own jobs are not buried under re-runs.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis

from adaserve.broker.codec import FIELD
from adaserve.broker.keys import Keys
from adaserve.broker.settings import Settings
from adaserve.broker.streams import Entry
from adaserve.planner.core import Scheduler
from adaserve.planner.orloj.profiler import Rerun, enqueue_reruns, latest_id, read_samples, sample_entries

if TYPE_CHECKING:
    from rq import Queue

__all__ = ["MODES", "FeedStats", "OnlineFeedback"]

MODES = ("auto", "on", "off")
log = logging.getLogger("adaserve.planner.orloj")


def _import_rq() -> None:
    """Everything of rq a round uses (kept out of module import: the simulator and the CLI's
    start need none of it)."""
    import rq.serializers
    import rq.worker_registration  # noqa: F401


@dataclass
class FeedStats:
    """Totals since the feed started (for logs and tests)."""

    ticks: int = 0
    sampled: int = 0
    enqueued: int = 0
    drained: int = 0
    errors: int = 0


class OnlineFeedback:
    def __init__(self, r: redis.Redis[bytes], settings: Settings, *, mode: str = "auto", period_s: float = 5.0,
                 rate: float = 0.05, per_tick: int = 16, max_queued: int = 128, read_count: int = 512,
                 drain_limit: int = 1000, probe_s: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if not period_s > 0 or not probe_s >= 0 or not 0.0 <= rate <= 1.0:
            raise ValueError("period_s > 0, probe_s >= 0 and rate in [0, 1] are required")
        if min(per_tick, max_queued, read_count, drain_limit) < 1:
            raise ValueError("per_tick, max_queued, read_count and drain_limit must be positive")
        self.r, self.settings, self.mode = r, settings, mode
        self.period_s, self.rate, self.per_tick, self.max_queued = period_s, rate, per_tick, max_queued
        self.read_count, self.drain_limit, self.probe_s = read_count, drain_limit, probe_s
        self._clock, self._rng = clock, rng or random.Random()
        self.keys = Keys(settings.namespace)
        self.stats = FeedStats()
        self._cursor: str | None = None  # None: start from the newest entry
        self._read_to: dict[str, bytes | None] = {}  # model -> the newest sample entry taken
        self._next = float("-inf")
        self._probe_at = float("-inf")
        self._worker = False
        if mode != "off":
            # rq's import took 15-22 ms, paid on the first round with an ORLOJ scheduler, which
            # comes with the first job: a stall in the loop that expired that moment's requests at
            # 30 ms deadlines (docs/orloj.md, twenty-third session). Paid here, at the planner's start.
            _import_rq()

    def tick(self, schedulers: Mapping[str, Scheduler]) -> bool:
        """Do one round if its time has come; True when it did. Redis trouble is logged, not raised."""
        now = self._clock()
        if self.mode == "off" or now < self._next:
            return False
        self._next = now + self.period_s
        self.stats.ticks += 1
        takers = {m: s for m, s in schedulers.items() if s.takes_samples}
        try:
            if takers and self._may_enqueue(now):
                self._sample(takers)
            else:
                self._cursor = None  # nothing to sample for: no backlog to read later either
            for model, sched in takers.items():
                got, self._read_to[model] = read_samples(self.r, self.settings, model, after=self._read_to.get(model),
                                                         limit=self.drain_limit)
                for app, seconds in got:
                    sched.add_sample(app, seconds)
                    self.stats.drained += 1
        except redis.RedisError as exc:
            self.stats.errors += 1
            log.warning("ORLOJ online feedback skipped a round: %s", exc)
        return True

    def _queue(self) -> Queue:
        from rq import Queue
        from rq.serializers import JSONSerializer

        return Queue(self.keys.rq_queue, connection=self.r, serializer=JSONSerializer)

    def worker_present(self) -> bool:
        """Whether a live rq worker serves the profiling queue.

        A worker that died without unregistering stays in rq's set of the queue's workers until
        its own key expires, so the set alone would say yes; the key is what is checked.
        """
        from rq.worker_registration import get_keys

        keys = get_keys(queue=self._queue())
        return bool(keys) and int(self.r.exists(*keys)) > 0

    def _may_enqueue(self, now: float) -> bool:
        if self.mode == "on":
            return True
        if now >= self._probe_at:
            self._probe_at = now + self.probe_s
            self._worker = self.worker_present()
        return self._worker

    def _sample(self, takers: Mapping[str, object]) -> None:
        if self._cursor is None:
            self._cursor = latest_id(self.r, self.settings)
            return
        # The newest entries since the last round, newest first: fresh requests are the ones
        # whose batch is still in the stream, and decoding stops once the round has its share.
        stream = self.keys.telemetry
        rows = self.r.xrevrange(stream, "+", f"({self._cursor}", count=self.read_count)
        if not rows:
            return
        self._cursor = rows[0][0].decode()
        want = min(self.per_tick, self.max_queued - self._queue().count)
        picked: list[Rerun] = []
        for mid, fields in rows:
            if len(picked) >= want:
                break
            found = sample_entries([Entry(stream, mid.decode(), fields.get(FIELD))], self.rate, self._rng)
            picked.extend(p for p in found if p.model in takers)
        self.stats.sampled += len(picked)
        picked = picked[:max(want, 0)]
        if picked:
            self.stats.enqueued += len(enqueue_reruns(self.r, self.settings, picked))
