"""The finaliser call for results the worker has already encoded.

``Finalizer.end`` takes pydantic ``Result`` objects and encodes each one; building and dumping a
pydantic model costs tens of microseconds per request, several times the cost of running a small
model on it, so the worker encodes plain maps itself (``results``) and hands the bytes to the
same script, ``broker/finalize.lua``, following the argument layout documented at its top.
Exactly-once publication, the ack and the event stay in that one atomic call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files

import redis

from adaserve.broker.codec import encode
from adaserve.broker.keys import Keys
from adaserve.broker.messages import Result
from adaserve.broker.settings import Settings

_LUA = files("adaserve.broker").joinpath("finalize.lua").read_text()


@dataclass(frozen=True, slots=True)
class Packed:
    """One request's encoded terminal result and the reply channel it goes to."""

    job_id: str
    request_id: str
    status: str
    reply_to: str
    raw: bytes

    @classmethod
    def of(cls, result: Result, reply_to: str) -> "Packed":
        return cls(result.job_id, result.request_id, result.status, reply_to, encode(result))


class PackedFinalizer:
    def __init__(self, r: "redis.Redis[bytes]", settings: Settings) -> None:
        self._keys = Keys(settings.namespace)
        self._s = settings
        self._script = r.register_script(_LUA)

    def end(self, items: Sequence[Packed], *, ack: tuple[str, str, str] | None = None, event: bytes = b"") -> int:
        """Publish each result once, XACK ``(stream, group, id)`` and add ``event``; returns how
        many results were new (a redelivered batch returns 0 and publishes nothing)."""
        keys = [self._keys.telemetry, ack[0] if ack else self._keys.telemetry]
        args: list[object] = [ack[1] if ack else "", ack[2] if ack else "", self._s.telemetry_maxlen,
                              self._s.stream_maxlen, self._s.result_ttl_s, event]
        for p in items:
            keys += [self._keys.job(p.job_id), self._keys.reply(p.reply_to)]
            args += [p.request_id, p.status, p.raw]
        return int(self._script(keys=keys, args=args))
