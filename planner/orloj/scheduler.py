"""ORLOJ's scheduler (Algorithm 1) behind the planner's ``Scheduler`` interface.

Each request sits in the queue of every batch size whose expected latency still lets it meet its
deadline. When a slot frees: requests whose time ran out for a size leave that size's queue (and
expire when no size is left); the candidate size is the first, by (earliest deadline, size)
descending, whose queue holds at least that many requests; the batch is that queue's top
requests by the score of Eq. (2).

Time is kept relative to a base so that ``e^{b t}`` and ``e^{-b D}`` stay in range however long
the planner runs (Sec. 4.4): when ``b (t - base)`` passes ``rebase_exponent`` the base moves to
``t`` and every stored ``alpha`` is multiplied by ``e^{b shift}`` (Algorithm 1, lines 2-4). Apart
from that, a request's score coefficients change only at its milestones (lines 5-9), and only
the queue a batch is taken from needs them current, so the others catch up when next chosen.

Scores are computed from each group's segments (a group: one app's row of one generation of
tables), for the members of the one queue a batch is ranked in. New distributions and fits
(``refresh``) make a new generation for requests that arrive afterwards: re-placing every
pending request would cost O(pending x sizes) on the planner's loop, and they leave within one
SLO anyway. A run keeps a reference to its own group, so an old generation is dropped with its
last run.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.orloj.batch_latency import BatchLatencyFit
from adaserve.planner.orloj.distributions import ExecDistributions
from adaserve.planner.orloj.queues import Group, Run, SizeQueues
from adaserve.planner.orloj.tables import BatchTables

__all__ = ["DEFAULT_SIZES", "SIZE_RULES", "OrlojScheduler"]

DEFAULT_SIZES = tuple(range(1, 17))
SIZE_RULES = ("largest", "urgent")


class OrlojScheduler(Scheduler):
    name = "orloj"
    takes_samples = True

    def __init__(self, *, sizes: tuple[int, ...] = DEFAULT_SIZES, b: float = 0.1,
                 distributions: ExecDistributions | None = None, latency: BatchLatencyFit | None = None,
                 refresh_every: int = 200, refit_tolerance: float = 0.05, rebase_exponent: float = 200.0,
                 class_cost: float = 1.0, score_bins: int = 12, min_refresh_s: float = 0.0,
                 size_rule: str = "largest", size_margins: bool = True) -> None:
        if not sizes or any(k < 1 for k in sizes) or len(set(sizes)) != len(sizes):
            raise ValueError("sizes must be distinct positive batch sizes")
        if not b > 0 or not 1.0 <= rebase_exponent <= 600.0:
            raise ValueError("b must be positive and rebase_exponent in [1, 600]")
        if refresh_every < 1 or score_bins < 1:
            raise ValueError("refresh_every and score_bins must be positive")
        if not min_refresh_s >= 0:
            raise ValueError("min_refresh_s must not be negative")
        if size_rule not in SIZE_RULES:
            raise ValueError(f"size_rule must be one of {', '.join(SIZE_RULES)}")
        self.size_rule = size_rule
        # Each size's estimate corrected by what the shared line misses it by (``BatchLatencyFit.margin``).
        self.size_margins = size_margins
        self.sizes = tuple(sorted(sizes))
        self.b = b
        self.dists = distributions if distributions is not None else ExecDistributions()
        self.fit = latency if latency is not None else BatchLatencyFit()
        self.refresh_every, self.refit_tolerance = refresh_every, refit_tolerance
        # A refresh costs ~12 ms of the planner's loop for 20 sizes; live, noisy fits crossed the
        # tolerance every few batches and stalled dispatch five times a second.
        self.min_refresh_s = min_refresh_s
        self._refreshed_at = -math.inf
        self.rebase_exponent, self.class_cost, self.score_bins = rebase_exponent, class_cost, score_bins
        self._groups: dict[str, Group] = {}  # app -> its group in the current generation of tables
        self.tables = self._tables()
        self.q = SizeQueues(len(self.sizes))
        self._keys = itertools.count()
        self._doomed: list[Pending] = []
        # Runs of requests that share app, deadline and class (a job's), filed one run each.
        self._staged: list[list[Pending]] = []
        self._staged_n = 0
        self._base: float | None = None
        self._now = 0.0
        self.rebases = 0
        self.refreshes = 0

    def _tables(self) -> BatchTables:
        self._groups = {}  # the runs filed on the old ones keep theirs
        margins = self.fit.margins(self.sizes) if self.size_margins else ()
        return BatchTables(self.dists.snapshot, self.fit.c0, self.fit.c1, self.sizes, self.b, self.score_bins, margins)

    def __len__(self) -> int:
        # Requests already known to be too late count until ``expire`` hands them back: the
        # planner only calls it while something is pending, and a request that arrived doomed
        # after the last of the others had left used to wait for the next arrival to end.
        # Staged requests count without being filed (each becomes a member or doomed): the
        # planner asks once per job it admits, and the step's next query files them all.
        return len(self.q) + len(self._doomed) + self._staged_n

    # -- scoring ---------------------------------------------------------------------------------
    def _group(self, app: str) -> Group:
        """``app``'s estimates and score segments in the current tables."""
        got = self._groups.get(app)
        if got is None:
            got = self._groups[app] = self.tables.row(app)
        return got

    def _score(self, run: Run, row: int, now: float) -> list[float]:
        """``run``'s coefficients in size index ``row``'s queue at ``now`` and its next milestone
        there (lines 8-9): re-computed only when a milestone has passed."""
        c = run.coef[row]
        if c is not None and c[2] > now:
            return c
        segs = run.entries[row].segments
        brk, a, bt = segs.breaks, segs.a, segs.beta
        dl = run.deadline
        seg = bisect.bisect_left(brk, dl - now)
        # where deadline - now rounds across a break, step down: a milestone always moves on
        if seg > 0 and dl - brk[seg - 1] <= now:
            seg -= 1
        c = run.coef[row] = [run.decay * a[seg], run.cost * bt[seg], dl - brk[seg - 1] if seg > 0 else math.inf]
        if run.slot >= 0:
            self.q.mirror.scored(run, row, c)  # type: ignore[union-attr]
        return c

    def _rebase(self, now: float) -> None:
        if self._base is None:
            self._base = now
        elif self.b * (now - self._base) > self.rebase_exponent:
            self.q.rebase(math.exp(self.b * (now - self._base)))
            self._base = now
            self.rebases += 1

    # -- Algorithm 1 -----------------------------------------------------------------------------
    def add(self, item: Pending, now: float) -> None:
        # Staged, filed at the next query: the planner reads jobs in bursts, and a step's query
        # files them all. Filing later with a later ``now`` is what filing at add time and then
        # dropping at that ``now`` would give.
        self._now = max(self._now, now)
        staged = self._staged
        if staged:
            head = staged[-1][0]
            if head.deadline == item.deadline and head.app == item.app and head.priority_class == item.priority_class:
                staged[-1].append(item)
                self._staged_n += 1
                return
        staged.append([item])
        self._staged_n += 1

    def add_many(self, items: Sequence[Pending], now: float) -> None:
        # one job's requests (``Scheduler.add_many``): one run, with no per-request work
        if items:
            self._now = max(self._now, now)
            self._staged.append(list(items))
            self._staged_n += len(items)

    def _flush(self, now: float) -> None:
        """Algorithm 1's insertion for every staged run: its largest size and when it must leave
        it. Its scores are computed when a batch is next ranked in one of its queues
        (``_score``), as a score that changed at a milestone is: live, most runs are never
        ranked before they leave, and scoring them all on arrival was ORLOJ's largest cost in the
        planner's loop."""
        runs, self._staged = self._staged, []
        if not runs:
            return
        self._staged_n = 0
        self._rebase(now)
        base, b, class_cost, q, keys = self._base, self.b, self.class_cost, self.q, self._keys
        assert base is not None
        app = runs[0][0].app
        group = self._group(app)
        for items in runs:
            p = items[0]
            if p.app != app:  # a step's runs are mostly one app's: one lookup per app, not per run
                app, group = p.app, self._group(p.app)
            dl = p.deadline
            top = bisect.bisect_right(group[1], dl - now) - 1  # the estimates grow with the size
            if top < 0:
                self._doomed += items
                continue
            cost = 1.0 + class_cost * max(p.priority_class, 0)
            q.add(Run(items, next(keys), group, dl, cost, cost * math.exp(-b * (dl - base)), top))

    def _drop(self, now: float) -> list[Pending]:
        """Lines 10-14: leave the queues whose size can no longer make the deadline."""
        out, self._doomed = self._doomed, []
        q = self.q
        if now <= q.next_drop():  # the planner asks every step; mostly nothing is due
            return out
        for run in q.due(now):
            top = min(bisect.bisect_right(run.ests, run.deadline - now) - 1, run.top - 1)
            if top >= 0:
                q.lower(run, top)
            else:
                out += q.release(run)
        return out

    def diagnose(self) -> dict[str, object]:
        # the batch latency fit: c0 + c1 * k * E[max] (c1 has no unit)
        return {"c0_ms": round(self.fit.c0 * 1000.0, 3), "c1": round(self.fit.c1, 4)}

    def expire(self, now: float) -> list[Pending]:
        self._now = max(self._now, now)
        self._flush(now)
        self._rebase(now)
        return self._drop(now)

    def _candidate(self, max_size: int) -> tuple[int, int]:
        """Lines 15-19: the size index a batch is taken from (-1: none), and how many requests
        its queue holds.

        The queues are nested (``Q`` of a larger size is a subset of a smaller one's), so their
        earliest deadlines never decrease with the size. ``largest``: the order "(earliest
        deadline, size) descending" read literally, which is simply the largest size whose queue
        can fill. ``urgent``: the prose of Sec. 3.2, "the batch size with the overall earliest
        deadline will be chosen": the largest size that can fill among those whose queue holds
        the most urgent request.
        """
        counts = self.q.count
        limit = len(self.sizes) - 1
        if self.size_rule == "urgent":
            first = self._most_urgent()
            if first is None:
                return -1, 0
            limit = first.top
        members = sum(counts[limit + 1:])
        for i in range(limit, -1, -1):  # suffix sums: Q_i holds every request with top >= i
            members += counts[i]
            if self.sizes[i] <= max_size and members >= self.sizes[i]:
                return i, members
        return -1, 0

    def _most_urgent(self) -> Run | None:
        """The filed run with the earliest deadline. One scan of the runs: a heap entry per run
        cost more to push on every arrival than the few scans a step makes."""
        return min(self.q.runs(), key=_deadline, default=None)

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        i, members = self._candidate(max_size)
        if i < 0:
            return Decision(expired=expired)
        q = self.q
        if members == self.sizes[i]:
            # The batch is the whole queue, as short of overload it nearly always is: the scores
            # would only order it, and nothing downstream reads the order of a batch's requests.
            batch, runs = q.release_queue(i)
            # each member's estimate assumes the rest of the batch is drawn from the pool
            return Decision(batch=batch, expired=expired, predicted_s=max(r.ests[i] for r in runs))
        order = self._ranked(i, now)
        batch, used = q.take(order, self.sizes[i])
        predicted = max(r.ests[i] for r in order[:used]) if used else 0.0
        return Decision(batch=batch, expired=expired, predicted_s=predicted)

    def _ranked(self, i: int, now: float) -> list[Run]:
        """The ``sizes[i]`` best-scored runs of size index ``i``'s queue at ``now``, best first
        (a run holds at least one request)."""
        assert self._base is not None
        x = math.exp(self.b * (now - self._base))
        score = self._score
        mirror = self.q.mirrored()
        if mirror is not None:  # a long queue: ranked by arrays
            for run in mirror.due(i, now):
                score(run, i, now)
            return mirror.best(i, self.sizes[i], x)
        scored = []
        for run in self.q.queue(i):
            c = score(run, i, now)
            scored.append((c[0] * x + c[1], -run.key, run))  # ties to the earlier filed
        scored.sort(reverse=True)
        return [run for _, _, run in scored[:self.sizes[i]]]

    def earliest_deadline(self) -> float | None:
        self._flush(self._now)
        run = self._most_urgent()
        return run.deadline if run is not None else None

    # -- feedback --------------------------------------------------------------------------------
    def observe(self, feedback: Feedback) -> None:
        per = feedback.request_exec_s
        apps = feedback.apps or ("",) * feedback.size
        # Per-request times equal to the batch's own time are the batch's, not each request's alone.
        known = bool(per) and len(per) == len(apps) and (
            feedback.size <= 1 or any(abs(s - feedback.exec_s) > 0.01 * feedback.exec_s for s in per))
        if known:
            self.dists.add_many(zip(apps, per), self._now)
            batch_max = max(per)
        else:
            if feedback.size == 1 and apps:
                self.dists.add(apps[0], feedback.exec_s, self._now)
            batch_max = self.tables.expected_max(apps[: max(feedback.size, 1)])
        self.fit.update(feedback.size, batch_max, feedback.exec_s)
        if self._now - self._refreshed_at >= self.min_refresh_s and (
                self.dists.pending_samples >= self.refresh_every or self._drifted(feedback.size)):
            self.refresh()

    def add_sample(self, app: str, seconds: float) -> None:
        """A request's execution time measured alone (the online profiler's long-term feedback)."""
        self.dists.add(app, seconds, self._now)

    def _drifted(self, size: int) -> bool:
        """Whether the fit moved past the tolerance since the tables were built: its line, or the
        margin of ``size`` (the size just heard of; checking every size's would cost a median each)."""
        t, tol = self.tables, self.refit_tolerance
        if abs(self.fit.c0 - t.c0) > tol * max(t.c0, 1e-3) or abs(self.fit.c1 - t.c1) > tol * t.c1:
            return True
        if not self.size_margins or size not in t.margins:
            return False
        return abs(self.fit.margin(size) - t.margins[size]) > tol * max(t.c0, 1e-3)

    def refresh(self) -> None:
        """Rebuild the snapshot and the tables from the latest samples and fit."""
        self.dists.rebuild()
        self.tables = self._tables()
        self._refreshed_at = self._now
        self.refreshes += 1


def _deadline(run: Run) -> float:
    return run.deadline
