"""HEFT in the live planner: the glue between ``Placer`` and the planner's loop (no I/O here).

The planner asks ``pick`` which of the models waiting for a pool's free slot may go there (HEFT
may want a model's next batch on another pool: then it waits for that pool's slot), ``size`` how
large a batch the arrival rate calls for, ``plan`` the wire ``Plan`` of the batch formed, and
hands every ``batch.finished`` to ``finished``. Models split by ``--split`` keep the operator's
placement; models with no history at all keep the planner's placement as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaserve.broker.errors import ConfigError
from adaserve.broker.messages import Placement, Plan
from adaserve.planner.core import Decision
from adaserve.planner.heft.heft import Choice, Options
from adaserve.planner.heft.history import WHOLE, Key
from adaserve.planner.heft.placer import Outcome, Placer
from adaserve.planner.heft.seed import seed_file
from adaserve.planner.pools import PoolView

# Policies that size each batch from deadlines or a latency SLO themselves (EDF's budget, ORLOJ's
# per-size queues, Clockwork, Nexus, Clipper's AIMD, MOSEL's strategy matrix): the batch size for
# the arrival rate is published for them but does not cap their batches. FIFO's fixed size does.
SIZES_BY_DEADLINE = frozenset(("edf", "orloj", "clockwork", "nexus", "clipper", "mosel"))


def parse_kinds(specs: tuple[str, ...]) -> dict[str, str]:
    """``("fast=gpu", ...)`` -> ``{"fast": "gpu"}``; ``ConfigError`` saying what is wrong."""
    out: dict[str, str] = {}
    for spec in specs:
        pool, sep, kind = spec.partition("=")
        if not sep or not pool.strip() or not kind.strip():
            raise ConfigError(f"pool kind {spec!r} must read POOL=KIND, e.g. fast=gpu")
        out[pool.strip()] = kind.strip()
    return out


@dataclass
class LivePlacement:
    placer: Placer
    skip: frozenset[str] = frozenset()  # models under a manual --split
    last: dict[str, Choice] = field(default_factory=dict)

    @classmethod
    def build(cls, profile: str, kinds: tuple[str, ...], skip: frozenset[str], reverse: bool = False) -> LivePlacement:
        placer = Placer(options=Options(reverse=reverse), kinds=parse_kinds(kinds))
        if profile:
            seed_file(placer.histories, Path(profile))
        return cls(placer, skip)

    def handles(self, model: str) -> bool:
        h = self.placer.histories
        return model not in self.skip and any(h.known(Key(model, WHOLE, k)) for k in self._kinds())

    def _kinds(self) -> set[str]:
        return {self.placer.options.main, "cpu", "gpu", *self.placer.kinds.values()}

    def size(self, model: str, now_s: float, max_batch: int, pool: PoolView, policy: str = "") -> int:
        """The largest batch the former takes: the size for the arrival rate (always chosen, for
        telemetry), or ``max_batch`` for a policy that sizes its batches by deadline itself."""
        b = self.placer.batch_size(model, now_s, max_batch, max(pool.slots, 1))
        return max_batch if policy in SIZES_BY_DEADLINE else b

    def choose(self, model: str, size: int, waiting: int, serving: list[PoolView], now_s: float,
               first: str | None = None, delays: Mapping[str, float] | None = None) -> Choice | None:
        pools = {v.name: (max(v.slots, 1), v.free > 0) for v in serving}
        c = self.placer.plan(model, size, pools, max(waiting - size, 0), now_s, first=first, delays=delays)
        if c is not None:
            self.last[model] = c
        return c

    def plan(self, choice: Choice, decision: Decision) -> Plan:
        if choice.split and decision.variant == "default" and decision.modalities is None:
            return Plan(variant="part1", placement=Placement(pool=choice.pool, part=1, next_pool=choice.next_pool))
        return Plan(modalities=decision.modalities, variant=decision.variant, placement=Placement(pool=choice.pool))

    def dispatched(self, batch_id: str, model: str, choice: Choice, size: int) -> dict[str, Any]:
        """Record the batch; the fields its ``batch.dispatched`` event gets."""
        self.placer.dispatched(batch_id, model, choice, size)
        return {"placement": choice.label, "predicted_finish_ms": choice.finish * 1000.0, "explored": choice.explored}

    def finished(self, batch_id: str, pool: str, model: str, variant: str, part: int | None, size: int, exec_ms: float,
                 ts_ms: float) -> Outcome | None:
        """Learn from a ``batch.finished``; a whole run of another variant (a modality subset, an
        early exit) is not the whole model's time, and only clears the batch."""
        learn = part is not None or variant in ("whole", "default")
        return self.placer.finished(batch_id, pool, model, part, size, exec_ms / 1000.0, ts_ms / 1000.0, learn=learn)

    def state(self, now_s: float, limit: int = 512) -> dict[str, Any]:
        p = self.placer
        return {"histories": p.histories.snapshot()[:limit],
                "rates": {m: r.rate(now_s) for m, r in p.rates.items()},
                "batch_sizes": {m: s[2] for m, s in p.sizes.items()},
                "handover": {m: {"fixed_ms": t.fixed_s * 1000.0, "per_request_ms": t.per_byte_s * 1000.0,
                                 "measured": float(t.measured)} for m, t in p.transfers.items()}}


def outcome_event(o: Outcome) -> Mapping[str, object]:
    return {"batch_id": o.batch_id, "model": o.model, "placement": o.plan, "size": o.size,
            "predicted_finish_ms": o.predicted_finish * 1000.0, "finish_ms": o.finish * 1000.0,
            "error_ms": o.error * 1000.0}
