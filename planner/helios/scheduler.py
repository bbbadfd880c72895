"""``HeliosScheduler``: a job whose ``model`` names a family, served by HELIOS's choice.

The queue is first come, first served with deadline expiry (the paper serves prompts in order);
what HELIOS adds is *what* serves each batch: ``Decision.model`` and the ``depthK`` variant come
from the controller, and the batch is bounded by the worker's memory at that depth. Finished
batches come back through ``observe`` with each request's token figures (``Feedback.lm``).
"""

from __future__ import annotations

from collections import deque

from adaserve.planner.core import Decision, Feedback, Pending, Scheduler

from .controller import Event, Helios
from .decide import batch_for_memory
from .pht import BatchObs, ItemStats, scored_of


def depth_of(variant: str, fallback: int) -> int:
    """``depthK`` -> K (the ``lm-exit`` variants' names); ``fallback`` for any other name."""
    return int(variant[5:]) if variant.startswith("depth") and variant[5:].isdigit() else fallback


class HeliosScheduler(Scheduler):
    name = "helios"

    def __init__(self, helios: Helios, *, context_tokens: int = 128) -> None:
        self.helios = helios
        self.context_tokens = context_tokens
        self.memory_mb: float | None = None  # the serving pool's budget, when its workers tell it
        self._q: deque[Pending] = deque()
        self._events: list[Event] = []

    def add(self, item: Pending, now: float) -> None:
        self._q.append(item)

    def expire(self, now: float) -> list[Pending]:
        if not any(p.deadline < now for p in self._q):
            return []
        out = [p for p in self._q if p.deadline < now]
        self._q = deque(p for p in self._q if p.deadline >= now)
        return out

    def next_batch(self, now: float, max_size: int) -> Decision:
        expired = self.expire(now)
        model, depth, limit = self.helios.target()
        cand = self.helios.by_name[model]
        size = batch_for_memory(cand.at(depth), self.memory_mb, self.context_tokens, max_size)
        if limit is not None:
            size = min(size, limit)
        waiting = len(self._q)
        batch = [self._q.popleft() for _ in range(min(size, len(self._q)))]
        score: tuple[tuple[str, str, int], ...] = ()
        if batch:
            score = tuple((m, f"depth{d}", n) for m, d, n in self.helios.score_with(model, len(batch)))
            self.helios.dispatched(model, depth, len(batch), waiting)
            self._events.extend(self.helios.events)
            self.helios.events.clear()
        rate = cand.at(depth).rate(len(batch))
        predicted = 16 * len(batch) / rate if rate > 0 else 0.0
        return Decision(batch, expired, predicted, variant=f"depth{depth}", model=model, score=score)

    def observe(self, feedback: Feedback) -> None:
        cand = self.helios.by_name.get(feedback.model)
        if cand is None:
            return
        items = tuple(i for i in feedback.lm if isinstance(i, ItemStats))
        if not items:
            return
        obs = BatchObs(feedback.model, depth_of(feedback.variant, cand.max_depth), feedback.size,
                       feedback.exec_s, items, feedback.load_s, scored_of(items))
        self._events.extend(self.helios.observe(obs))

    def earliest_deadline(self) -> float | None:
        return min((p.deadline for p in self._q), default=None)

    def __len__(self) -> int:
        return len(self._q)

    def models(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.helios.all)

    def runs_on(self, models: set[str]) -> bool:
        return self.helios.target()[0] in models

    def set_memory(self, memory_mb: float | None) -> None:
        self.memory_mb = memory_mb
        self.helios.set_budget(memory_mb, self.context_tokens)

    def drain_events(self) -> list[tuple[str, dict[str, object]]]:
        out, self._events = self._events, []
        return out

    def table(self) -> dict[str, object] | None:
        return self.helios.snapshot()
