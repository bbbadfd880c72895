"""The overload scenario's second producer: jobs at a fixed rate, far above what the pipeline can
serve, sent as copies of one encoded job with only its id changed.

Building and encoding each job through the SDK capped one process at about 1,200-1,900 jobs/s
on the 2-core machine, short of the 10x the scenario asks for; a template validated once by the
SDK's own checks, copied with a new id of the same length and XADDed pipelined, sends what is
asked. Its results are read from its reply stream and counted by how they ended.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import redis

from adaserve.broker import Keys, Settings, connect, load_limits
from adaserve.broker.replies import read_reply
from adaserve.models.datasets import sample_inputs
from adaserve.producers.jobs import encode_checked, make_job

_ID_WIDTH = 12


class RawSurge:
    def __init__(self, settings: Settings, model: str, *, k: int = 4, deadline_ms: float = 250.0) -> None:
        self.settings, self.k = settings, k
        self.keys = Keys(settings.namespace)
        self.reply_to = "surge-" + uuid.uuid4().hex[:8]
        inputs, _ = sample_inputs(model, k, seed=8)
        marker = "surge-" + "0" * _ID_WIDTH
        job = make_job(model, inputs, deadline_ms, app="surge", job_id=marker, reply_to=self.reply_to)
        self._raw = encode_checked(job, load_limits())
        self._at = self._raw.index(marker.encode())
        self._width = len(marker)
        self.sent = 0
        self.ends: Counter[str] = Counter()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True, name="chaos-surge-read")

    def job(self, n: int) -> bytes:
        """The template with job id ``surge-<n>``: the same length, so the map stays valid."""
        new = f"surge-{n:0{_ID_WIDTH}d}".encode()
        return self._raw[:self._at] + new + self._raw[self._at + self._width:]

    def run(self, jobs_per_s: float, seconds: float) -> float:
        """Send for ``seconds`` at up to ``jobs_per_s``; returns when the sending ended (time.time())."""
        self._reader.start()
        r = connect(self.settings)
        stream, maxlen = self.keys.jobs, self.settings.stream_maxlen
        t0 = time.monotonic()
        try:
            while (now := time.monotonic() - t0) < seconds:
                due = min(int(now * jobs_per_s) - self.sent, 128)
                if due <= 0:
                    time.sleep(0.001)
                    continue
                with r.pipeline(transaction=False) as p:
                    for n in range(self.sent, self.sent + due):
                        p.xadd(stream, {b"m": self.job(n)}, maxlen=maxlen, approximate=True)
                    p.execute()
                self.sent += due
        finally:
            r.close()
        return time.time()

    def finish(self, grace_s: float) -> int:
        """Wait up to ``grace_s`` for every request's end; how many had none."""
        end = time.monotonic() + grace_s
        while sum(self.ends.values()) < self.sent * self.k and time.monotonic() < end:
            time.sleep(0.1)
        self._stop.set()
        self._reader.join()
        return self.sent * self.k - sum(self.ends.values())

    def _read(self) -> None:
        r = connect(self.settings, block_ms=200)
        stream, last = self.keys.reply(self.reply_to), "0"
        try:
            while not self._stop.is_set():
                try:
                    got = r.xread({stream: last}, count=2000, block=200)
                except redis.RedisError:
                    time.sleep(0.2)  # the fault under test may be the server itself
                    continue
                for _, rows in got or []:
                    for eid, fields in rows:
                        for res in read_reply(fields[b"m"]):
                            self.ends["overloaded" if res.reason.startswith("overloaded") else res.status] += 1
                        last = eid
                if got:
                    r.xtrim(stream, minid=last, approximate=True)  # as the SDK does: memory stays bounded
        finally:
            r.delete(stream)
            r.close()
