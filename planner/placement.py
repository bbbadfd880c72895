"""Placement of a batch: which variant runs it and where its parts go (pure, no I/O).

For now the split is the operator's choice: ``--split effnet-lite0=gpu:cpu`` makes every batch
of that model dispatched to pool ``gpu`` run part 1 there and forward the intermediate tensor to
pool ``cpu`` for part 2 (StarONNX's GPU-then-CPU placement). Batches dispatched to any other
pool, or planned while no live worker of the second pool serves the model, run the variant the
policy chose, whole, as without the option. Choosing the split automatically from per-part
profiles (StarONNX's HEFT-like rule) is later work and will replace ``splits`` here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache

from adaserve.broker.errors import ConfigError
from adaserve.broker.messages import Placement, Plan, ScoreWith
from adaserve.planner.core import Decision

_NAME = r"[A-Za-z0-9_.:\-]{1,128}"
_SPEC = re.compile(rf"^(?P<model>[A-Za-z0-9_.:\-]{{1,64}})=(?P<first>{_NAME}):(?P<second>{_NAME})$")
FIRST_PART = "part1"  # the manifest's name of a split model's first part (``extra["next"]`` names the rest)


@dataclass(frozen=True)
class Split:
    """Batches of ``model`` sent to pool ``first`` run ``part`` there; the next part runs on ``second``."""

    model: str
    first: str
    second: str
    part: str = FIRST_PART


def parse_split(spec: str) -> Split:
    """``"model=first_pool:second_pool"`` -> ``Split``; ``ConfigError`` saying what is wrong."""
    m = _SPEC.match(spec.strip())
    if m is None:
        raise ConfigError(f"split {spec!r} must read MODEL=FIRST_POOL:SECOND_POOL, e.g. effnet-lite0=gpu:cpu "
                          "(names of [A-Za-z0-9_.:-])")
    if m["first"] == m["second"]:
        raise ConfigError(f"split {spec!r}: the two parts need two different pools")
    return Split(m["model"], m["first"], m["second"])


@lru_cache(maxsize=64)
def parse_splits(specs: tuple[str, ...]) -> Mapping[str, Split]:
    """Every ``--split`` option by model; one split per model."""
    out: dict[str, Split] = {}
    for spec in specs:
        s = parse_split(spec)
        if s.model in out:
            raise ConfigError(f"model {s.model!r} is split twice ({out[s.model].first}:{out[s.model].second} "
                              f"and {s.first}:{s.second}); give one --split per model")
        out[s.model] = s
    return out


def place(model: str, pool: str, decision: Decision, splits: Mapping[str, Split],
          serving: Collection[str]) -> Plan:
    """The plan of a batch of ``model`` dispatched to ``pool``; ``serving``: the pools whose live
    workers serve the model now."""
    split = splits.get(model)
    if (split is not None and pool == split.first and split.second in serving
            and decision.variant == "default" and decision.modalities is None):
        return Plan(variant=split.part, placement=Placement(pool=pool, part=1, next_pool=split.second))
    score = tuple(ScoreWith(model=m, variant=v, rows=n) for m, v, n in decision.score)
    return Plan(modalities=decision.modalities, variant=decision.variant, placement=Placement(pool=pool), score=score)
