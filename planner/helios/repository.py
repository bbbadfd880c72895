"""The Model Repository (HELIOS Sec. 3.3.1): each family's candidates with their offline figures.

A candidate is one model of a task family (``"family"`` in its manifest); its figures per loaded
depth come from its offline profile (``helios.json``, see ``models/lm/helios_profile.py``):
tokens/s by batch size, time to first token, weight and KV-cache bytes, the measured time to load
that depth, CPU seconds per token, and per task the held-out perplexity and the share of tokens
whose first confident exit is at or below the depth. Everything here is plain data; reading the
files is ``store.py``'s.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adaserve.broker.errors import ConfigError


@dataclass(frozen=True, slots=True)
class DepthFigures:
    """What the offline profile says of one candidate loaded up to ``depth`` layers."""

    depth: int
    tokens_per_s: Mapping[int, float]  # batch size -> generated tokens/s of the whole batch
    ttft_s: float
    weight_bytes: int
    kv_bytes_per_token: int
    load_s: float
    cpu_s_per_token: float
    perplexity: Mapping[str, float]  # task -> held-out perplexity at this depth
    exit_share: Mapping[str, float]  # task -> share of tokens confident at or below this depth

    def rate(self, batch: int) -> float:
        """Tokens/s at ``batch``: the batch's time interpolated linearly between the profiled sizes
        (a batch's time grows about linearly with its size), extended by the last segment's slope
        beyond the largest, the smallest size's rate below it. The rate of the profiled size at
        or below ``batch`` (the step this replaced) made a batch of 15 as slow per token as one
        of 4 and one of 16 twice as fast: a row measured at a mean batch of 17, scaled to an
        option's batch of 15, read half its speed (docs/helios.md, "Seventh session")."""
        pts = sorted((b, float(r)) for b, r in self.tokens_per_s.items() if b > 0 and r > 0)
        if not pts:
            return 0.0
        b = max(batch, 1)
        if b <= pts[0][0] or len(pts) == 1:
            return pts[0][1] if b <= pts[0][0] else pts[-1][1]
        times = [(n, n / r) for n, r in pts]  # a batch's seconds per token it generates per sequence
        for (lo, t_lo), (hi, t_hi) in itertools.pairwise(times):
            if b <= hi:
                return b / (t_lo + (t_hi - t_lo) * (b - lo) / (hi - lo))
        (lo, t_lo), (hi, t_hi) = times[-2], times[-1]
        # a profile whose largest batch timed faster than the one before (noise) extends flat:
        # a falling line would reach a zero or negative time for a large enough batch
        return b / (t_hi + max(t_hi - t_lo, 0.0) / (hi - lo) * (b - hi))

    def mean_perplexity(self) -> float:
        vals = list(self.perplexity.values())
        return sum(vals) / len(vals) if vals else float("inf")


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    family: str
    tau: float
    figures: Mapping[int, DepthFigures]  # depth -> figures, every exit of the model
    device: str = "cpu"

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(sorted(self.figures))

    @property
    def max_depth(self) -> int:
        return self.depths[-1]

    def at(self, depth: int) -> DepthFigures:
        if depth not in self.figures:
            raise KeyError(f"{self.name} has no exit at depth {depth} (exits: {self.depths})")
        return self.figures[depth]


@dataclass(frozen=True)
class Repository:
    """Candidates by family. ``families`` maps a family name to its candidates in name order."""

    families: Mapping[str, tuple[Candidate, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, candidates: Iterable[Candidate]) -> Repository:
        out: dict[str, list[Candidate]] = {}
        for c in candidates:
            out.setdefault(c.family, []).append(c)
        return cls({f: tuple(sorted(cs, key=lambda c: c.name)) for f, cs in out.items()})

    def is_family(self, name: str) -> bool:
        return name in self.families

    def candidates(self, family: str) -> tuple[Candidate, ...]:
        return self.families.get(family, ())

    def candidate(self, name: str) -> Candidate | None:
        for cs in self.families.values():
            for c in cs:
                if c.name == name:
                    return c
        return None


def candidate_from_profile(raw: Mapping[str, Any]) -> Candidate:
    """A candidate from a HELIOS profile as a plain map (``HeliosProfile.model_dump()``).

    ``depths`` is a list of per-depth maps (each with ``depth``) or a map depth -> figures; the
    per-task figures are either ``tasks: {task: {perplexity, exit_share}}`` or two maps
    ``perplexity`` and ``exit_share`` keyed by task.
    """
    try:
        rows = raw["depths"]
        items = rows.items() if isinstance(rows, Mapping) else ((r["depth"], r) for r in rows)
        figs: dict[int, DepthFigures] = {}
        for d, r in items:
            tasks = r.get("tasks") or {}
            ppl = dict(r.get("perplexity") or {t: v["perplexity"] for t, v in tasks.items()})
            share = dict(r.get("exit_share") or {t: v["exit_share"] for t, v in tasks.items()})
            figs[int(d)] = DepthFigures(
                int(d), {int(b): float(v) for b, v in r["tokens_per_s"].items()}, float(r["ttft_s"]),
                int(r["weight_bytes"]), int(r["kv_bytes_per_token"]), float(r["load_s"]),
                float(r.get("cpu_s_per_token", 0.0)), ppl, share)
        if not figs:
            raise ValueError("no depths")
        return Candidate(str(raw["name"]), str(raw["family"]), float(raw.get("tau", 0.8)), figs,
                         str(raw.get("device", "cpu")))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"HELIOS profile of {raw.get('name', '?')!r} is malformed: {exc!r}") from exc
