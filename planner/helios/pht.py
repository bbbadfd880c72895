"""The Performance History Table (HELIOS Sec. 3.4): what each candidate really did on this traffic.

One row per (model, loaded depth), each a window of its most recent batches, so that a task that
drifts away from a model shows in its figures within a window, not after the whole history. A
row records, from the results' own fields (``lm`` in ``batch.finished``):

* the exit each generated token would take at the confidence threshold (the first exit head at
  or below the loaded depth whose top-1 probability reaches tau; 0: none, a breach);
* tokens/s of the batches, and the time to first token (a batch's prefill share: its time over
  the steps it ran, one step being the prefill);
* accuracy, reference-free: the perplexity of each prompt under the model at the loaded depth,
  from the prefill logits the model computes anyway;
* cost: CPU-seconds per token on a CPU host (batch time, one intra-op thread), and the measured
  time each (partial) load took.

Estimates for a depth not yet run come from the offline profile scaled by what this traffic
measured at a depth that did run (``Estimate``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .repository import Candidate


@dataclass(frozen=True, slots=True)
class ItemStats:
    """One request's tokens as a worker reported them."""

    tokens: int
    breaches: int
    exits: tuple[int, ...] = ()  # exits[k]: tokens whose first confident exit is k (0: none)
    prompt_ppl: float | None = None
    # the prompt as other models read it in a scoring pass: (model, depth, perplexity)
    scored: tuple[tuple[str, int, float | None], ...] = ()


def item_stats(raw: object) -> ItemStats | None:
    """A request's ``lm`` figures from ``batch.finished`` (a map or its model), None when absent
    or malformed (a request of another model, a worker of an older version)."""
    if raw is None:
        return None
    body: dict[str, Any] = raw if isinstance(raw, dict) else {
        k: getattr(raw, k, None) for k in ("tokens", "breaches", "exits", "prompt_ppl", "scored")}
    try:
        tokens, breaches = int(body["tokens"]), int(body["breaches"])
        exits = tuple(int(x) for x in (body.get("exits") or ()))
        ppl = body.get("prompt_ppl")
        return ItemStats(tokens, breaches, exits, None if ppl is None else float(ppl),
                         tuple(_scored(s) for s in (body.get("scored") or ())[:8]))
    except (TypeError, ValueError, KeyError):
        return None


def _scored(raw: Any) -> tuple[str, int, float | None]:
    s: dict[str, Any] = raw if isinstance(raw, dict) else {k: getattr(raw, k, None) for k in ("model", "depth",
                                                                                               "prompt_ppl")}
    ppl = s.get("prompt_ppl")
    return str(s["model"]), int(s["depth"]), None if ppl is None else float(ppl)


def scored_of(items: tuple[ItemStats, ...]) -> tuple[ScoredObs, ...]:
    """The scoring passes a batch's requests report, one ``ScoredObs`` per (model, depth), each
    holding the prompts that model read (the batch's first ones, in order)."""
    out: dict[tuple[str, int], list[ItemStats]] = {}
    for it in items:
        for model, depth, ppl in it.scored:
            out.setdefault((model, depth), []).append(ItemStats(0, 0, (), ppl))
    return tuple(ScoredObs(m, d, tuple(v)) for (m, d), v in out.items())


@dataclass(frozen=True, slots=True)
class ScoredObs:
    """A batch's prompts (and the answers given) read by another candidate in a prefill-only pass
    at ``depth``: per request, the exit each answered token would take under this model and the
    prompt's perplexity here. Nothing is generated, so it says nothing of speed."""

    model: str
    depth: int
    items: tuple[ItemStats, ...]


@dataclass(frozen=True, slots=True)
class BatchObs:
    model: str
    depth: int
    size: int
    exec_s: float
    items: tuple[ItemStats, ...]
    load_s: float | None = None
    scored: tuple[ScoredObs, ...] = ()  # the same requests scored by other candidates


@dataclass
class Row:
    model: str
    depth: int
    window: int = 64
    batches: deque[BatchObs] = field(default_factory=deque)
    load_s: float | None = None
    # prompts this model read in a scoring pass at this depth (served by another candidate):
    # evidence of accuracy and exits on the same prompts as the others, none of speed
    scored: deque[ItemStats] = field(default_factory=deque)
    added: int = 0  # batches ever added
    # batches added before these counts are kept for speed only (``restart``): their perplexity,
    # and unless kept, their exits, are from before the running re-assessment
    ppl_since: int = 0
    exits_since: int = 0
    mark: int = 0  # batches added when the last decision put this model in service

    def add(self, obs: BatchObs) -> None:
        self.batches.append(obs)
        self.added += 1
        while len(self.batches) > self.window:
            self.batches.popleft()
        if obs.load_s is not None:
            self.load_s = obs.load_s

    def restart(self, exits: bool, since_mark: bool = False) -> None:
        """Evidence from here on only: perplexity always, exits too when ``exits`` (or, with
        ``since_mark``, exits from the last ``mark`` on)."""
        self.ppl_since = self.added
        if exits:
            self.exits_since = self.added
        elif since_mark:
            self.exits_since = max(self.exits_since, self.mark)
        self.scored.clear()

    def _since(self, first: int) -> list[BatchObs]:
        skip = first - (self.added - len(self.batches))
        return list(self.batches)[max(skip, 0):]

    def add_scored(self, items: tuple[ItemStats, ...]) -> None:
        self.scored.extend(items)
        while len(self.scored) > self.window * 4:
            self.scored.popleft()

    def _read(self, since: int, scored: bool = True) -> list[ItemStats]:
        """The requests this row has accuracy (or exit) figures for: served since ``since``, and scored."""
        return [i for b in self._since(since) for i in b.items] + (list(self.scored) if scored else [])

    @property
    def prompts(self) -> int:
        return sum(len(b.items) for b in self.batches)

    @property
    def tokens(self) -> int:
        return sum(i.tokens for b in self.batches for i in b.items)

    @property
    def breaches(self) -> int:
        return sum(i.breaches for b in self.batches for i in b.items)

    def tokens_per_s(self) -> float | None:
        secs = sum(b.exec_s for b in self.batches)
        return self.tokens / secs if secs > 0 and self.tokens else None

    def ttft_s(self) -> float | None:
        """Mean prefill share: a batch of N steps spends about 1/N of its time before its first token."""
        vals = [b.exec_s / max(max((i.tokens for i in b.items), default=1), 1) for b in self.batches]
        return sum(vals) / len(vals) if vals else None

    def mean_batch(self) -> float:
        return sum(b.size for b in self.batches) / len(self.batches) if self.batches else 0.0

    def perplexity(self) -> float | None:
        """Geometric mean of the prompts' perplexities (a mean of their mean log-likelihoods)."""
        logs = [math.log(i.prompt_ppl) for i in self._read(self.ppl_since)
                if i.prompt_ppl is not None and i.prompt_ppl > 0 and math.isfinite(i.prompt_ppl)]
        return math.exp(sum(logs) / len(logs)) if logs else None

    def exit_counts(self) -> list[int]:
        """Tokens by first confident exit, of the tokens this model generated (a scoring pass
        reads prompts only: it adds perplexity, not exits)."""
        out = [0] * (self.depth + 1)
        for i in self._read(self.exits_since, scored=False):
            if i.exits:
                for k, n in enumerate(i.exits[:self.depth + 1]):
                    out[k] += n
            else:  # no per-exit figures: confident tokens counted at the loaded depth
                out[0] += i.breaches
                out[self.depth] += i.tokens - i.breaches
        return out

    def cpu_s_per_token(self) -> float | None:
        rate = self.tokens_per_s()
        return 1.0 / rate if rate else None


class PerformanceHistory:
    """Rows by (model, depth) and the estimates the decisions read."""

    def __init__(self, window: int = 64) -> None:
        self.window = window
        self.rows: dict[tuple[str, int], Row] = {}

    def _row(self, model: str, depth: int) -> Row:
        row = self.rows.get((model, depth))
        if row is None:
            row = self.rows[(model, depth)] = Row(model, depth, self.window)
        return row

    def record(self, obs: BatchObs) -> Row:
        row = self._row(obs.model, obs.depth)
        row.add(obs)
        return row

    def record_scored(self, s: ScoredObs) -> Row:
        row = self._row(s.model, s.depth)
        row.add_scored(s.items)
        return row

    def mark(self, model: str) -> None:
        """A decision put ``model`` in service: ``restart`` may keep its exits from here on."""
        for (m, _), r in self.rows.items():
            if m == model:
                r.mark = r.added

    def restart(self, models: set[str], exits: bool = True, since_mark: bool = False) -> None:
        """Keep ``models``' rows for their speed, but count their perplexity (and, with ``exits``,
        their exits) from here on: a re-assessment compares the candidates on its own prompts,
        while the speed of a depth does not change with the traffic. A breach trip's probe keeps
        the exits (the breaches that tripped are the evidence a load-more is weighed on)."""
        for (m, _), r in self.rows.items():
            if m in models:
                r.restart(exits, since_mark)

    def forget(self, models: set[str]) -> None:
        """Drop every row of ``models``: a re-assessment measures them afresh on today's traffic
        (rows from before a task change would otherwise outvote the evaluation's few prompts)."""
        self.rows = {k: r for k, r in self.rows.items() if k[0] not in models}

    def of(self, model: str) -> list[Row]:
        return [r for (m, _), r in sorted(self.rows.items()) if m == model]

    def exit_share(self, model: str, depth: int) -> float | None:
        """Share of observed tokens whose first confident exit is at or below ``depth``.

        Only rows loaded at least as deep say where a token exits up to ``depth``; a token that
        breached at a shallower depth is counted as needing more (conservative)."""
        covered = total = 0
        for r in self.of(model):
            counts = r.exit_counts()
            total += sum(counts)
            covered += sum(counts[1:min(depth, r.depth) + 1])
        return covered / total if total else None

    def exit_tokens(self, model: str) -> int:
        """Tokens ``exit_share`` rests on (every row's tokens with exit figures): its sample size."""
        return sum(sum(r.exit_counts()) for r in self.of(model))

    def exit_distribution(self, model: str) -> dict[int, int]:
        """Tokens by first confident exit (0: none up to the loaded depth), over every row."""
        out: dict[int, int] = {}
        for r in self.of(model):
            for k, n in enumerate(r.exit_counts()):
                if n:
                    out[k] = out.get(k, 0) + n
        return out

    def snapshot(self) -> list[dict[str, object]]:
        """The table as plain rows (for the CLI and the ``helios.*`` events)."""
        out: list[dict[str, object]] = []
        for (m, d), r in sorted(self.rows.items()):
            out.append({"model": m, "depth": d, "prompts": r.prompts, "scored": len(r.scored), "tokens": r.tokens,
                        "breach_share": round(r.breaches / r.tokens, 4) if r.tokens else None,
                        "tokens_per_s": _r(r.tokens_per_s()), "ttft_s": _r(r.ttft_s(), 6),
                        "perplexity": _r(r.perplexity()), "mean_batch": round(r.mean_batch(), 2),
                        "load_s": _r(r.load_s, 4), "exits": r.exit_counts()})
        return out


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A candidate at a depth, as the PHT (scaled profile where it has no row) expects it to do."""

    model: str
    depth: int
    tokens_per_s: float
    ttft_s: float
    perplexity: float
    cost_per_token: float
    load_s: float
    coverage: float | None
    exit_tokens: int = 0  # the tokens ``coverage`` was read from


def estimate(pht: PerformanceHistory, cand: Candidate, depth: int, batch: int = 1) -> Estimate:
    """What ``cand`` loaded to ``depth`` should do on this traffic in batches of ``batch``.

    The profile's figure at ``depth`` and ``batch`` is scaled by measured / profiled at the
    nearest depth that ran (its own row first), the profiled figure taken at the batch that row
    ran at: the traffic's character (a task the model knows less, longer prompts) carries over
    to depths and batch sizes not yet tried (an evaluation runs a handful of prompts; serving
    under load runs the batch the memory allows)."""
    fig = cand.at(depth)
    rows = pht.of(cand.name)
    own = pht.rows.get((cand.name, depth))
    judged = [r for r in rows if r.perplexity() is not None]
    ref = own if own is not None and own.perplexity() is not None else (
        min(judged, key=lambda r: abs(r.depth - depth)) if judged else None)
    # speed comes only from batches it served (a row read in scoring passes alone has none)
    timed = [r for r in rows if r.batches]
    speed = own if own is not None and own.batches else (
        min(timed, key=lambda r: abs(r.depth - depth)) if timed else None)

    def scaled(measured: float | None, prof_ref: float, prof_here: float) -> float:
        if measured is None or prof_ref <= 0:
            return prof_here
        return measured * prof_here / prof_ref

    rate, ttft, ppl = fig.rate(batch), fig.ttft_s, fig.mean_perplexity()
    if speed is not None:
        sf = cand.at(speed.depth)
        rate = scaled(speed.tokens_per_s(), sf.rate(max(round(speed.mean_batch()), 1)), fig.rate(batch))
        ttft = scaled(speed.ttft_s(), sf.ttft_s, fig.ttft_s)
    if ref is not None:
        ppl = scaled(ref.perplexity(), cand.at(ref.depth).mean_perplexity(), fig.mean_perplexity())
    load = own.load_s if own is not None and own.load_s is not None else fig.load_s
    # CPU-seconds per token: the profile's, scaled as this traffic's rate is to the profiled one
    prof_rate = fig.rate(batch)
    if fig.cpu_s_per_token > 0 and prof_rate > 0 and rate > 0:
        cost = fig.cpu_s_per_token * prof_rate / rate
    else:
        cost = 1.0 / rate if rate > 0 else math.inf
    return Estimate(cand.name, depth, rate, ttft, ppl, cost, load, pht.exit_share(cand.name, depth),
                    pht.exit_tokens(cand.name))
