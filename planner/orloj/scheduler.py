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

Scores are computed from padded per-group tables (a group: one app's row of one generation of
tables), so re-scoring the requests that are due is vectorised. New distributions and fits
(``refresh``) make a new generation for requests that arrive afterwards: re-placing every
pending request would cost O(pending x sizes) on the planner's loop, and they leave within one
SLO anyway.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.orloj.batch_latency import BatchLatencyFit
from adaserve.planner.orloj.distributions import ExecDistributions
from adaserve.planner.orloj.queues import SizeQueues
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
                 size_rule: str = "largest", group_limit: int = 6, size_margins: bool = True) -> None:
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
        # Above this many jobs in one step, the vectorised pass is the cheaper (about 6 jobs of 4).
        self.group_limit = group_limit
        self._member_cols: dict[int, tuple[np.ndarray, np.ndarray]] = {}
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
        n, w = len(self.sizes), score_bins + 2  # breaks per segment table, padded with +inf
        self._brk = np.full((0, n, w), np.inf)
        self._a = np.zeros((0, n, w + 1))
        self._bt = np.zeros((0, n, w + 1))
        self._ests: list[list[float]] = []
        self._est_mat = np.zeros((0, n))  # the same, a row per group
        self._groups: dict[tuple[int, str], int] = {}
        self._gid_of: dict[str, int] = {}  # app -> its group in the current generation
        self._generation = 0
        self.tables = self._tables()
        self.q = SizeQueues(n)
        self._doomed: list[Pending] = []
        # Runs of requests that share app, deadline and class (a job's), placed one slot each.
        self._staged: list[list[Pending]] = []
        self._staged_n = 0
        self._next_drop = math.inf  # no drop_at is earlier: _drop has nothing to do before it
        self._base: float | None = None
        self._now = 0.0
        self.rebases = 0
        self.refreshes = 0

    def _tables(self) -> BatchTables:
        self._generation += 1
        self._gid_of = {}
        margins = self.fit.margins(self.sizes) if self.size_margins else ()
        return BatchTables(self.dists.snapshot, self.fit.c0, self.fit.c1, self.sizes, self.b, self.score_bins, margins)

    def __len__(self) -> int:
        # Requests already known to be too late count until ``expire`` hands them back: the
        # planner only calls it while something is pending, and a request that arrived doomed
        # after the last of the others had left used to wait for the next arrival to end.
        # Staged requests count without being placed (each becomes a member or doomed): the
        # planner asks once per job it admits, and placing there placed every job alone, at
        # ~23 us each, where the step's next query places them all in one pass.
        return len(self.q) + len(self._doomed) + self._staged_n

    # -- scoring ---------------------------------------------------------------------------------
    def _group(self, app: str) -> int:
        """The id of ``app``'s estimates in the current tables (padded into the group arrays)."""
        gid = self._gid_of.get(app)
        if gid is not None:
            return gid
        key = (self._generation, self.tables.known(app))
        gid = self._groups.get(key)
        if gid is not None:
            self._gid_of[app] = gid
            return gid
        entries, ests = self.tables.row(app)
        n, w = self._brk.shape[1], self._brk.shape[2]
        brk, a, bt = np.full((1, n, w), np.inf), np.zeros((1, n, w + 1)), np.zeros((1, n, w + 1))
        for i, e in enumerate(entries):
            s = e.segments
            if len(s.breaks) > w:
                raise ValueError("a score table has more breaks than score_bins allows")
            brk[0, i, :len(s.breaks)] = s.breaks
            a[0, i, :len(s.a)] = s.a
            bt[0, i, :len(s.beta)] = s.beta
        self._brk = np.concatenate([self._brk, brk])
        self._a = np.concatenate([self._a, a])
        self._bt = np.concatenate([self._bt, bt])
        self._ests.append(list(ests))
        self._est_mat = np.vstack([self._est_mat, np.asarray(ests, dtype=np.float64)[None, :]])
        gid = self._groups[key] = self._gid_of[app] = len(self._ests) - 1
        return gid

    def _rescore(self, slots: np.ndarray, row: int, now: float) -> None:
        """Coefficients and next milestone of ``slots`` in size index ``row``'s queue at ``now``
        (lines 8-9)."""
        q = self.q
        g, dl = q.gid[slots], q.deadline[slots]
        brk = self._brk[g, row]  # (m, w)
        seg = (brk < (dl - now)[:, None]).sum(axis=1)
        m = np.arange(slots.size)
        # where deadline - now rounds across a break, step down: a milestone always moves on
        prev = brk[m, np.maximum(seg - 1, 0)]
        seg -= (seg > 0) & (dl - prev <= now)
        q.alpha[row, slots] = q.decay[slots] * self._a[g, row, seg]
        q.beta[row, slots] = q.cost[slots] * self._bt[g, row, seg]
        prev = brk[m, np.maximum(seg - 1, 0)]
        q.next_ms[row, slots] = np.where(seg > 0, dl - prev, np.inf)

    def _milestones(self, i: int, now: float) -> None:
        """Lines 5-9 for one queue: re-score the members whose score segment changed by ``now``."""
        due = np.flatnonzero(self.q.next_ms[i, :self.q.high] <= now)
        if due.size:
            self._rescore(due, i, now)

    def _rebase(self, now: float) -> None:
        if self._base is None:
            self._base = now
        elif self.b * (now - self._base) > self.rebase_exponent:
            self.q.rebase(math.exp(self.b * (now - self._base)))
            self._base = now
            self.rebases += 1

    # -- Algorithm 1 -----------------------------------------------------------------------------
    def add(self, item: Pending, now: float) -> None:
        # Staged, placed in one vectorised pass at the next query: per-request numpy calls cost
        # ~60 us each, which live, at a thousand requests a second, was the planner's CPU that the
        # rest of the pipeline lacked (docs/orloj.md, "Live"). Placing later with a later ``now``
        # is what placing at add time and then dropping at that ``now`` would give.
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
        """Algorithm 1's insertion for every staged request: its sizes and slot. Its scores are
        computed when a batch is next taken from one of its queues (``_milestones``), as a
        score that changed at a milestone is: live, most rows are never read before the request
        leaves, and scoring them all on arrival was ORLOJ's largest cost in the planner's loop."""
        runs, self._staged = self._staged, []
        if not runs:
            return
        self._staged_n = 0
        self._rebase(now)
        # A run's requests share app, deadline and class, so they share every figure placing
        # them needs, and one slot holds them all (``SizeQueues``): a step that read a few jobs
        # places them one at a time, with a few scalar writes each, instead of paying the ~30
        # numpy calls of the general pass. Runs are taken in order of arrival: both paths give
        # the same slots and ids.
        if len(runs) > self.group_limit:
            self._place(runs, now)
            return
        for items in runs:
            head = items[0]
            self._place_job(head.app, head.deadline, head.priority_class, items, now)

    def _place_job(self, app: str, dl: float, cls: int, items: list[Pending], now: float) -> None:
        """``_place`` for one run (requests that share app, deadline and class): scalar
        arithmetic in Python and one slot's writes, once per admitted job."""
        gid = self._group(app)
        ests = self._ests[gid]
        top = bisect.bisect_right(ests, dl - now) - 1  # the estimates grow with the size
        if top < 0:
            self._doomed.extend(items)
            return
        q = self.q
        n = len(items)
        slot = q.alloc(n)
        q.items[slot] = items
        assert self._base is not None
        cost = 1.0 + self.class_cost * max(cls, 0)
        drop_at = dl - ests[top]
        q.gid[slot], q.deadline[slot], q.cost[slot] = gid, dl, cost
        q.decay[slot] = cost * math.exp(-self.b * (dl - self._base))
        q.est[slot] = self._est_mat[gid]
        q.drop_at[slot] = drop_at
        if drop_at < self._next_drop:
            self._next_drop = drop_at
        q.top[slot] = top
        q.count[top] += n
        q.members_total += n
        beta, nxt = self._columns(top)
        q.beta[:, slot] = beta
        q.next_ms[:, slot] = nxt

    def _columns(self, top: int) -> tuple[np.ndarray, np.ndarray]:
        """A new member's ``beta`` and ``next_ms`` columns when its largest size is ``top``."""
        cols = self._member_cols.get(top)
        if cols is None:
            member = np.arange(self.q.n) <= top
            cols = self._member_cols[top] = (np.where(member, 0.0, -np.inf), np.where(member, -np.inf, np.inf))
        return cols

    def _place(self, runs: list[list[Pending]], now: float) -> None:
        """Insertion of many runs (``_flush``'s) in one vectorised pass, a slot per run.

        A run's figures are read in one Python loop rather than one generator per figure: at
        overload this pass places a hundred runs a step."""
        assert self._base is not None
        base, b, class_cost = self._base, self.b, self.class_cost
        n_runs = len(runs)
        sizes_l, gids_l, dl_l, cost_l, decay_l = [], [], [], [], []
        app, gid = None, 0
        for items in runs:
            p = items[0]
            if p.app != app:  # a step's runs are mostly one app's: one lookup per app, not per run
                app, gid = p.app, self._group(p.app)
            d, c = p.deadline, 1.0 + class_cost * max(p.priority_class, 0)
            sizes_l.append(len(items))
            gids_l.append(gid)
            dl_l.append(d)
            cost_l.append(c)
            # math.exp, as the per-job path takes it: both paths must leave the very same scores
            decay_l.append(c * math.exp(-b * (d - base)))
        counts, gids = np.array(sizes_l, dtype=np.int64), np.array(gids_l, dtype=np.int64)
        dl, cost, decay = np.array(dl_l), np.array(cost_l), np.array(decay_l)
        est = self._est_mat[gids]  # (runs, sizes)
        tops = (est <= (dl - now)[:, None]).sum(axis=1) - 1  # the estimates grow with the size
        keep = tops >= 0
        if not keep.all():
            for r in np.flatnonzero(~keep).tolist():
                self._doomed.extend(runs[r])
            runs = [runs[r] for r in np.flatnonzero(keep).tolist()]
            if not runs:
                return
            gids, dl, est, tops, counts = gids[keep], dl[keep], est[keep], tops[keep], counts[keep]
            cost, decay, n_runs = cost[keep], decay[keep], len(runs)
        q = self.q
        slots, slot_list = q.alloc_many(n_runs, counts)
        if isinstance(slots, slice):
            q.items[slots] = runs
        else:
            for slot, items in zip(slot_list, runs):
                q.items[slot] = items
        drop_at = dl - est[np.arange(n_runs), tops]
        self._next_drop = min(self._next_drop, float(drop_at.min()))
        q.gid[slots], q.deadline[slots], q.cost[slots] = gids, dl, cost
        q.decay[slots], q.est[slots], q.drop_at[slots] = decay, est, drop_at
        q.top[slots] = tops
        q.count += np.bincount(tops, weights=counts, minlength=q.n).astype(np.int64)
        q.members_total += int(counts.sum())
        member = np.arange(q.n)[:, None] <= tops[None, :]  # (sizes, runs): the queues each joins
        q.beta[:, slots] = np.where(member, 0.0, -np.inf)  # a member, scored when first read
        q.next_ms[:, slots] = np.where(member, -np.inf, np.inf)

    def _drop(self, now: float) -> list[Pending]:
        """Lines 10-14: leave the queues whose size can no longer make the deadline."""
        out, self._doomed = self._doomed, []
        if now <= self._next_drop:  # the planner asks every step; mostly nothing is due
            return out
        q = self.q
        drop_at = q.drop_at[:q.high]
        due = np.flatnonzero(drop_at < now)
        self._next_drop = float(drop_at.min()) if drop_at.size else math.inf
        if not due.size:
            return out
        left = q.deadline[due] - now
        tops = np.minimum((q.est[due] <= left[:, None]).sum(axis=1) - 1, q.top[due] - 1)
        live = tops >= 0
        stay, tops = due[live], tops[live]
        if stay.size:
            q.lower(stay, tops)
            q.drop_at[stay] = q.deadline[stay] - q.est[stay, tops]
        out.extend(q.release_many(due[~live]))
        self._next_drop = float(q.drop_at[:q.high].min()) if q.high else math.inf
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
        counts = self.q.count.tolist()
        limit = len(self.sizes) - 1
        if self.size_rule == "urgent":
            first = self._most_urgent()
            if first is None:
                return -1, 0
            limit = int(self.q.top[first])
        members = sum(counts[limit + 1:])
        for i in range(limit, -1, -1):  # suffix sums: Q_i holds every request with top >= i
            members += counts[i]
            if self.sizes[i] <= max_size and members >= self.sizes[i]:
                return i, members
        return -1, 0

    def _most_urgent(self) -> int | None:
        """The slot of the pending request with the earliest deadline (a free slot's is +inf).
        One scan of the slots: a heap entry per request cost more to push on every arrival than
        the few scans a step makes."""
        if not self.q.members_total:
            return None
        return int(np.argmin(self.q.deadline[:self.q.high]))

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        i, members = self._candidate(max_size)
        if i < 0:
            return Decision(expired=expired)
        q = self.q
        if members == self.sizes[i]:
            # The batch is the whole queue, as short of overload it nearly always is: the scores
            # would only order it, and nothing downstream reads the order of a batch's requests.
            # Re-scoring and ranking were ~40 % of a decision (~140 us on a 2-core host).
            best = np.flatnonzero(q.top[:q.high] >= i)
            # each member's estimate assumes the rest of the batch is drawn from the pool
            predicted = float(q.est[best, i].max()) if best.size else 0.0
            return Decision(batch=q.release_many(best), expired=expired, predicted_s=predicted)
        self._milestones(i, now)
        assert self._base is not None
        best = np.asarray(q.best(i, self.sizes[i], math.exp(self.b * (now - self._base))), dtype=np.int64)
        batch, used = q.take(best, self.sizes[i])
        predicted = float(q.est[best[:used], i].max()) if used else 0.0
        return Decision(batch=batch, expired=expired, predicted_s=predicted)

    def earliest_deadline(self) -> float | None:
        self._flush(self._now)
        slot = self._most_urgent()
        return float(self.q.deadline[slot]) if slot is not None else None

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
        self._forget_groups()

    def _forget_groups(self) -> None:
        """Drop the padded tables no pending request uses any more (they grow with each refresh)."""
        if len(self._ests) < 64:
            return
        h = self.q.high
        live = self.q.top[:h] >= 0
        used = np.unique(self.q.gid[:h][live])
        current = [gid for (gen, _), gid in self._groups.items() if gen == self._generation]
        keep = np.union1d(used, np.asarray(current, dtype=np.int64)).astype(np.int64)
        remap = np.full(len(self._ests), -1, dtype=np.int64)
        remap[keep] = np.arange(keep.size)
        self._brk, self._a, self._bt = self._brk[keep], self._a[keep], self._bt[keep]
        self._ests = [self._ests[g] for g in keep.tolist()]
        self._est_mat = self._est_mat[keep]
        self._groups = {k: int(remap[g]) for k, g in self._groups.items() if remap[g] >= 0}
        self._gid_of = {app: int(remap[g]) for app, g in self._gid_of.items()}
        gids = self.q.gid[:h]
        gids[live] = remap[gids[live]]
