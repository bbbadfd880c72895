"""ORLOJ over groups of applications whose requests cost alike.

ORLOJ's estimate for a request assumes the rest of its batch is drawn from every app the model
serves (Sec. 4.3), and a batch runs at the pace of its slowest member (Eq. 3-9). Where the apps'
requests cost about the same that loses nothing. Where one app's requests cost several times
another's (a language model's 4-token and 32-token generations), a cheap request's estimate for
any but the smallest batch is the expensive app's, so its batches stay small, and when the two do
share a batch the cheap requests wait the expensive one's time (docs/orloj.md, thirtieth and
thirty-first sessions).

``AppGroups`` measures what each app's batches of that app alone cost against the batches of the
same size of the app with the most (``costs``). Apps within ``ratio`` of each other form one
group; when there are two groups or more, each group is served by its own ORLOJ (its own queues,
histograms and batch-latency fit, seeded with what its apps' recent batches and samples taught),
and a free slot takes the batch of the group with the most urgent request, as the planner
arbitrates between models. Requests of apps without enough batches yet, and those
filed before a regrouping, stay where they were filed. With one group (one app, or apps that cost
alike: every workload of the paper's tables) nothing is split, and every call goes to the one
ORLOJ that the plain policy would be: its decisions are unchanged.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable, Sequence

from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.orloj.scheduler import OrlojScheduler

__all__ = ["AppGroups", "group_apps"]

WINDOW = 64  # an app's recent batches and samples kept to seed a new group
PER_SIZE = 16  # an app's recent batches of one size kept to judge its cost
MIN_PER_SIZE = 3  # batches of a size before it counts (the median of fewer is one stall)
MAX_APPS = 64  # apps measured; an app past them (app names are the producers') stays in the shared ORLOJ


def group_apps(costs: dict[str, float], ratio: float) -> list[tuple[str, ...]]:
    """Apps grouped by their median cost: sorted, each group spans at most ``ratio`` from its
    cheapest app to its dearest."""
    out: list[list[str]] = []
    low = 0.0
    for app, c in sorted(costs.items(), key=lambda x: (x[1], x[0])):
        if out and c <= low * ratio:
            out[-1].append(app)
        else:
            out.append([app])
            low = c
    return [tuple(g) for g in out]


class AppGroups(Scheduler):
    name = "orloj"
    takes_samples = True

    def __init__(self, make: Callable[[], OrlojScheduler], *, ratio: float = 3.0, min_batches: int = 8,
                 regroup_s: float = 1.0, model: str = "") -> None:
        if not ratio > 1.0:
            raise ValueError("ratio must be above 1")
        if min_batches < 1 or not regroup_s >= 0:
            raise ValueError("min_batches must be positive and regroup_s not negative")
        self._make, self.ratio, self.min_batches, self.regroup_s = make, ratio, min_batches, regroup_s
        self.model = model
        self.first = make()  # every app's until apps are told apart; the only one while there is one group
        self._of: dict[str, OrlojScheduler] = {}  # app -> its group's ORLOJ (absent: ``first``)
        self._live: list[OrlojScheduler] = [self.first]  # the groups' and those still holding requests
        self.groups: list[tuple[str, ...]] = []  # the current split; empty while there is one group
        self._runs: dict[str, dict[int, deque[float]]] = {}  # app -> size -> its recent batches' seconds
        self._proposed: list[tuple[str, ...]] | None = None
        self._fed: dict[str, deque[Feedback]] = {}  # app -> its recent batches of it alone
        self._samples: dict[str, deque[float]] = {}  # app -> its samples (``add_sample``), to seed a group
        self._alone: dict[str, deque[float]] = {}  # app -> its requests' times alone, those and batches of one
        self._apps: set[str] = set()  # the apps measured (at most ``MAX_APPS``)
        self._grouped_at = -float("inf")
        self._now = 0.0
        self.regroups = 0
        self._events: list[tuple[str, dict[str, object]]] = []

    def _sched(self, app: str) -> OrlojScheduler:
        return self._of.get(app, self.first)

    def _measured(self, app: str) -> bool:
        """Whether ``app`` is measured: the first ``MAX_APPS`` apps seen are."""
        if app in self._apps:
            return True
        if len(self._apps) < MAX_APPS:
            self._apps.add(app)
            return True
        return False

    # -- the Scheduler interface ----------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(s) for s in self._live)

    def add(self, item: Pending, now: float) -> None:
        self._now = max(self._now, now)
        self._sched(item.app).add(item, now)

    def add_many(self, items: Sequence[Pending], now: float) -> None:
        if items:
            self._now = max(self._now, now)
            self._sched(items[0].app).add_many(items, now)

    def expire(self, now: float) -> list[Pending]:
        self._now = max(self._now, now)
        out: list[Pending] = []
        for s in self._live:
            out += s.expire(now)
        self._retire()
        return out

    def earliest_deadline(self) -> float | None:
        got = [d for d in (s.earliest_deadline() for s in self._live if len(s)) if d is not None]
        return min(got) if got else None

    def next_batch(self, now: float, max_size: int) -> Decision:
        if len(self._live) == 1:
            return self.first.next_batch(now, max_size)
        self._now = max(self._now, now)
        expired: list[Pending] = []
        urgent = sorted((d, i) for i, s in enumerate(self._live) if len(s)
                        for d in (s.earliest_deadline(),) if d is not None)
        for _, i in urgent:  # the most urgent group's batch; one that holds back gives way
            d = self._live[i].next_batch(now, max_size)
            expired += d.expired
            if d.batch:
                d.expired = expired
                return d
        self._retire()
        return Decision(expired=expired)

    def observe(self, feedback: Feedback) -> None:
        apps = feedback.apps
        app = apps[0] if apps else ""
        k = feedback.size
        if feedback.request_exec_s and len(feedback.request_exec_s) == len(apps):
            for a, x in zip(apps, feedback.request_exec_s):  # requests timed alone (a batch of one)
                if self._measured(a):
                    self._alone.setdefault(a, deque(maxlen=WINDOW)).append(x)
        if apps and k > 0 and apps.count(app) == len(apps) and self._measured(app):
            self._runs.setdefault(app, {}).setdefault(k, deque(maxlen=PER_SIZE)).append(feedback.exec_s)
            self._fed.setdefault(app, deque(maxlen=WINDOW)).append(feedback)
        self._sched(app).observe(feedback)
        if self._now - self._grouped_at >= self.regroup_s:
            self._regroup()

    def costs(self) -> dict[str, float]:
        """Each app's cost on one scale: its batches of it alone against those of the app with
        the most, size by size (the median of the ratios of their median times at the sizes both
        ran often enough; batches measured in the same spell of the machine, so a slower spell
        moves every app alike), for the apps with ``min_batches`` such batches when two have;
        else the median time of its requests alone (the workers' and the profiler's re-runs,
        batches of one), for the apps with ``min_batches`` of those."""
        by_batches = self._by_batches()
        if len(by_batches) > 1:
            return by_batches
        alone = {a: statistics.median(d) for a, d in self._alone.items() if len(d) >= self.min_batches}
        return alone if len(alone) > 1 else {}

    def _by_batches(self) -> dict[str, float]:
        counts = {a: sum(len(d) for d in runs.values()) for a, runs in self._runs.items()}
        if len(counts) < 2:
            return {}
        ref = max(counts, key=lambda a: (counts[a], a))
        mine = {k: statistics.median(d) for k, d in self._runs[ref].items() if len(d) >= MIN_PER_SIZE}
        out: dict[str, float] = {}
        for app, runs in self._runs.items():
            ratios, seen = [], 0
            for k, d in runs.items():
                if len(d) >= MIN_PER_SIZE and mine.get(k, 0.0) > 0:
                    ratios.append(statistics.median(d) / mine[k])
                    seen += len(d)
            if ratios and seen >= self.min_batches:
                out[app] = statistics.median(ratios)
        return out

    def add_sample(self, app: str, seconds: float) -> None:
        if self._measured(app):
            self._samples.setdefault(app, deque(maxlen=WINDOW)).append(seconds)
            self._alone.setdefault(app, deque(maxlen=WINDOW)).append(seconds)
        self._sched(app).add_sample(app, seconds)
        if self._now - self._grouped_at >= self.regroup_s:
            self._regroup()

    def drain_events(self) -> list[tuple[str, dict[str, object]]]:
        out, self._events = self._events, []
        return out

    def diagnose(self) -> dict[str, object]:
        out = self.first.diagnose()
        if self.groups:
            out["groups"] = ["+".join(g) for g in self.groups]
        return out

    # -- grouping -------------------------------------------------------------------------------
    def _regroup(self) -> None:
        self._grouped_at = self._now
        costs = self.costs()
        groups = group_apps(costs, self.ratio)
        if len(groups) < 2:
            groups = []
        if groups == self.groups:
            self._proposed = None
            return
        if groups != self._proposed:  # a new split must hold for two checks: one spell of noise is not one
            self._proposed = groups
            return
        self._proposed = None
        self.groups, self.regroups = groups, self.regroups + 1
        self._events.append(("orloj.grouped", {"model": self.model, "groups": ["+".join(g) for g in groups],
                                               "costs": {a: round(c, 4) for a, c in costs.items()}}))
        members: dict[int, set[str]] = {}
        for app, sched in self._of.items():
            members.setdefault(id(sched), set()).add(app)
        kept = {frozenset(apps): self._of[next(iter(apps))] for apps in members.values()}
        self._of = {}
        for g in groups:
            s = kept.get(frozenset(g))
            if s is not None:  # the same apps as before: their ORLOJ goes on
                self._of.update({app: s for app in g})
                continue
            s = self._make()
            for app in g:  # what this group's apps taught the shared ORLOJ, taught again
                for x in self._samples.get(app, ()):
                    s.add_sample(app, x)
            for fb in sorted((f for app in g for f in self._fed.get(app, ())),
                             key=lambda f: f.finished_s if f.finished_s is not None else 0.0):
                s.observe(fb)
            self._of.update({app: s for app in g})
            self._live.append(s)
        self._retire()

    def _retire(self) -> None:
        """Drop the ORLOJs of old groups once they hold nothing (``first`` stays: apps without
        a group yet go there)."""
        if len(self._live) == 1:  # one ORLOJ, as with one app: nothing to drop, every step
            return
        used = {id(s) for s in self._of.values()}
        self._live = [s for s in self._live if s is self.first or id(s) in used or len(s)]
