"""The placement state the planner keeps between batches (no clock, no I/O: times are passed in).

``Placer`` holds the histories, the hand-over cost, each pool's clock of in-flight batches and
each model's arrival rate. The live planner and the placement simulator drive the same object:
``plan`` before a batch goes out, ``dispatched`` when it did, ``finished`` for every
``batch.finished`` (which returns the predicted and measured finish, for telemetry).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from adaserve.planner.heft.clock import PoolClock
from adaserve.planner.heft.heft import PART1, PART2, Choice, Options, PoolInfo, choose
from adaserve.planner.heft.history import WHOLE, Histories, Key, Transfer
from adaserve.planner.heft.rate import RateMeter, batch_for_rate

RECHOOSE, RECHOOSE_S = 0.05, 0.25  # the batch size follows the rate: a 5% move, or every 250 ms


def kind_of(pool: str, kinds: Mapping[str, str] | None = None) -> str:
    """A pool's device kind: as configured, else ``gpu`` for a ``gpu*`` pool and ``cpu`` otherwise."""
    if kinds and pool in kinds:
        return kinds[pool]
    return "gpu" if pool.startswith("gpu") else "cpu"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A batch that finished its last part: what was predicted and what happened (seconds)."""

    batch_id: str
    model: str
    plan: str
    size: int
    predicted_finish: float
    finish: float

    @property
    def error(self) -> float:
        return self.finish - self.predicted_finish


@dataclass
class _Sent:
    model: str
    choice: Choice
    size: int
    part1_end: float | None = None  # measured, for the hand-over time
    second_idle: bool = False  # the second pool had nothing ahead when part 1 was planned


@dataclass
class Placer:
    options: Options = field(default_factory=Options)
    kinds: Mapping[str, str] = field(default_factory=dict)
    histories: Histories = field(default_factory=Histories)
    transfers: dict[str, Transfer] = field(default_factory=dict)
    clocks: dict[str, PoolClock] = field(default_factory=dict)
    rates: dict[str, RateMeter] = field(default_factory=dict)
    sent: dict[str, _Sent] = field(default_factory=dict)
    sizes: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # model -> (when, rate, size)
    cap: int = 4096  # batches remembered (a lost batch.finished must not grow this forever)

    def kind(self, pool: str) -> str:
        return kind_of(pool, self.kinds)

    def transfer(self, model: str) -> Transfer:
        return self.transfers.setdefault(model, Transfer())

    def clock(self, pool: str, slots: int = 1) -> PoolClock:
        c = self.clocks.setdefault(pool, PoolClock(slots))
        c.slots = max(slots, 1)
        return c

    # -- decisions -------------------------------------------------------------------------------
    def plan(self, model: str, size: int, pools: Mapping[str, tuple[int, bool]], backlog: int, now: float,
             first: str | None = None, delays: Mapping[str, float] | None = None) -> Choice | None:
        """HEFT over ``pools`` (name -> (slots, has a free slot now)); ``backlog``: requests of
        ``model`` still waiting once this batch is out; ``first``: only plans starting there;
        ``delays``: each pool's measured seconds from dispatch to start (the hop through Redis
        and the worker's own work around the runner), below which nothing starts there."""
        d = delays or {}
        infos = {p: PoolInfo(self.kind(p), max(self.clock(p, slots).available(now), now + d.get(p, 0.0)), free)
                 for p, (slots, free) in pools.items()}
        return choose(model, size, infos, self.histories, self.transfer(model).predict, self.backlog_s(model, size, backlog),
                      now, self.options, first=first)

    def backlog_s(self, model: str, size: int, waiting: int) -> float:
        """The main kind's predicted time for ``waiting`` requests in batches of ``size``."""
        if waiting <= 0:
            return 0.0
        est = self.histories.predict(Key(model, WHOLE, self.options.main), max(size, 1))
        if est is None:
            return 0.0
        full, rest = divmod(waiting, max(size, 1))
        tail = self.histories.predict(Key(model, WHOLE, self.options.main), rest) if rest else None
        return full * est.seconds + (tail.seconds if tail is not None else 0.0)

    def batch_size(self, model: str, now: float, max_batch: int, slots: int = 1) -> int:
        """The batch size for the model's current arrival rate on the main kind, from the linear
        batch-latency model of its history (``max_batch`` while nothing is known); chosen again
        when the rate moved by more than ``RECHOOSE`` or ``RECHOOSE_S`` passed."""
        rate = self.rates.get(model, RateMeter()).rate(now)
        last = self.sizes.get(model)
        if last is not None and now - last[0] < RECHOOSE_S and abs(rate - last[1]) <= RECHOOSE * max(last[1], 1e-9):
            return min(last[2], max_batch)
        fit = self.histories.linear(Key(model, WHOLE, self.options.main))
        if rate <= 0 or fit is None:
            return max_batch
        c0, c1 = fit
        b = batch_for_rate(rate, lambda k: c0 + c1 * k, max_batch, slots)
        self.sizes[model] = (now, rate, b)
        return b

    def arrived(self, model: str, now: float, n: int = 1) -> None:
        self.rates.setdefault(model, RateMeter()).arrived(now, n)

    # -- what happened ----------------------------------------------------------------------------
    def dispatched(self, batch_id: str, model: str, choice: Choice, size: int) -> None:
        first = choice.stages[0]
        self.clock(first.pool).add(batch_id, first.start, first.end - first.start)
        idle = False
        if choice.split:
            second = choice.stages[1]
            idle = len(self.clock(second.pool)) == 0
            self.clock(second.pool).add(batch_id + ".0", second.start, second.end - second.start)
        self.sent[batch_id] = _Sent(model, choice, size, second_idle=idle)
        while len(self.sent) > self.cap:
            old = next(iter(self.sent))
            for c in self.clocks.values():
                c.remove(old)
                c.remove(old + ".0")
            del self.sent[old]

    def finished(self, batch_id: str, pool: str, model: str, part: int | None, size: int, exec_s: float,
                 end: float, *, learn: bool = True) -> Outcome | None:
        """Learn from a ``batch.finished`` (``end``: when it finished); the outcome once the
        batch's last part is done and this planner had sent it."""
        if learn:
            self.histories.observe(Key(model, WHOLE if part is None else f"part{part}", self.kind(pool)), size, exec_s)
        root = batch_id.split(".", 1)[0]
        for c in self.clocks.values():
            c.remove(batch_id)
        s = self.sent.get(root)
        if s is None:
            return None
        if part == 1:
            s.part1_end = end
            return None
        if part is not None and part >= 2 and s.part1_end is not None and s.second_idle:
            # the second pool had nothing ahead: the gap from part 1's end to part 2's start is the hand-over
            self.transfer(model).observe(size, max(end - exec_s - s.part1_end, 0.0))
        del self.sent[root]
        return Outcome(root, s.model, s.choice.label, s.size, s.choice.finish, end)


__all__ = ["PART1", "PART2", "Outcome", "Placer", "kind_of"]
