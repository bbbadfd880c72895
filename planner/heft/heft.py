"""HEFT placement of one batch (StarONNX Sec. 5, StarPU's ``dmda``-style earliest finish), pure.

Candidates: the whole model on any pool that serves it; part 1 on a pool of the ``main`` kind
(the GPU) then part 2 on a pool of another kind, the tensor handed over through Redis; the reverse
(part 1 off the main kind) only when ``reverse`` is set, which the operator does once it was
measured worthwhile (the paper: the CPU should not take the first part).

Each candidate gets a predicted finish from the histories and the pools' availability. A batch's
own finish alone would never favour the split (part 1 + hand-over + part 2 on the slower device
ends after the whole on the faster one); what the split buys is the main pool's time, free sooner
for the requests queued behind. So the plan compared is *this batch and the backlog behind it*:
``max(own finish, main pool's release + backlog)``, the backlog being the main pool's predicted
time for the requests still waiting. Idle (no backlog): everything stays whole on the GPU. As the
backlog grows the split wins as long as the second pool keeps up, and stops winning when its own
queue makes this batch finish later than the GPU would have.

Guard: a plan whose first stage (the whole model, or part 1) runs more than ``slack`` times
longer there than on the fastest device for the same stage is not taken: a much slower device would raise the maximum
latency, the metric served, for no gain the backlog could justify.

Exploration (StarPU calibrates a history before trusting it): among the admissible plans, one
resting on an untrusted history is chosen on purpose when its objective is within ``explore``
times the best's (measured from ``now``), fewest measurements first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from adaserve.planner.heft.history import WHOLE, Estimate, Histories, Key

PART1, PART2 = "part1", "part2"


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """A pool serving the model: its device kind, when it is free, whether it has a free slot now."""

    kind: str
    available: float
    free: bool = True


@dataclass(frozen=True, slots=True)
class Options:
    main: str = "gpu"  # the device kind the backlog is measured on, and part 1's kind
    slack: float = 3.0
    explore: float = 2.0  # 0 or below: never explore
    reverse: bool = False


@dataclass(frozen=True, slots=True)
class Stage:
    pool: str
    part: str
    start: float
    end: float
    estimate: Estimate


@dataclass(frozen=True, slots=True)
class Choice:
    stages: tuple[Stage, ...]
    finish: float  # this batch's predicted finish
    objective: float  # max(finish, main release + backlog)
    transfer_s: float = 0.0
    explored: bool = False
    considered: tuple[tuple[str, float, float], ...] = field(default=())  # (label, finish, objective)

    @property
    def split(self) -> bool:
        return len(self.stages) > 1

    @property
    def pool(self) -> str:
        return self.stages[0].pool

    @property
    def next_pool(self) -> str | None:
        return self.stages[1].pool if self.split else None

    @property
    def label(self) -> str:
        return "->".join(f"{s.part}@{s.pool}" for s in self.stages)

    @property
    def trusted(self) -> bool:
        return all(s.estimate.trusted for s in self.stages)

    @property
    def measured(self) -> int:
        return min(s.estimate.measured for s in self.stages)


def choose(model: str, size: int, pools: Mapping[str, PoolInfo], histories: Histories,
           transfer: Callable[[int], float], backlog_s: float, now: float,
           options: Options = Options(), first: str | None = None) -> Choice | None:
    """The plan for a batch of ``size`` of ``model``; None when no history covers any plan.
    ``first``: only the plans whose first stage runs on that pool (a batch already formed for it)."""
    plans: list[Choice] = []
    for name, info in pools.items():
        one = _stage(histories, model, WHOLE, name, info, max(now, info.available), size)
        if one is not None:
            plans.append(_plan((one,), 0.0, pools, backlog_s, now, options))
    for one_pool, a in pools.items():
        for second, b in pools.items():
            if one_pool == second or a.kind == b.kind or (a.kind != options.main and not options.reverse):
                continue
            s1 = _stage(histories, model, PART1, one_pool, a, max(now, a.available), size)
            if s1 is None:
                continue
            x = transfer(size)
            s2 = _stage(histories, model, PART2, second, b, max(s1.end + x, b.available, now), size)
            if s2 is not None:
                plans.append(_plan((s1, s2), x, pools, backlog_s, now, options))
    if not plans:
        return None
    fastest: dict[str, float] = {}  # per part: the same work on its fastest device
    for p in plans:
        s0 = p.stages[0]
        fastest[s0.part] = min(fastest.get(s0.part, s0.estimate.seconds), s0.estimate.seconds)
    fit = [p for p in plans if p.stages[0].estimate.seconds <= options.slack * fastest[p.stages[0].part] + 1e-12]
    if first is not None:  # the batch is formed for ``first`` (HEFT chose it): the best of what starts there
        fit = [p for p in fit if p.pool == first] or [p for p in plans if p.pool == first]
        if not fit:
            return None
    fit.sort(key=lambda p: (p.objective, p.finish, len(p.stages), p.label))
    best = fit[0]
    considered = tuple((p.label, p.finish, p.objective) for p in fit)
    if options.explore > 0:
        budget = now + options.explore * (best.objective - now)
        untried = [p for p in fit if not p.trusted and p.objective <= budget + 1e-12]
        if untried and best.trusted:
            pick = min(untried, key=lambda p: (p.measured, p.objective, p.label))
            return _with(pick, considered, explored=True)
    return _with(best, considered, explored=False)


def _stage(h: Histories, model: str, part: str, pool: str, info: PoolInfo, start: float, size: int) -> Stage | None:
    est = h.predict(Key(model, part, info.kind), size)
    if est is None:
        return None
    return Stage(pool, part, start, start + est.seconds, est)


def _plan(stages: tuple[Stage, ...], x: float, pools: Mapping[str, PoolInfo], backlog_s: float, now: float,
          o: Options) -> Choice:
    finish = stages[-1].end
    mains = [n for n, p in pools.items() if p.kind == o.main]
    release = min((pools[n].available for n in mains), default=now)
    for s in stages:  # the main pool this plan occupies is free once its stage is over
        if pools[s.pool].kind == o.main:
            others = [max(pools[n].available, now) for n in mains if n != s.pool]
            release = min([s.end, *others])
    release = max(release, now)
    objective = max(finish, release + backlog_s) if mains else finish
    return Choice(stages, finish, objective, x)


def _with(c: Choice, considered: tuple[tuple[str, float, float], ...], *, explored: bool) -> Choice:
    return Choice(c.stages, c.finish, c.objective, c.transfer_s, explored, considered)
