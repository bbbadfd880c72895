"""ORLOJ's long-term feedback (Sec. 3.2) measured by the worker itself, while it has nothing to run.

ORLOJ's distributions are of a request's execution time alone, per application: a request's time
inside its batch holds its batch-mates' work too. The paper samples finished requests and re-runs
them alone, off the critical path. As rq jobs (``adaserve profiler``, ``workers/rerun.py``) every
re-run forks and loads its model again: on ee-lm-xs, 6.7 s of the profiler's CPU in an 11 s run
on a 2-core host, for at most nine samples (docs/orloj.md, twenty-eighth session). So the worker
does it too: it keeps the newest request of each application it served, and when its queue is
empty it runs one of them alone on the runner it already holds, the applications in turn, so that a
rare one is measured as often as a common one. The time joins the per-model list the planner
reads into ORLOJ (``planner/orloj/feed.py``).

A batch that arrives during a re-run waits for it, so re-runs are bounded: at most ``budget`` of
the worker's time (a bucket that refills at that rate and holds at most ``burst_s``), one per
``min_gap_s`` at most, and none for a model or variant that is not loaded (a re-run never loads
one). A request that cannot run alone, or a server that is away, loses the sample and nothing
else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from adaserve.workers.rerun import record, time_alone
from adaserve.workers.runners import RunnerCache
from adaserve.workers.runtime.base import Runner
from adaserve.workers.wire import AnyBatch, AnyItem, items_of

__all__ = ["IdleReruns"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Kept:
    model: str
    variant: str
    item: AnyItem


class IdleReruns:
    """Requests kept from served batches, one per (model, app), re-run alone when the worker idles."""

    def __init__(self, r: redis.Redis[bytes], namespace: str, *, budget: float = 0.02, burst_s: float = 0.05,
                 min_gap_s: float = 0.05, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0.0 <= budget < 1.0 or burst_s <= 0 or min_gap_s < 0:
            raise ValueError("budget in [0, 1), burst_s > 0 and min_gap_s >= 0 are required")
        self.r, self.namespace = r, namespace
        self.budget, self.burst_s, self.min_gap_s = budget, burst_s, min_gap_s
        self._clock = clock
        self._kept: dict[tuple[str, str], _Kept] = {}  # (model, app) -> the newest request; insertion = turn
        self._credit = 0.0
        self._at = clock()
        self._last = float("-inf")
        self.recorded = self.dropped = 0
        self.spent_s = 0.0

    def offer(self, batch: AnyBatch) -> None:
        """Keep the newest request of each application in a batch the worker ran (none with a
        budget of 0, so nothing is ever due)."""
        if self.budget <= 0:
            return
        seen: set[str] = set()
        for item in reversed(items_of(batch)):  # the batch's last request of an app is its newest
            if item.app in seen:
                continue
            seen.add(item.app)
            key = (batch.model, item.app)
            self._kept.pop(key, None)  # re-inserted last: its turn comes after the others'
            self._kept[key] = _Kept(batch.model, batch.plan.variant, item)

    def wait_s(self, longest: float) -> float:
        """How long the worker may block on its queue before a re-run could be due (``longest`` when
        none is kept)."""
        if not self._kept:
            return longest
        now = self._clock()
        credit = self._credit_at(now)
        until_credit = 0.0 if credit > 0 else -credit / self.budget
        return min(longest, max(until_credit, self._last + self.min_gap_s - now, 0.0))

    def due(self) -> bool:
        return self.wait_s(1.0) <= 0.0

    def _credit_at(self, now: float) -> float:
        return min(self._credit + (now - self._at) * self.budget, self.burst_s)

    def run_one(self, runners: RunnerCache) -> float | None:
        """Re-run the request whose turn it is, if due; its seconds alone, or None."""
        if not self.due():
            return None
        now = self._clock()
        self._credit = self._credit_at(now)
        self._at = self._last = now
        key = next(iter(self._kept))
        kept = self._kept.pop(key)
        if not runners.is_loaded(kept.model, kept.variant):
            return None
        loaded = runners.loaded(kept.model, kept.variant)
        if loaded.next is not None:  # a part of a split model: its time alone is not the request's
            return None
        start = time.perf_counter()
        try:
            return self._measure(loaded.runner, kept)
        finally:  # the recording's round trip is the worker's time too
            took = time.perf_counter() - start
            self._credit -= took
            self.spent_s += took

    def _measure(self, runner: Runner, kept: _Kept) -> float | None:
        try:
            seconds = time_alone(runner, kept.item)
        except Exception as exc:  # the request already has its answer; only the sample is lost
            log.debug("a re-run of %s/%s failed: %s", kept.model, kept.variant, exc)
            return None
        try:
            record(self.r, self.namespace, kept.model, kept.item.app, seconds)
            self.recorded += 1
        except redis.RedisError as exc:
            self.dropped += 1
            log.debug("a re-run's time was not recorded: %s", exc)
        return seconds
