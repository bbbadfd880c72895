"""Taking over batches of dead workers, and keeping the group and the workers hash tidy.

Live workers renew the idle time of every batch they hold on each heartbeat, so an entry idle
past ``reclaim_idle_ms`` belongs to a worker that stopped. It is claimed only as far as this
worker has free slots: a claimed batch waiting in a queue would look idle again and bounce.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import msgpack
import redis

from adaserve.broker.keys import Keys
from adaserve.broker.settings import Settings
from adaserve.broker.streams import Entry, deliveries, reclaim

log = logging.getLogger(__name__)

# Deleting a consumer drops its pending entries, so the check that it holds none and the delete
# must be one atomic step; a consumer still beating (present in the workers hash) is kept.
_DELCONSUMER = """
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return 0 end
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local f = {}
  for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
  if f['name'] == ARGV[2] then
    if tonumber(f['pending']) == 0 and tonumber(f['idle']) >= tonumber(ARGV[3]) then
      return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2]) + 1
    end
    return 0
  end
end
return 0
"""
# A heartbeat is removed only if it is still the stale one that was read (compare-and-delete).
_HDEL_IF = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


@dataclass(frozen=True)
class Claimed:
    entry: Entry
    deliveries: int


class Reclaimer:
    def __init__(self, r: redis.Redis[bytes], settings: Settings, *, pool: str, worker: str) -> None:
        self._r = r
        self._s = settings
        self._keys = Keys(settings.namespace)
        self.stream = self._keys.batches(pool)
        self.group = pool
        self.worker = worker
        self._delconsumer = r.register_script(_DELCONSUMER)
        self._hdel_if = r.register_script(_HDEL_IF)

    def claim(self, limit: int) -> list[Claimed]:
        """Up to ``limit`` batches idle past ``reclaim_idle_ms``, with their delivery counts."""
        out: list[Claimed] = []
        if limit <= 0:
            return out
        for entry in reclaim(self._r, self.stream, self.group, self.worker,
                             min_idle_ms=self._s.reclaim_idle_ms, count=limit):
            n = deliveries(self._r, self.stream, self.group, entry.id) if entry.raw is not None else 0
            out.append(Claimed(entry, n))
            if len(out) >= limit:
                break
        if out:
            log.info("reclaimed %d batch(es) from %s: %s", len(out), self.stream, [c.entry.id for c in out])
        return out

    def prune(self, now_ms: float) -> tuple[int, int]:
        """Forget workers that stopped beating long ago and idle consumers that hold nothing.

        Returns (heartbeats removed, consumers removed). Thresholds are generous: a worker that
        was only stalled simply re-registers with its next heartbeat or read.
        """
        stale_ms = 3 * self._s.worker_ttl_s * 1000.0
        gone = 0
        for field, raw in self._r.hgetall(self._keys.workers).items():
            ts = _ts(raw)
            if ts is not None and now_ms - ts > stale_ms:
                gone += int(self._hdel_if(keys=[self._keys.workers], args=[field, raw]))
        idle_ms = int(max(stale_ms, self._s.reclaim_idle_ms))
        dropped = 0
        for c in self._r.xinfo_consumers(self.stream, self.group):
            name = c["name"].decode() if isinstance(c["name"], bytes) else str(c["name"])
            if name == self.worker or int(c["pending"]) > 0 or int(c["idle"]) < idle_ms:
                continue
            dropped += 1 if int(self._delconsumer(keys=[self.stream, self._keys.workers],
                                                    args=[self.group, name, idle_ms])) > 0 else 0
        if gone or dropped:
            log.info("pruned %d stale heartbeat(s) and %d idle consumer(s)", gone, dropped)
        return gone, dropped


def _ts(raw: bytes) -> float | None:
    try:
        body = msgpack.unpackb(raw, raw=False)
        ts = body.get("ts") if isinstance(body, dict) else None
        return float(ts) if isinstance(ts, (int, float)) else None
    except Exception:
        return None
