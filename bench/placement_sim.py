"""The placement simulator: one model, a GPU pool and a CPU pool, a constant arrival rate.

Truth comes from measured profiles (``docs/gpu-h100.json``: each part and the whole model on the
GPU and on the host's CPU, interpolated between the batch sizes profiled) with a lognormal jitter;
the hand-over of the intermediate tensor costs what it was measured to cost through Redis. The
policies see only what the live planner sees: the batch former takes what waits (up to the size
chosen for the measured rate) when the first pool of the plan has a free slot, and HEFT plans
from histories seeded from the same profile and updated from every finished batch, so its
prediction error is a real one. Deterministic arrivals every ``1/rate`` s, as in the paper.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adaserve.planner.heft import WHOLE, Choice, Histories, Key, Options, Placer, batch_for_rate

POLICIES = ("gpu-only", "cpu-only", "static-split", "heft")
Stages = tuple[tuple[str, str], ...]  # (part, pool)
FIXED: dict[str, Stages] = {"gpu-only": ((WHOLE, "gpu"),), "cpu-only": ((WHOLE, "cpu"),),
                            "static-split": (("part1", "gpu"), ("part2", "cpu"))}


@dataclass(frozen=True)
class Setup:
    model: str
    truth: Histories  # seeded from the profile: the times the devices take
    handover: Callable[[int], float]  # seconds to hand a batch of n's tensor to the next pool
    max_batch: int = 32
    cpu_slots: int = 1
    jitter: float = 0.05
    seconds: float = 3.0
    seed: int = 0


@dataclass
class Run:
    policy: str
    rate: float
    latencies: list[float] = field(default_factory=list)
    left: int = 0  # requests arrived and not done when arrivals stopped
    left_half: int = 0  # the same halfway
    batches: int = 0
    split_batches: int = 0
    gpu_whole_s: float = 0.0  # what all batches would have taken whole on the GPU
    offloaded_s: float = 0.0  # GPU time the split batches did not take there
    sizes: list[int] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)  # measured - predicted finish (heft)
    exec_s: list[float] = field(default_factory=list)
    explored: int = 0

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies[len(self.latencies) // 10:])  # after the first tenth (warm-up)
        return xs[min(int(q * len(xs)), len(xs) - 1)] if xs else math.inf

    def sustained(self, max_batch: int) -> bool:
        """The work in the system did not grow over the second half of the run (beyond two batches'
        worth of noise): a rate past capacity grows it linearly."""
        return self.left - self.left_half <= 2 * max_batch and bool(self.latencies)

    @property
    def offload(self) -> float:
        return self.offloaded_s / self.gpu_whole_s if self.gpu_whole_s else 0.0


def _t(h: Histories, model: str, part: str, kind: str, b: int) -> float:
    est = h.predict(Key(model, part, kind), b)
    if est is None:
        raise KeyError(f"the profile has no {part} of {model} on {kind}")
    return est.seconds


def simulate(setup: Setup, policy: str, rate: float, placer: Placer | None = None) -> Run:
    """One run at ``rate`` requests/s; ``placer`` (heft) carries its histories between runs."""
    m, truth, rng = setup.model, setup.truth, random.Random(setup.seed)
    slots = {"gpu": 1, "cpu": setup.cpu_slots}
    busy = {"gpu": [0.0], "cpu": [0.0] * setup.cpu_slots}  # per server, the time it is free
    waiting: dict[str, deque[tuple[str, int, list[float], float]]] = {"gpu": deque(), "cpu": deque()}
    run = Run(policy, rate)
    n = int(rate * setup.seconds)
    arrivals = [i / rate for i in range(n)]
    queue: deque[float] = deque()
    events: list[tuple[float, int, str, Any]] = []
    seq = 0
    for t in arrivals:
        heapq.heappush(events, (t, seq := seq + 1, "arrive", t))
    heapq.heappush(events, (setup.seconds, seq := seq + 1, "end", None))
    heapq.heappush(events, (setup.seconds / 2, seq := seq + 1, "half", None))
    # the batch size for the rate, from the slowest stage of the fixed plans (heft: its own rule)
    fixed = FIXED.get(policy, FIXED["gpu-only"])
    bstar_fixed = batch_for_rate(rate, lambda b: max(_t(truth, m, part, pool, b) for part, pool in fixed),
                                 setup.max_batch, 1)
    pending: dict[str, tuple[Stages, list[float], int, float, float | None]] = {}

    def jitter(x: float) -> float:
        return x * math.exp(rng.gauss(0.0, setup.jitter) - setup.jitter ** 2 / 2)

    def free(pool: str, now: float) -> int | None:
        i = min(range(len(busy[pool])), key=busy[pool].__getitem__)
        return i if busy[pool][i] <= now + 1e-12 else None

    def start(pool: str, server: int, bid: str, part: str, b: int, now: float) -> None:
        nonlocal seq
        d = jitter(_t(truth, m, part, pool, b))
        busy[pool][server] = now + d
        heapq.heappush(events, (now + d, seq := seq + 1, "done", (bid, pool, part, b, d)))

    def plan(b: int, now: float) -> tuple[Stages, Choice | None]:
        if placer is None:
            return FIXED[policy], None
        c = placer.plan(m, b, {p: (slots[p], free(p, now) is not None) for p in slots}, len(queue) - b, now)
        assert c is not None
        return tuple((s.part, s.pool) for s in c.stages), c

    now = 0.0
    while events:
        now, _, kind, data = heapq.heappop(events)
        if kind == "arrive":
            queue.append(data)
            if placer is not None:
                placer.arrived(m, now)
        elif kind == "done":
            bid, pool, _, b, d = data
            stages, arrived, idx, _, predicted = pending[bid]
            if placer is not None:
                placer.finished(bid if idx == 0 else f"{bid}.0", pool, m, None if len(stages) == 1 else idx + 1, b, d, now)
            if idx + 1 < len(stages):
                nxt_part, nxt_pool = stages[idx + 1]
                pending[bid] = (stages, arrived, idx + 1, now, predicted)
                heapq.heappush(events, (now + setup.handover(b), seq := seq + 1, "handed", (bid, nxt_pool, nxt_part, b)))
            else:
                run.latencies += [now - a for a in arrived]
                if predicted is not None:
                    run.errors.append(now - predicted)
                del pending[bid]
        elif kind == "handed":
            bid, pool, _, b = data
            waiting[pool].append((bid, b, [], now))
        for pool in ("gpu", "cpu"):  # forwarded parts waiting for a server, in arrival order
            while waiting[pool] and (srv := free(pool, now)) is not None:
                bid, b, _, _ = waiting[pool].popleft()
                start(pool, srv, bid, pending[bid][0][pending[bid][2]][0], b, now)
        while queue:
            if placer is not None:
                bstar = placer.batch_size(m, now, setup.max_batch)
            else:
                bstar = bstar_fixed
            b = min(len(queue), bstar)
            stages, choice = plan(b, now)
            first = stages[0][1]
            srv = free(first, now)
            if srv is None:
                break
            items = [queue.popleft() for _ in range(b)]
            bid = f"b{run.batches}"
            run.batches += 1
            run.sizes.append(b)
            run.explored += bool(choice is not None and choice.explored)
            whole = _t(truth, m, WHOLE, "gpu", b)
            run.gpu_whole_s += whole
            if len(stages) > 1:
                run.split_batches += 1
                run.offloaded_s += whole - _t(truth, m, stages[0][0], "gpu", b)
            if placer is not None and choice is not None:
                placer.dispatched(bid, m, choice, b)
            pending[bid] = (stages, items, 0, now, None if choice is None else choice.finish)
            start(first, srv, bid, stages[0][0], b, now)
        if kind in ("half", "end"):  # what arrived and is not done: bounded when the rate is sustained
            left = len(queue) + sum(len(p[1]) for p in pending.values())
            if kind == "half":
                run.left_half = left
            else:
                run.left = left
    return run


def heft_placer(setup: Setup, seed_from: Histories, explore: float = 2.0) -> Placer:
    """A placer whose histories start from ``seed_from``'s figures (copied, as seeds)."""
    p = Placer(options=Options(explore=explore))
    for key, size, stat in seed_from.rows():
        p.histories.seed(key, size, stat.mean)
    p.transfer(setup.model).fixed_s = setup.handover(0)
    p.transfer(setup.model).per_byte_s = setup.handover(1) - setup.handover(0)
    return p
