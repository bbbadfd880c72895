"""Admission control: a job that the queue ahead of it cannot serve by its deadline is refused at
once with reason ``overloaded`` (and when to try again), instead of being queued only to expire,
and no model's queue grows past a configured bound (as Triton's ``max_queue_size`` with REJECT and
Ray Serve's ``max_queued_requests`` do).

Pure: the caller says what finished when and how much is queued; nothing here reads a clock.

The drain rate of a model is the highest rate at which it finished requests over one span
(``span_s``, 100 ms) of the last ``horizon_s`` seconds: the rate the queue drains at once the pools
are busy. A whole second was too coarse: below saturation the best second is the offered rate, not
the capacity, and a burst of arrivals was then refused though the pool would have served it (at
0.8 of capacity 2-4 % of requests were refused, live and simulated alike); a backlog drained
after a burst shows the capacity within a span. The estimate is used only when the queue is long
enough to matter (``min_queue``) and the rate rests on enough evidence (at least ``min_queue``
requests a second); otherwise the job is admitted and the policy's own expiry applies. A burst
after a long idle spell is therefore admitted whole, and refused only once a span of it has been
measured.

``for_planner`` and ``Overload.check`` are what the live planner applies (``planner/service.py``)
and what the pipeline simulator applies to its virtual jobs (``planner/sim/pipeline.py``): one
piece of code, so the simulator refuses the jobs the planner would.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field


@dataclass
class Overload:
    max_queue: int = 0  # requests queued per model; 0: no fixed bound
    min_queue: int = 128  # a shorter queue drains by itself: never refused on the estimate
    horizon_s: int = 30
    deadline_aware: bool = True
    span_s: float = 0.1
    sustained_spans: int = 10  # the backlogged spans averaged (1 s at 100 ms)
    _spans: dict[str, deque[list[int]]] = field(default_factory=dict)  # model -> [span, requests]
    _best: dict[str, tuple[int, float]] = field(default_factory=dict)  # model -> (span asked at, best rate)
    _backlog: dict[str, deque[int]] = field(default_factory=dict)  # model -> spans a check saw a backlog in

    def __post_init__(self) -> None:
        if self.max_queue < 0 or self.min_queue < 1 or self.horizon_s < 2:
            raise ValueError("max_queue >= 0, min_queue >= 1 and horizon_s >= 2 are required")
        if not 0 < self.span_s <= 1:
            raise ValueError("span_s must be in (0, 1] seconds")
        if self.sustained_spans < 2:
            raise ValueError("sustained_spans must be at least 2")
        self._per_horizon = round(self.horizon_s / self.span_s)

    def finished(self, model: str, requests: int, now_s: float) -> None:
        """``requests`` of ``model`` finished at ``now_s``."""
        span = self._span(now_s)
        q = self._spans.setdefault(model, deque())
        if q and q[-1][0] == span:
            q[-1][1] += requests
        else:
            q.append([span, requests])
        while q and q[0][0] <= span - self._per_horizon:
            q.popleft()
        cached = self._best.get(model)
        if cached is not None and span < cached[0]:  # heard late: a span the cached best had as whole
            del self._best[model]

    def finished_in_second(self, model: str, requests: int, second: int) -> None:
        """``requests`` finished over the whole ``second`` (a record kept per second, as a saved
        calibration's): spread evenly over its spans, so it counts as that second's rate."""
        k = max(round(1.0 / self.span_s), 1)
        for j in range(k):
            self.finished(model, requests // k + (j < requests % k), second + (j + 0.5) / k)

    def _span(self, now_s: float) -> int:
        return int(now_s / self.span_s + 1e-9)  # 100.1 / 0.1 is 1000.999...: still span 1001

    def drain_rps(self, model: str, now_s: float) -> float | None:
        """The best whole span of the horizon as requests per second (no more than the backlogged
        spans sustained, when most recent spans were backlogged), or None when too little was
        measured to say."""
        q = self._spans.get(model)
        if not q:
            return None
        span = self._span(now_s)
        cached = self._best.get(model)
        if cached is not None and cached[0] == span:
            best = cached[1]
        else:  # a scan of up to horizon / span entries, once per span: a job's check is per job
            best = max((n for s, n in q if span - self._per_horizon < s < span), default=0) / self.span_s
            held = self._sustained(model, q, span)
            if held is not None:
                best = min(best, held)
            self._best[model] = (span, best)
        return best if best >= self.min_queue else None

    def _sustained(self, model: str, q: deque[list[int]], span: int) -> float | None:
        """Requests a second drained over the whole spans of the last ``sustained_spans`` in which
        the queue was backlogged, or None when fewer than half of them were."""
        marks = self._backlog.get(model)
        if not marks:
            return None
        lo = span - self.sustained_spans
        spans = {s for s in marks if lo <= s < span}
        if 2 * len(spans) < self.sustained_spans:
            return None
        done = sum(n for s, n in q if s in spans)
        return done / (len(spans) * self.span_s)

    def _mark_backlog(self, model: str, now_s: float) -> None:
        span = self._span(now_s)
        marks = self._backlog.setdefault(model, deque())
        if not marks or marks[-1] != span:
            marks.append(span)
            while marks[0] < span - self.sustained_spans:
                marks.popleft()

    def check(self, model: str, queued: int, requests: int, submitted_ms: float, deadline_ms: float,
              now_ms: float) -> str | None:
        """``verdict`` for a job submitted at ``submitted_ms`` (the ingress entry's id) with a
        deadline ``deadline_ms`` after it, read at ``now_ms``: the planner's admission check."""
        return self.verdict(model, queued, requests, (submitted_ms + deadline_ms - now_ms) / 1000.0, now_ms / 1000.0)

    def verdict(self, model: str, queued: int, requests: int, left_s: float, now_s: float) -> str | None:
        """Why a job of ``requests`` arriving behind ``queued`` with ``left_s`` to its deadline is
        refused, or None to admit it."""
        bounded = bool(self.max_queue) and queued + requests > self.max_queue
        if queued >= self.min_queue:
            self._mark_backlog(model, now_s)
        if not bounded and (not self.deadline_aware or queued < self.min_queue):
            return None
        rate = self.drain_rps(model, now_s)
        retry = "" if rate is None else f"; retry in {math.ceil(1000 * queued / rate)} ms"
        if bounded:
            return f"{queued} requests queued for {model}, the bound is {self.max_queue}{retry}"
        if rate is None:
            return None
        wait_s = (queued + requests) / rate
        if wait_s <= left_s:
            return None
        return (f"{queued} requests queued for {model} drain in ~{1000 * wait_s:.0f} ms at {rate:.0f}/s, past the "
                f"job's deadline ({1000 * max(left_s, 0.0):.0f} ms left){retry}")


def for_planner(*, max_queue: int, admission: bool, max_batch: int) -> Overload:
    """The admission control of a planner configured with ``--max-queue``, ``--admission`` and
    ``--max-batch``: a queue of four largest batches drains by itself."""
    return Overload(max_queue=max_queue, deadline_aware=admission, min_queue=4 * max_batch)
