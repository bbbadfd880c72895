"""Hostile entries against a running pipeline, with valid jobs in between, and the accounting.

The sender XADDs the fuzzer's entries in pipelined chunks, one valid job every ``valid_every``
entries through the SDK, and keeps at most ``window`` entries unaccounted for, so that a stalled
planner shows as a stall and not as a growing stream. The accountant reads the dead letters (each
names the ingress entry it came from) and the fuzz reply stream (each result names its job) as it
goes, and deletes what it has read, so a run of any length holds little on the server.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import redis

from adaserve.broker.connection import connect
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.keys import Keys
from adaserve.broker.replies import read_reply_maps
from adaserve.broker.settings import Settings
from adaserve.loadgen.fuzz import Fuzzer, Hostile
from adaserve.producers.client import Client
from adaserve.producers.jobs import make_job
from adaserve.producers.results import JobResult


@dataclass
class KindTally:
    sent: int = 0
    dead_lettered: int = 0
    rejected: int = 0  # entries owed results that got all of them, each `rejected` with a reason
    owed_results: int = 0
    results: int = 0
    unaccounted: int = 0  # no dead letter, or fewer results than owed
    wrong: int = 0  # a result not `rejected`, without a reason, or a reason code other than the kind's
    reasons: Counter[str] = field(default_factory=Counter)


@dataclass
class FuzzReport:
    entries: int
    seed: int
    kinds: dict[str, dict[str, Any]]
    unaccounted: int
    wrong: int
    valid_before: dict[str, float]
    valid_during: dict[str, float]
    stalled: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _valid_stats(jobs: Sequence[JobResult], submitted: int) -> dict[str, float]:
    done = sum(j.completed for j in jobs)
    lat = [j.latency_ms for j in jobs if j.ok]
    return {"requests": float(submitted), "completed": float(done),
            "finish_rate": round(done / submitted, 4) if submitted else 0.0,
            "p50_ms": round(statistics.median(lat), 2) if lat else 0.0}


class FuzzRun:
    """``alive`` raises when a pipeline process died; ``progress`` gets the entries accounted for."""

    def __init__(self, settings: Settings, fuzzer: Fuzzer, *, model: str, inputs: Sequence[Mapping[str, np.ndarray]],
                 requests_per_job: int = 4, valid_every: int = 50, window: int = 2000, chunk: int = 250,
                 stall_s: float = 30.0, alive: Callable[[], None] = lambda: None,
                 progress: Callable[[int], None] = lambda n: None) -> None:
        self.settings, self.fuzzer, self.model, self.inputs = settings, fuzzer, model, list(inputs)
        self.k, self.valid_every, self.window, self.chunk = requests_per_job, valid_every, window, chunk
        self.stall_s, self.alive, self.progress = stall_s, alive, progress
        self.keys = Keys(settings.namespace)
        self.r: redis.Redis[bytes] = connect(settings)
        self.hostile: list[Hostile] = []
        self.dead: list[bool] = []
        self.got: list[int] = []
        self.by_entry: dict[bytes, int] = {}
        self.by_job: dict[str, int] = {}
        self.wrong: set[int] = set()
        self.reasons: list[str] = []
        self.accounted = 0
        self._dead_last = self._reply_last = b"0-0"
        self._valid_n = 0

    def _valid_job(self) -> Any:
        i = (self._valid_n * self.k) % max(len(self.inputs) - self.k, 1)
        self._valid_n += 1
        return make_job(self.model, self.inputs[i:i + self.k], 10_000.0, app="fuzz-valid")

    def run(self, entries: int, *, baseline_jobs: int = 20) -> FuzzReport:
        t0 = time.monotonic()
        with Client(self.settings) as client:
            before = client.submit_many([self._valid_job() for _ in range(baseline_jobs)])
            valid_before = _valid_stats([h.result(60) for h in before], baseline_jobs * self.k)
            during: list[JobResult] = []
            submitted = 0
            stalled = False
            sent = 0
            while sent < entries:
                n = min(self.chunk, entries - sent)
                self._send([self.fuzzer.next() for _ in range(n)])
                for _ in range(sent // self.valid_every, (sent + n) // self.valid_every):
                    client.submit(self._valid_job())
                    submitted += self.k
                sent += n
                during += client.poll(0)
                stalled = not self._account(sent - self.window)
                if stalled:
                    break
            if not stalled:
                stalled = not self._account(len(self.hostile))
            during += client.drain(timeout=60)
        return self._report(entries, valid_before, _valid_stats(during, submitted), stalled, time.monotonic() - t0)

    def _send(self, batch: list[Hostile]) -> None:
        with self.r.pipeline(transaction=False) as p:
            for h in batch:
                p.xadd(self.keys.jobs, h.fields)
            ids = p.execute()
        for h, eid in zip(batch, ids):
            i = len(self.hostile)
            self.hostile.append(h)
            self.dead.append(False)
            self.got.append(0)
            self.reasons.append("")
            self.by_entry[eid] = i
            if h.job_id:
                self.by_job[h.job_id] = i

    def _account(self, target: int) -> bool:
        """Read dead letters and results until ``target`` entries are accounted for; False when
        nothing moved for ``stall_s``."""
        last_move = time.monotonic()
        while True:
            self.alive()
            moved = self._read_dead() + self._read_replies()
            if self.accounted >= target:
                return True
            now = time.monotonic()
            if moved:
                last_move = now
            elif now - last_move > self.stall_s:
                return False
            if not moved:
                time.sleep(0.05)

    def _is_done(self, i: int) -> bool:
        return self.dead[i] and self.got[i] >= self.hostile[i].results

    def _read_dead(self) -> int:
        got = self.r.xread({self.keys.dead: self._dead_last}, count=5000)
        if not got:
            return 0
        rows = got[0][1]
        for _, f in rows:
            i = self.by_entry.get(f.get(b"entry", b""))
            if i is None or self.dead[i]:
                continue
            self.dead[i] = True
            self.reasons[i] = f.get(b"reason", b"").decode(errors="replace")
            if self._is_done(i):
                self.accounted += 1
        self._dead_last = rows[-1][0]
        self.r.xdel(self.keys.dead, *[eid for eid, _ in rows])
        self.progress(self.accounted)
        return len(rows)

    def _read_replies(self) -> int:
        stream = self.keys.reply(self.fuzzer.reply_to)
        got = self.r.xread({stream: self._reply_last}, count=5000)
        if not got:
            return 0
        rows = got[0][1]
        for _, f in rows:
            try:  # a rejection's results come as one entry per job, in any reply form
                maps = read_reply_maps(f[b"m"])
            except InvalidMessage:
                continue
            for body in maps:
                i = self.by_job.get(body.get("job_id", ""))
                if i is None:
                    continue
                want = self.hostile[i].reason
                code = str(body.get("reason", "")).split(":", 1)[0]
                if body.get("status") != "rejected" or not code or (want is not None and code != want):
                    self.wrong.add(i)
                was = self._is_done(i)
                self.got[i] += 1
                if not was and self._is_done(i):
                    self.accounted += 1
        self._reply_last = rows[-1][0]
        self.r.xdel(stream, *[eid for eid, _ in rows])
        self.progress(self.accounted)
        return len(rows)

    def _report(self, entries: int, before: dict[str, float], during: dict[str, float], stalled: bool,
                seconds: float) -> FuzzReport:
        tallies: dict[str, KindTally] = {}
        for i, h in enumerate(self.hostile):
            t = tallies.setdefault(h.kind, KindTally())
            t.sent += 1
            t.dead_lettered += self.dead[i]
            t.owed_results += h.results
            t.results += self.got[i]
            t.rejected += bool(h.results) and self.got[i] >= h.results
            t.unaccounted += not self._is_done(i)
            if self.dead[i]:
                t.reasons[self.reasons[i]] += 1
                if h.reason is not None and self.reasons[i] != h.reason:
                    self.wrong.add(i)
        for i in self.wrong:
            tallies[self.hostile[i].kind].wrong += 1
        kinds: dict[str, dict[str, Any]] = {
            kind: {"sent": t.sent, "rejected": t.rejected, "dead_lettered": t.dead_lettered,
                   "owed_results": t.owed_results, "results": t.results, "wrong": t.wrong,
                   "unaccounted": t.unaccounted, "reasons": dict(t.reasons)}
            for kind, t in sorted(tallies.items())}
        self.r.close()
        return FuzzReport(entries=entries, seed=self.fuzzer.seed, kinds=kinds,
                          unaccounted=sum(t.unaccounted for t in tallies.values()), wrong=len(self.wrong),
                          valid_before=before, valid_during=during, stalled=stalled, seconds=round(seconds, 1))
