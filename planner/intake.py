"""Admission of ingress entries: decode, check against the live pools, register the job once.

What fails becomes a rejection queued on the caller's pipeline (result, dead letter, event, ack);
what passes comes back with the ids of its requests that already ended, which is non-empty only
when an entry is redelivered (another planner died holding it). ``keep`` and ``reclaim`` are the
two halves of that hand-over: a planner keeps the entries it holds fresh, and takes over those
another planner left idle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import redis
import xxhash

from adaserve.broker import streams
from adaserve.broker.codec import unpack, validate
from adaserve.broker.direct import Direct
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.finalize import Also, Finalizer
from adaserve.broker.jobform import is_columnar
from adaserve.broker.keys import PLANNER_GROUP, Keys
from adaserve.broker.messages import Job
from adaserve.broker.settings import Limits, Settings
from adaserve.broker.streams import Entry
from adaserve.planner.admission import reject
from adaserve.planner.pools import Pools
from adaserve.planner.validate import check_job

Admitted = tuple[Entry, Job, set[str]]
log = logging.getLogger(__name__)


def digest(raw: bytes | None) -> str:
    """What tells a producer's re-send of a job (same bytes) from a clash of job ids: a 128-bit
    XXH3 of the entry, a planner's whole pass over every byte it admits. Not a cryptographic hash:
    it need only tell two submissions of one id apart, and whoever could craft a collision chose
    the id too, and would lose only its own job. SHA-256 cost 3.1 ms a 4.8 MB photo job, about a
    twentieth of the model's time, against 0.11 (docs/overhead.md, nineteenth round)."""
    return xxhash.xxh3_128_hexdigest(raw or b"")


class Intake:
    """``check`` is the planner's own say on a job that passed validation, given the job and its
    submission time in ms (MOSEL: can its accuracy floor be reached; admission control: can the
    queue serve it in time); it raises ``InvalidMessage`` to reject, like the validation before it.
    An ``overloaded`` rejection writes no dead letter: the job was fine, the moment was not.
    ``shed`` is the admission control's look at the unpacked map, before validation: a planner
    that has fallen behind refuses most of what it reads, and validating a job only to refuse it
    was a third of what each refusal cost (a job refused for load is not checked; the
    producer's retry is)."""

    def __init__(self, r: redis.Redis[bytes], settings: Settings, limits: Limits, fin: Finalizer, *,
                 check: Callable[[Job, float], None] | None = None,
                 shed: Callable[[dict[str, Any], float], None] | None = None,
                 family: Callable[[str], bool] | None = None, direct: Direct | None = None) -> None:
        self.r, self.settings, self.limits, self.fin = r, settings, limits, fin
        self.direct = direct  # the caller's held connection, for the round trip of a read with no job
        self.check = check
        self.shed = shed
        # A job naming a task family (HELIOS) is checked against its candidates by ``check``.
        self.family = family
        self.keys = Keys(settings.namespace)

    def admit(self, entries: Sequence[Entry], pools: Pools, pipe: redis.client.Pipeline[bytes],
              now_ms: float, *, also: Also | None = None) -> list[Admitted]:
        """The jobs of ``entries`` that passed, registered; ``also`` queues more commands on the
        registration's round trip (or on a round trip of their own when no job passed).
        The entries that end here are acked in one XACK, and each reply stream's expiry is set
        once: a planner that has fallen behind refuses most of a read, and two commands of each
        refusal's four were these."""
        valid: list[tuple[Entry, Job]] = []
        ended: list[str] = []  # entry ids to ack
        ttl: set[str] = set()  # reply streams whose expiry is already queued
        for e in entries:
            body: dict[str, Any] | None = None
            try:
                if e.raw is None:
                    raise InvalidMessage("undecodable", "entry has no 'm' field or was deleted")
                body = unpack(e.raw, self.limits)
                if self.shed is not None:
                    self.shed(body, float(e.ms))
                job = validate(body, self.limits, expect=Job, views=True)
                if self.family is None or not self.family(job.model):
                    # a job in columns is checked per stacked input, not per request
                    check_job(job, known=pools.known(job.model), inputs=pools.inputs.get(job.model),
                              limits=self.limits, stacked=body["inputs"] if is_columnar(body) else None)
                if self.check is not None:
                    self.check(job, float(e.ms))
                valid.append((e, job))
            except InvalidMessage as exc:
                self._reject(pipe, e, exc, now_ms, body, ttl)
                ended.append(e.id)
        if not valid:
            self.done(pipe, ended)
            if also is not None:
                with self.r.pipeline(transaction=False) as p:
                    take = also(p)
                    take(p.execute(raise_on_error=False) if self.direct is None
                         else self.direct.execute(p, raise_on_error=False))
            return []
        codes = self.fin.register_all([(job, e.id, float(e.ms), digest(e.raw)) for e, job in valid], also=also)
        again = [job for (_, job), code in zip(valid, codes) if int(code) == 0]
        done = self._ended(again)
        out: list[Admitted] = []
        for (e, job), code in zip(valid, codes):
            if int(code) == -2:
                log.info("job %s arrived again with the same content (entry %s): a producer's retry, dropped",
                         job.id, e.id)
                ended.append(e.id)
            elif int(code) == -1:
                self._reject(pipe, e, InvalidMessage("duplicate", f"job id {job.id!r} was already submitted"), now_ms,
                             ttl=ttl)
                ended.append(e.id)
            else:
                out.append((e, job, done.get(job.id, set())))
        self.done(pipe, ended)
        return out

    def done(self, pipe: redis.client.Pipeline[bytes], entry_ids: list[str]) -> None:
        """Ack and delete ingress entries the planner is done with: what a job's requests need
        from then on travels in their batches, and a deleted entry's memory goes back to the
        server at once instead of at the next trim, ``consumed_keep_s`` later (a job's tensors,
        at 128 KB a job, held 5 s of ingress in memory: docs/overhead.md, eighteenth round)."""
        if entry_ids:
            pipe.xack(self.keys.jobs, PLANNER_GROUP, *entry_ids)
            pipe.xdel(self.keys.jobs, *entry_ids)

    def keep(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """Reset the idle time of the entries ``consumer`` still holds, so no other planner
        reclaims them while their requests wait here."""
        for i in range(0, len(entry_ids), 500):
            self.r.xclaim(self.keys.jobs, PLANNER_GROUP, consumer, 0, list(entry_ids[i:i + 500]), justid=True)

    def own(self, consumer: str) -> list[Entry]:
        """Every entry pending with ``consumer``: what it read and has not acked yet."""
        out: list[Entry] = []
        cursor = "0"
        while True:
            got = streams.read_group(self.r, {self.keys.jobs: cursor}, PLANNER_GROUP, consumer, count=500)
            if not got:
                return out
            out += got
            cursor = got[-1].id

    def reclaim(self, consumer: str, mine: set[str]) -> list[Entry]:
        """Entries idle past ``reclaim_idle_ms`` in other planners' hands, now ``consumer``'s."""
        got = streams.reclaim(self.r, self.keys.jobs, PLANNER_GROUP, consumer,
                              min_idle_ms=self.settings.reclaim_idle_ms)
        return [e for e in got if e.id not in mine]

    def _ended(self, jobs: list[Job]) -> dict[str, set[str]]:
        """Requests of redelivered jobs that already ended (their ``d:<id>`` flags)."""
        if not jobs:
            return {}
        with self.r.pipeline(transaction=False) as p:
            for job in jobs:
                p.hkeys(self.keys.job(job.id))
            rows = p.execute()
        return {job.id: {f.decode()[2:] for f in fields if f.startswith(b"d:")} for job, fields in zip(jobs, rows)}

    def _reject(self, pipe: redis.client.Pipeline[bytes], e: Entry, error: InvalidMessage, now_ms: float,
                body: dict[str, Any] | None = None, ttl: set[str] | None = None) -> None:
        """The rejection's writes (``admission.reject``); the caller acks the entry."""
        reject(pipe, self.keys, self.settings, entry_id=e.id, entry_ms=e.ms, raw=e.raw, error=error, now_ms=now_ms,
               dead_letter=error.reason != "overloaded", max_ids=self.limits.max_requests_per_job, body=body,
               ttl_set=ttl)
