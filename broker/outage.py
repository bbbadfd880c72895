"""Riding out a broker outage: which errors are one, capped exponential backoff with jitter, and
the two log lines (start, end with its length) that an operator reads instead of a retry storm.

A Redis restart, a Sentinel failover or a network blip is something to wait out: every adaserve
process keeps its state and retries. It gives up (``BrokerUnavailable``) only after
``ADASERVE_MAX_OUTAGE_S`` of continuous failure, when that is set.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import redis

from adaserve.broker.errors import BrokerUnavailable

__all__ = ["Outage", "is_transient", "ride_out"]

T = TypeVar("T")

# Replies a server gives while it cannot serve yet: still loading its AOF (BusyLoadingError, a
# ConnectionError), demoted to a replica by a failover (READONLY), or a replica cut off from its
# primary (MASTERDOWN).
_TRANSIENT_REPLIES = ("LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN")


def is_transient(exc: BaseException) -> bool:
    """An error that says "the broker is not there right now", not "this command is wrong"."""
    if isinstance(exc, redis.AuthenticationError):  # a ConnectionError to redis-py; a wrong setting to us
        return False
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(_TRANSIENT_REPLIES)


class Outage:
    """The state of one process's view of the broker: reachable, or down since when.

    ``failed`` is called on each transient error and returns how long to wait before the next try
    (``base_s`` doubling up to ``cap_s``, each wait drawn from its upper half so that many clients
    do not retry in step); ``recovered`` after each success. Thread-safe: a process's threads
    may share one, so the outage is logged once however many of them notice it.

    ``wait_first=False`` is for tools and apps rather than services: a server never reached since
    the object was made is a wrong URL or a stack that is not up, said at once (the error is
    raised as it came), while an outage after a first success is waited out like anywhere else.
    """

    def __init__(self, what: str, *, max_s: float | None = None, base_s: float = 0.05, cap_s: float = 2.0,
                 wait_first: bool = True, logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic, jitter: Callable[[], float] = random.random) -> None:
        if base_s <= 0 or cap_s < base_s:
            raise ValueError("0 < base_s <= cap_s is required")
        self.what, self.max_s, self.base_s, self.cap_s = what, max_s, base_s, cap_s
        self._reached = wait_first  # True: never raise for want of a first contact
        self._log = logger or logging.getLogger("adaserve.broker")
        self._clock, self._jitter = clock, jitter
        self._lock = threading.Lock()
        self._since: float | None = None
        self._tries = 0
        self.outages = 0  # how many have ended: tests and benchmarks count recoveries

    @property
    def down(self) -> bool:
        return self._since is not None

    def down_for(self) -> float:
        since = self._since
        return 0.0 if since is None else self._clock() - since

    def failed(self, exc: BaseException) -> float:
        """Record a failed try; the seconds to wait, or ``BrokerUnavailable`` past ``max_s``."""
        if not self._reached:
            raise exc
        with self._lock:
            now = self._clock()
            if self._since is None:
                self._since, self._tries = now, 0
                self._log.warning("%s: broker unreachable (%s: %s); retrying with backoff until it returns",
                                  self.what, type(exc).__name__, exc)
            elif self.max_s is not None and now - self._since >= self.max_s:
                raise BrokerUnavailable(
                    f"{self.what}: broker unreachable for {now - self._since:.1f} s, longer than "
                    f"ADASERVE_MAX_OUTAGE_S={self.max_s:g} (last error: {exc})") from exc
            delay = min(self.cap_s, self.base_s * 2.0 ** self._tries)
            self._tries += 1
            return delay * (0.5 + 0.5 * self._jitter())

    def recovered(self) -> float | None:
        """Mark the broker reachable; the outage's length in seconds if one just ended."""
        self._reached = True
        with self._lock:
            if self._since is None:
                return None
            length = self._clock() - self._since
            self._since = None
            self.outages += 1
        self._log.warning("%s: broker back after %.1f s", self.what, length)
        return length


def ride_out(fn: Callable[[], T], outage: Outage, *, stop: threading.Event | None = None) -> T:
    """Call ``fn`` until it returns, waiting out transient errors; ``BrokerUnavailable`` past the
    outage limit. With ``stop``, a set event ends the wait by raising ``BrokerUnavailable`` too, so
    that a shutdown during an outage does not hang. Only for calls that are safe to repeat."""
    while True:
        try:
            out = fn()
        except redis.RedisError as exc:
            if not is_transient(exc):
                raise
            delay = outage.failed(exc)
            if stop is None:
                time.sleep(delay)
            elif stop.wait(delay):
                raise BrokerUnavailable(f"{outage.what}: stopped while the broker was unreachable") from exc
            continue
        outage.recovered()
        return out
