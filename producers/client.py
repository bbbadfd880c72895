"""The producer SDK: submit jobs, and collect their results from the client's own reply stream.

A broker outage is waited out (``ADASERVE_MAX_OUTAGE_S`` bounds the wait): a submission whose
XADD reply was lost is sent again, and the planner drops the copy that may have landed twice;
handles stay valid and their results arrive once the broker is back.

Every client has one reply stream (``Keys(ns).reply(client_id)``). Results are read from it with
XREAD BLOCK after the last id seen and filed by job id. Any thread may wait on any handle: one
waiter at a time reads the stream for all of them (leader/followers around one condition), so
several threads never race on the stream position nor miss each other's results.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

import redis

from adaserve.broker.codec import FIELD
from adaserve.broker.connection import connect
from adaserve.broker.direct import Direct
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.heap import keep_freed_memory
from adaserve.broker.keys import Keys
from adaserve.broker.messages import Job
from adaserve.broker.outage import Outage, is_transient, ride_out
from adaserve.broker.replies import ColumnsEntry, read_reply_entry
from adaserve.broker.settings import Limits, Settings, load_limits
from adaserve.broker.streams import Entry, publish, read, xadd_trim
from adaserve.producers.handle import JobHandle
from adaserve.producers.jobs import encode_checked, new_id
from adaserve.producers.prepared import PreparedJob
from adaserve.producers.results import JobResult
from adaserve.producers.tracking import Tracked

log = logging.getLogger(__name__)
_CLIENT_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
_TRIM_EVERY = 1024  # entries read between trims of the reply stream


def client_prefix(settings: Settings) -> str:
    """What the ids of this settings' clients start with (``ADASERVE_CLIENT_PREFIX``): a producer
    ACL role grants the reply streams of one prefix, by default its user name."""
    user = urlsplit(settings.redis_url).username if settings.redis_url else None
    return settings.client_prefix or (unquote(user) if user else "") or "c"


class Client:
    """``with Client(settings) as c: c.submit(job).result(5)``."""

    def __init__(
        self, settings: Settings, *, client_id: str | None = None, limits: Limits | None = None,
        read_block_ms: int = 500, chunk: int = 256,
    ) -> None:
        cid = client_id or new_id(client_prefix(settings))
        if not _CLIENT_ID.match(cid):
            raise InvalidMessage("schema", f"client id {cid!r} must be 1-128 characters of [A-Za-z0-9_.:-]")
        self.client_id = cid
        self.settings = settings
        self.limits = limits or load_limits()
        self._keys = Keys(settings.namespace)
        self.reply_stream = self._keys.reply(cid)
        self._block_ms = read_block_ms
        self._chunk = max(1, chunk)
        self._r = connect(settings, block_ms=read_block_ms)
        # Jobs and replies of megabytes would otherwise fault every page of their buffers in again
        # (``ADASERVE_HEAP_KEEP_MB``; process-wide, like the planner's and the workers')
        keep_freed_memory(settings.heap_keep_mb)
        # Held connections for the two commands of every job: its XADD (senders take turns under
        # ``_sending``) and the reply stream's read (one reader at a time, ``_reading``).
        self._send, self._recv = Direct(self._r), Direct(self._r)
        self._sending = threading.Lock()
        self._outage = Outage(f"client {cid}", max_s=settings.max_outage_s, wait_first=False, logger=log)
        self._cond = threading.Condition()
        self._reading = False
        self._last = "0-0"
        self._since_trim = 0
        self._outstanding: dict[str, Tracked] = {}
        self._unclaimed: OrderedDict[str, Tracked] = OrderedDict()
        self.orphans = 0  # results for jobs this client is not waiting for
        self.duplicates = 0  # second results for a request of a job still outstanding
        self.undecodable = 0

    # -- submitting -------------------------------------------------------------------------
    def submit(self, job: Job) -> JobHandle:
        """Validate against the limits, then XADD; raises ``InvalidMessage``/``LimitExceeded``
        (nothing sent) for a job the planner would reject."""
        return self.submit_many([job])[0]

    def prepare(self, jobs: Iterable[Job]) -> list[PreparedJob]:
        """Validate and encode jobs now, to send later with ``submit_many``: a producer that
        knows its next jobs ahead of time (a load generator, a batch of files) pays for both
        before the moment it submits, and the submission is then only their XADDs."""
        return list(self._once_each(jobs))

    def submit_many(self, jobs: Iterable[Job | PreparedJob]) -> list[JobHandle]:
        """Validate all, then XADD them pipelined, one round trip per ``chunk`` jobs. A
        ``PreparedJob`` (``prepare``) was validated and encoded already; it must be this
        client's (its reply channel is this client's stream)."""
        prepared = [(p.tracked(), p.raw) for p in self._once_each(jobs)]
        handles: list[JobHandle] = []
        for start in range(0, len(prepared), self._chunk):
            part = prepared[start:start + self._chunk]
            self._track([t for t, _ in part])
            try:
                ids = self._xadd([raw for _, raw in part])
            except BaseException:
                self._untrack([t for t, _ in part])
                raise
            for (t, _), eid in zip(part, ids):
                t.set_entry(eid)
                handles.append(JobHandle(self, t))
        return handles

    def _once_each(self, jobs: Iterable[Job | PreparedJob]) -> Iterator[PreparedJob]:
        """Each job validated and encoded for this client (a prepared one checked to be this
        client's), and no job id twice in one call."""
        seen: set[str] = set()
        for job in jobs:
            if not isinstance(job, PreparedJob):
                job = PreparedJob(self.client_id, job, encode_checked(job, self.limits, reply_to=self.client_id))
            elif job.client_id != self.client_id:
                raise InvalidMessage("schema", f"job {job.job_id!r} was prepared by client {job.client_id!r}, "
                                               f"not by this one ({self.client_id!r}): its results would go there")
            if job.job_id in seen:
                raise InvalidMessage("schema", f"job id {job.job_id!r} appears twice in one submission")
            seen.add(job.job_id)
            yield job

    def _xadd(self, raws: list[bytes]) -> list[str]:
        """XADD, sent again after an outage: a copy that landed twice is the planner's to drop."""
        stream, maxlen = self._keys.jobs, self.settings.stream_maxlen

        def send() -> list[str]:
            with self._sending:
                if len(raws) == 1:
                    return [publish(self._send, stream, raws[0], maxlen)]
                trim = xadd_trim(maxlen)
                ids = self._send.calls([("XADD", stream, *trim, "*", FIELD, raw) for raw in raws])
            error = next((i for i in ids if isinstance(i, Exception)), None)
            if error is not None:
                raise error
            return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]

        return ride_out(send, self._outage)

    def _track(self, items: list[Tracked]) -> None:
        with self._cond:
            clash = [t.job_id for t in items if t.job_id in self._outstanding]
            if clash:
                raise InvalidMessage("schema", f"job id {clash[0]!r} is already in flight on this client")
            for t in items:
                self._outstanding[t.job_id] = t
            self._cond.notify_all()

    def _untrack(self, items: list[Tracked]) -> None:
        with self._cond:
            for t in items:
                self._outstanding.pop(t.job_id, None)

    # -- collecting -------------------------------------------------------------------------
    @property
    def outstanding(self) -> int:
        """Jobs submitted whose requests have not all ended."""
        with self._cond:
            return len(self._outstanding)

    def poll(self, timeout: float = 0.0) -> list[JobResult]:
        """Jobs that finished and were not yet claimed, waiting up to ``timeout`` for one. With
        nothing in flight it waits the timeout out (a submit from another thread ends the wait),
        so that a loop pacing its submissions with ``poll`` does not spin a core."""
        end = time.monotonic() + max(timeout, 0.001)
        with self._cond:
            while not self._outstanding and not self._unclaimed:
                left = end - time.monotonic()
                if left <= 0:
                    return []
                self._cond.wait(left)
        self._pump(lambda: bool(self._unclaimed) or not self._outstanding, max(end - time.monotonic(), 0.001))
        with self._cond:
            return [self._claim_locked(t) for t in list(self._unclaimed.values())]

    def results(self, timeout: float | None = None) -> Iterator[JobResult]:
        """Yield jobs as they finish until none is outstanding or ``timeout`` s have passed."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return
            with self._cond:
                idle = not self._outstanding and not self._unclaimed
            if idle:
                return
            yield from self.poll(self._block_ms / 1000 if left is None else left)

    def drain(self, timeout: float | None = None) -> list[JobResult]:
        return list(self.results(timeout))

    def _claim(self, t: Tracked) -> JobResult:
        with self._cond:
            return self._claim_locked(t)

    def _claim_locked(self, t: Tracked) -> JobResult:
        self._unclaimed.pop(t.job_id, None)
        assert t.result is not None
        return t.result

    def _pump(self, done: Callable[[], bool], timeout: float | None) -> bool:
        """Read the reply stream until ``done()`` (checked under the lock) or the timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not done():
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                if self._reading:  # another thread is reading for everyone: wait for its news
                    self._cond.wait(left)
                    continue
                block = self._block_ms if left is None else max(1, min(self._block_ms, int(left * 1000)))
                self._reading = True
                self._cond.release()
                try:
                    entries = self._read(block, left)
                finally:
                    self._cond.acquire()
                    self._reading = False
                    self._cond.notify_all()
                self._file(entries)
            return True

    def _read(self, block_ms: int, left: float | None) -> list[Entry]:
        """One read of the reply stream; during an outage, one backoff pause (within ``left``)."""
        try:
            entries = read(self._recv, {self.reply_stream: self._last}, count=512, block_ms=block_ms)
        except redis.RedisError as exc:
            if not is_transient(exc):
                raise
            pause = self._outage.failed(exc)
            time.sleep(pause if left is None else max(0.0, min(pause, left)))
            return []
        self._outage.recovered()
        return entries

    def _file(self, entries: list[Entry]) -> None:
        for e in entries:
            self._last = e.id
            try:
                results = read_reply_entry(e.raw or b"")
            except InvalidMessage as exc:
                self.undecodable += 1
                log.warning("undecodable entry %s on %s: %s", e.id, self.reply_stream, exc)
                continue
            if isinstance(results, ColumnsEntry):
                # filed without a map per request (``Tracked.add_columns``)
                t = self._outstanding.get(results.job_id)
                if t is None:
                    self.orphans += len(results.request_ids)
                    continue
                seen = t.duplicates
                if t.add_columns(results):
                    del self._outstanding[t.job_id]
                    self._unclaimed[t.job_id] = t
                self.duplicates += t.duplicates - seen
                continue
            for res in results:
                self._file_one(res)
        self._since_trim += len(entries)
        if self._since_trim >= _TRIM_EVERY:
            self._since_trim = 0
            try:
                self._r.xtrim(self.reply_stream, minid=self._last, approximate=True)
            except redis.RedisError as exc:  # housekeeping: the next trim catches up
                log.debug("reply stream not trimmed: %s", exc)

    def _file_one(self, res: dict[str, Any]) -> None:
        t = self._outstanding.get(res["job_id"])
        if t is None:
            self.orphans += 1
            return
        seen = t.duplicates
        done = t.add(res)
        self.duplicates += t.duplicates - seen
        if done:
            del self._outstanding[t.job_id]
            self._unclaimed[t.job_id] = t

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Delete the reply stream and drop the connections."""
        try:
            self._r.delete(self.reply_stream)
        except redis.RedisError as exc:  # it expires on its own (result TTL)
            log.warning("reply stream %s not deleted: %s", self.reply_stream, exc)
        finally:
            self._r.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
