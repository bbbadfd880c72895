"""Exactly-once ends of requests, and registration of the jobs they belong to.

A request ends when its job hash gets the flag ``d:<request id>``; the same Lua script that sets
the flags (one HSET for the requests of a job none of which had ended, one HSETNX each
otherwise) publishes the results (those of one job that end together as one ``results``
entry), counts the statuses, emits ``job.completed`` when the last request of the job ends, and
acks the stream entry that produced them. A redelivered batch therefore never yields a second
result for a request, and a crash between "result published" and "entry acked" cannot happen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import redis

from adaserve.broker.codec import encode, results_entry
from adaserve.broker.direct import Direct
from adaserve.broker.keys import Keys
from adaserve.broker.messages import Job, Result
from adaserve.broker.settings import Settings

_LUA = files("adaserve.broker").joinpath("finalize.lua").read_text()
# Queues commands on a pipeline; returns what takes their replies (in order) once it ran.
Also = Callable[["redis.client.Pipeline[bytes]"], Callable[[list[Any]], None]]


@dataclass(frozen=True)
class Ending:
    """One request's terminal result and the reply channel (``Job.reply_to``) it goes to."""

    result: Result
    reply_to: str


@dataclass(frozen=True, slots=True)
class Packed:
    """A terminal result already encoded: hot paths (workers) pack plain maps themselves,
    because building and dumping a pydantic ``Result`` costs more than running a small model."""

    job_id: str
    request_id: str
    status: str
    reply_to: str
    raw: bytes = b""
    # Builds ``raw`` when it is needed, for a caller that sends its job's requests as one entry
    # of its own making (``end_packed``'s ``entries``): only a redelivery needs each request's.
    build: Callable[[], bytes] | None = None

    def encoded(self) -> bytes:
        """The request's own ``result`` entry."""
        return self.raw if self.build is None else self.build()

    @classmethod
    def of(cls, ending: Ending) -> Packed:
        r = ending.result
        return cls(r.job_id, r.request_id, r.status, ending.reply_to, encode(r))


class Finalizer:
    """``direct``, for a finaliser used by one thread only (a worker's publisher, the planner's
    loop), sends its round trips on that held connection instead of through redis-py's command
    machinery."""

    def __init__(self, r: redis.Redis[bytes], settings: Settings, *, direct: Direct | None = None) -> None:
        self._r = r
        self._direct = direct
        self._keys = Keys(settings.namespace)
        self._settings = settings
        self._script = r.register_script(_LUA)
        self._register = r.register_script(_REGISTER)

    def register(self, job: Job, entry_id: str, submitted_ms: float, *, digest: str = "") -> int:
        """Create the job hash once. Returns 1 for a new job, 0 for a redelivery of the same
        stream entry (counters kept), -2 for another entry with the same job id and the same
        ``digest`` of its bytes (a producer re-sent a job whose XADD reply it lost: a duplicate to
        drop), and -1 when another entry used this job id for other content."""
        return self.register_all([(job, entry_id, submitted_ms, digest)])[0]

    def register_all(self, jobs: Sequence[tuple[Job, str, float, str]], *, also: Also | None = None) -> list[int]:
        """``register`` for many ``(job, entry id, submitted ms, digest)`` in one round trip.

        The script is called by its SHA in a plain pipeline: a registered script in a pipeline
        makes redis-py ask SCRIPT EXISTS first, one more round trip on every call of the
        planner's hottest path. A server that lost its scripts (a restart) gets it loaded again.
        ``also`` queues more commands on the same round trip (the planner's reads of telemetry
        and of its pools) and returns what takes their replies, called once they are in."""
        for attempt in (0, 1):
            with self._r.pipeline(transaction=False) as p:
                for job, entry_id, submitted_ms, digest in jobs:
                    args: list[object] = [entry_id, len(job.requests), digest]
                    for kv in (("id", job.id), ("app", job.app), ("model", job.model), ("run", job.run),
                               ("remaining", len(job.requests)), ("submitted_ms", submitted_ms),
                               ("deadline_ms", job.slo.deadline_ms)):
                        args += kv
                    args.append(self._settings.result_ttl_s)
                    p.evalsha(self._register.sha, 1, self._keys.job(job.id), *args)
                take = also(p) if also is not None else None
                replies = (p.execute(raise_on_error=False) if self._direct is None
                           else self._direct.execute(p, raise_on_error=False))
            codes = replies[:len(jobs)]
            lost = next((x for x in codes if isinstance(x, redis.exceptions.NoScriptError)), None)
            if lost is not None and not attempt:
                self._r.script_load(_REGISTER)
                continue
            error = next((x for x in codes if isinstance(x, Exception)), None)
            if error is not None:
                raise error
            if take is not None:
                take(replies[len(jobs):])
            return [int(x) for x in codes]
        raise AssertionError("unreachable")

    def end(
        self, endings: Sequence[Ending], *, ack: tuple[str, str, str] | None = None,
        event: bytes = b"", delete: bool = False,
    ) -> int:
        """Publish each result once, optionally XACK ``(stream, group, id)`` and add ``event``;
        returns how many results were new (a redelivered batch publishes nothing). ``delete``
        also deletes the acked entry in the same script (XDEL), for an entry nobody reads again."""
        return self.end_packed([Packed.of(e) for e in endings], ack=ack, event=event, delete=delete)

    def end_packed(
        self, items: Sequence[Packed], *, ack: tuple[str, str, str] | None = None, event: bytes = b"",
        entries: Mapping[tuple[str, str], bytes] | None = None, delete: bool = False,
    ) -> int:
        """``end`` for results encoded by the caller. The requests of one job go out as one
        ``results`` entry on its reply stream (when none of them had ended), not one entry each.

        Their own entries travel only when needed: a first call sends each job's ``results`` entry
        and the requests' ids and statuses, which the script flags with one HSET per job; a job
        some of whose requests had already ended (a redelivered batch) is sent again with its
        requests' entries, and the ack and the event wait for that second call.

        ``entries`` holds, per ``(job id, reply_to)``, the entry that carries those requests
        whole (a worker's ``columns`` entry); a group without one goes as a ``results`` entry
        of the requests' own."""
        parts = _by_job(items)
        got = self._call(parts, ack, event, whole=True, entries=entries or {}, delete=delete)
        return self._rest(parts, got, ack, event, delete=delete)

    def _rest(self, parts: list[tuple[tuple[str, str], list[Packed]]], got: list[Any],
              ack: tuple[str, str, str] | None, event: bytes, *, delete: bool = False) -> int:
        """Results published by a first call's reply ``got``, after sending again, each request
        with its own entry, the groups it asked for."""
        published = int(got[0])
        again = [parts[int(g) - 1] for g in got[1:]]
        if again:
            done = self._call(again, ack, event, whole=False, entries={}, delete=delete)
            if len(done) > 1:  # every entry was sent: the script has nothing left to ask for
                raise AssertionError("the finaliser asked again for entries it was given")
            published += int(done[0])
        return published

    def queue_end(self, p: redis.client.Pipeline[bytes], endings: Sequence[Ending]) -> Callable[[Any], int]:
        """``end`` queued on a caller's pipeline, so that it rides the round trip the caller makes
        anyway (the planner's expiries, once per step), in order with the commands around it.
        Returns what takes the script's reply from that pipeline's results and returns how many
        results were new; requests of which some had already ended (a rebuilt planner's) are
        finished by a direct call then.

        The script travels whole (EVAL, not EVALSHA): a server that lost its scripts (a restart)
        must not fail this call while the commands queued after it, its jobs' acks, succeed."""
        return self.queue_end_packed(p, [Packed.of(e) for e in endings])

    def queue_end_packed(self, p: redis.client.Pipeline[bytes], items: Sequence[Packed]) -> Callable[[Any], int]:
        """``queue_end`` for results encoded by the caller."""
        parts = _by_job(items)
        keys, args = self._args(parts, None, b"", whole=True, entries={})
        p.eval(_LUA, len(keys), *keys, *args)

        def take(reply: Any) -> int:
            if isinstance(reply, Exception):
                raise reply
            return self._rest(parts, list(reply), None, b"")
        return take

    def _call(self, groups: list[tuple[tuple[str, str], list[Packed]]], ack: tuple[str, str, str] | None,
              event: bytes, *, whole: bool, entries: Mapping[tuple[str, str], bytes], delete: bool = False) -> list[Any]:
        """One run of the script over ``groups``."""
        keys, args = self._args(groups, ack, event, whole=whole, entries=entries, delete=delete)
        if self._direct is None:
            return list(self._script(keys=keys, args=args))
        try:
            return list(self._direct.call("EVALSHA", self._script.sha, len(keys), *keys, *args))
        except redis.exceptions.NoScriptError:  # a server that lost its scripts (a restart)
            self._direct.call("SCRIPT", "LOAD", _LUA)
            return list(self._direct.call("EVALSHA", self._script.sha, len(keys), *keys, *args))

    def _args(self, groups: list[tuple[tuple[str, str], list[Packed]]], ack: tuple[str, str, str] | None,
              event: bytes, *, whole: bool, entries: Mapping[tuple[str, str], bytes],
              delete: bool = False) -> tuple[list[str], list[object]]:
        """The script's keys and arguments for ``groups``; with ``whole``, a job of several requests
        (or one with an entry in ``entries``) goes as one entry only, else every request with its own."""
        keys = [self._keys.telemetry, ack[0] if ack else self._keys.telemetry]
        args: list[object] = [
            ack[1] if ack else "", ack[2] if ack else "", self._settings.telemetry_maxlen,
            self._settings.stream_maxlen, self._settings.result_ttl_s, event, "1" if ack and delete else "",
        ]
        for key, group in groups:
            job_id, reply_to = key
            keys += [self._keys.job(job_id), self._keys.reply(reply_to)]
            given = entries.get(key) if whole else None
            joined = given is not None or (whole and len(group) > 1)
            entry = b""
            if joined:
                entry = given if given is not None else results_entry(job_id, [p.encoded() for p in group])
                status = group[0].status
                if all(p.status == status for p in group):
                    # the compact form: a third of the arguments to pack, send and convert
                    args += [-len(group), entry, status, *[p.request_id for p in group]]
                    continue
            args += [len(group), entry]
            for p in group:
                args += [p.request_id, p.status, b"" if joined else p.encoded()]
        return keys, args


def _by_job(items: Sequence[Packed]) -> list[tuple[tuple[str, str], list[Packed]]]:
    groups: dict[tuple[str, str], list[Packed]] = {}
    for p in items:
        groups.setdefault((p.job_id, p.reply_to), []).append(p)
    return list(groups.items())


_REGISTER = """
local prev = redis.call('HGET', KEYS[1], 'entry')
if prev then
  if prev == ARGV[1] then return 0 end
  if ARGV[3] ~= '' and redis.call('HGET', KEYS[1], 'digest') == ARGV[3] then return -2 end
  return -1
end
-- one HSET for every field: a call per field cost the server 14.5 us a job against 8.6
redis.call('HSET', KEYS[1], 'entry', ARGV[1], 'n', ARGV[2], 'digest', ARGV[3], unpack(ARGV, 4, #ARGV - 1))
redis.call('EXPIRE', KEYS[1], ARGV[#ARGV])
return 1
"""
