"""HELIOS's decisions as pure functions of the repository and the PHT.

* ``shortlist``: the top K candidates for the objective from the offline figures (Step 1);
* ``greedy_depth``: the shallowest exit that covers ``coverage`` of the tokens' exits (Step 3),
  judged with the sample's size (``covers``);
* ``choose``: after an evaluation round, the candidate and depth that best meet the objective
  among the accurate enough ones (``_accurate``: within ``ppl_slack`` of what static selection
  would serve this traffic with, or of the best option under the ``accuracy`` objective; Step 2);
* ``load_more_or_switch``: on a tripped breach counter, loading more layers of the current model
  against switching to another candidate at its own greedy depth (or deeper, when that is not
  accurate enough), by which meets the objective
  at the least cost over the coming ``horizon`` tokens *including* the measured load time;
* ``batch_for_memory``: the batch that fits a worker's memory with weights and KV cache at the
  loaded depth (partial loading turned into larger batches, Sec. 5.2);
* ``eval_depth``: the deepest exit at which a candidate's evaluation prompts fit one batch;
* ``drop_back_depth``: after a load-more, the shallower depth the recent tokens cover again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .pht import Estimate, PerformanceHistory, estimate
from .repository import Candidate, DepthFigures

OBJECTIVES = ("throughput", "latency", "accuracy", "energy")
# The batch an option would run at: a number, or per (candidate, depth) (what the memory budget
# allows at that depth, up to what the queue holds; the controller's ``_batch_of``).
Batch = int | Callable[[Candidate, int], int]


def _at(batch: Batch, c: Candidate, depth: int) -> int:
    return batch(c, depth) if callable(batch) else batch


def profile_score(fig: DepthFigures, objective: str, batch: int = 1) -> float:
    """Lower is better: the objective's figure from the offline profile."""
    if objective == "throughput":
        rate = fig.rate(batch)
        return 1.0 / rate if rate > 0 else math.inf
    if objective == "latency":
        return fig.ttft_s
    if objective == "accuracy":
        return fig.mean_perplexity()
    if objective == "energy":
        return fig.cpu_s_per_token if fig.cpu_s_per_token > 0 else profile_score(fig, "throughput", batch)
    raise ValueError(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")


def score(e: Estimate, objective: str) -> float:
    """Lower is better: the objective's figure as the PHT estimates it."""
    if objective == "throughput":
        return 1.0 / e.tokens_per_s if e.tokens_per_s > 0 else math.inf
    if objective == "latency":
        return e.ttft_s
    if objective == "accuracy":
        return e.perplexity
    if objective == "energy":
        return e.cost_per_token
    raise ValueError(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")


def shortlist(cands: Sequence[Candidate], objective: str, k: int = 2, ppl_slack: float = 0.5) -> list[Candidate]:
    """The top ``k`` for ``objective`` from the offline figures at full depth.

    The repository's benchmarks decide who is competent (perplexity within ``ppl_slack`` of the
    best, a loose bound: the evaluation on real traffic is the fine one). A candidate that is the
    most accurate on one of the profiled tasks is kept first (the traffic may turn into that
    task: a shortlist of the two fastest generalists could not follow it), then the objective
    fills the list; the result is in the objective's order, and the incompetent ones fill it only
    when too few are competent."""
    if not cands:
        return []
    full = {c.name: c.at(c.max_depth) for c in cands}
    best_ppl = min(f.mean_perplexity() for f in full.values())
    competent = [c for c in cands if full[c.name].mean_perplexity() <= best_ppl * (1 + ppl_slack)]

    def by_objective(c: Candidate) -> tuple[float, str]:
        return profile_score(full[c.name], objective), c.name

    tasks = sorted({t for f in full.values() for t in f.perplexity})
    winners = {min(competent, key=lambda c: (full[c.name].perplexity.get(t, math.inf), c.name)).name
               for t in tasks} if competent else set()
    ranked = sorted(competent, key=lambda c: (c.name not in winners, *by_objective(c)))
    rest = sorted((c for c in cands if c not in competent), key=lambda c: full[c.name].mean_perplexity())
    return sorted(ranked[:max(k, 1)], key=by_objective) + rest[:max(k, 1) - len(ranked)]


def covers(share: float | None, tokens: int, coverage: float, z: float = 0.0) -> bool:
    """Whether a depth whose observed share of confident tokens is ``share``, read from ``tokens``
    tokens, covers ``coverage``.

    ``z`` > 0: unless the sample shows it falls short, i.e. ``share`` lies more than ``z`` binomial
    standard errors of that many tokens (at ``coverage``) below ``coverage``; no sample shows
    nothing. An evaluation reads 5-8 prompts, 80-128 tokens: a depth that covers 71.5% of a task's
    tokens (ee-lm-code's depth 2 on Python, 96 wide) read under 0.65 in enough of them that the
    point rule offered only the whole model (docs/helios.md, "Eighth session"); at z 1.645 a
    depth right at the bar is rejected 5% of the time, one 0.1 under it (ee-lm-s's depth 2 on
    Python, 0.55) from 80 tokens on. Tokens of one prompt are correlated, so the binomial error
    is the least the sample's is: the test leans to the point rule, not past it. ``z`` 0: the
    point rule (no sample: not covered)."""
    if share is None or tokens <= 0:
        return z > 0
    return share >= coverage - z * math.sqrt(coverage * (1.0 - coverage) / tokens)


def greedy_depth(pht: PerformanceHistory, cand: Candidate, coverage: float, z: float = 0.0) -> int:
    """The shallowest exit of ``cand`` that covers ``coverage`` of the observed tokens (``covers``:
    with ``z`` 0, whose share reaches it; the whole model when no exit does, or, with ``z`` 0,
    nothing was observed)."""
    n = pht.exit_tokens(cand.name)
    return next((d for d in cand.depths if covers(pht.exit_share(cand.name, d), n, coverage, z)), cand.max_depth)


def profile_depth(cand: Candidate, coverage: float) -> int:
    """The greedy depth the repository's figures give before this traffic has been seen: the
    deepest any profiled task needs (each task's shallowest exit whose held-out share reaches
    ``coverage``; the whole model for a task no exit covers)."""
    need = cand.max_depth if not cand.at(cand.max_depth).exit_share else 0
    for task in cand.at(cand.max_depth).exit_share:
        need = max(need, next((d for d in cand.depths if cand.at(d).exit_share.get(task, 0.0) >= coverage),
                              cand.max_depth))
    return need


def shallowest_depth(cand: Candidate, ref: Candidate, ppl_slack: float) -> int:
    """The shallowest exit the repository's figures say is accurate enough on some profiled task
    (perplexity within ``ppl_slack`` of ``ref`` whole on that task): the shallowest depth a
    decision could choose for this candidate on that task's traffic."""
    whole = ref.at(ref.max_depth).perplexity
    for d in cand.depths:
        fig = cand.at(d).perplexity
        if any(t in whole and v <= whole[t] * (1 + ppl_slack) for t, v in fig.items()):
            return d
    return cand.max_depth


@dataclass(frozen=True, slots=True)
class Choice:
    model: str
    depth: int
    action: str  # "select", "load_more", "switch", "stay"
    cost_s: float
    options: tuple[dict[str, object], ...]  # every option weighed, with the figures that decided


def _row(e: Estimate, cost: float, action: str) -> dict[str, object]:
    return {"model": e.model, "depth": e.depth, "action": action, "tokens_per_s": round(e.tokens_per_s, 3),
            "ttft_s": round(e.ttft_s, 6), "perplexity": round(e.perplexity, 4),
            "cost_per_token": round(e.cost_per_token, 8), "load_s": round(e.load_s, 4),
            "coverage": None if e.coverage is None else round(e.coverage, 4), "exit_tokens": e.exit_tokens,
            "cost": round(cost, 6)}


def reference(cands: Sequence[Candidate]) -> Candidate:
    """The candidate static selection would serve every prompt with: the most accurate by the
    repository's benchmark figures at full depth (Sec. 1: static selection rests on generic
    telemetry). Its perplexity *on this traffic* is the accuracy a cost objective must keep."""
    return min(cands, key=lambda c: (c.at(c.max_depth).mean_perplexity(), c.name))


def _accurate(options: list[tuple[Estimate, str]], objective: str, ppl_slack: float,
              ref_ppl: float | None) -> list[tuple[Estimate, str]]:
    """The options accurate enough for ``objective``.

    ``accuracy``: within ``ppl_slack`` of the best option (the user asked for the best model).
    Any other objective: within ``ppl_slack`` of ``ref_ppl``, the static selection's model whole
    on this traffic: the paper's promise is accuracy comparable to static selection while the
    objective is optimised (abstract, Sec. 5.1), not the accuracy of whichever candidate happens to
    be best on this segment; holding a cost objective to the latter made a better model for the
    segment a reason to serve it slower. When no option reaches that (the reference's figures are
    poor on this traffic), the best option's bound applies, so some option always qualifies."""
    best_ppl = min(e.perplexity for e, _ in options)
    bound = best_ppl if objective == "accuracy" or ref_ppl is None else max(ref_ppl, best_ppl)
    return [o for o in options if o[0].perplexity <= bound * (1 + ppl_slack)]


def _best(options: list[tuple[Estimate, str]], objective: str, ppl_slack: float, horizon: int,
          loaded: set[tuple[str, int]], coverage: float, ref_ppl: float | None = None, z: float = 0.0) -> Choice:
    """The option with the least cost over ``horizon`` tokens among the accurate enough ones.

    Accurate enough: ``_accurate``; among those, the ones whose tokens are confident at their
    depth for at least ``coverage`` of this traffic (as far as the PHT knows, ``covers`` with
    ``z``; all of them when none is). Accuracy comes first: a model can be confident and still
    worse on this task. Cost is in the objective's unit times tokens, plus the load time where the
    option needs a load (for accuracy: perplexity first, then the cost)."""
    accurate = _accurate(options, objective, ppl_slack, ref_ppl)
    confident = [o for o in accurate if o[0].coverage is None
                 or covers(o[0].coverage, o[0].exit_tokens, coverage, z)] or accurate
    rows, ok = [], []
    for e, action in options:
        load = 0.0 if (e.model, e.depth) in loaded else e.load_s
        if objective == "latency":
            cost = e.ttft_s * max(horizon // 16, 1) + load  # one first token per prompt of ~16 tokens
        elif objective == "energy":
            cost = e.cost_per_token * horizon + load
        else:
            cost = (horizon / e.tokens_per_s if e.tokens_per_s > 0 else math.inf) + load
        rows.append(_row(e, cost, action))
        if (e, action) in confident:
            ok.append((e.perplexity if objective == "accuracy" else cost, cost, e, action))
    _, cost, e, action = min(ok, key=lambda t: (t[0], t[1], t[2].model, t[2].depth))
    return Choice(e.model, e.depth, action, cost, tuple(rows))


def _ref_ppl(pht: PerformanceHistory, cands: Sequence[Candidate], ref: Candidate | None) -> float | None:
    """The static selection's perplexity on this traffic, whole model (PHT-scaled)."""
    ref = ref or (reference(cands) if cands else None)
    return None if ref is None else estimate(pht, ref, ref.max_depth).perplexity


def choose(pht: PerformanceHistory, cands: Sequence[Candidate], objective: str, *, coverage: float,
           ppl_slack: float, horizon: int, batch: Batch = 1, partial: bool = True,
           loaded: set[tuple[str, int]] | None = None, ref: Candidate | None = None, z: float = 0.0) -> Choice:
    """After evaluation: each candidate at its greedy depth and the exits below it (only whole
    without ``partial``): the deeper ones are the fallback when the greedy depth is not accurate
    enough. ``ref``: the static selection's candidate (default: ``reference(cands)``); ``z``:
    how the exits' sample is judged (``covers``)."""
    options = []
    for c in cands:
        for d in _depths(pht, c, coverage, z) if partial else (c.max_depth,):
            options.append((estimate(pht, c, d, _at(batch, c, d)), "select"))
    return _best(options, objective, ppl_slack, horizon, loaded or set(), coverage,
                 _ref_ppl(pht, cands, ref), z)


def load_more_or_switch(pht: PerformanceHistory, cands: Sequence[Candidate], current: str, depth: int,
                        objective: str, *, coverage: float, ppl_slack: float, horizon: int, batch: Batch = 1,
                        switching: bool = True, loaded: set[tuple[str, int]] | None = None,
                        exclude: frozenset[str] = frozenset(), ref: Candidate | None = None,
                        z: float = 0.0) -> Choice:
    """The breach counter tripped while ``current`` runs at ``depth``: load the next deeper exit
    of the current model that the PHT says covers ``coverage`` of the tokens (at least one exit
    deeper), or switch to another candidate at its own greedy depth: whichever costs least.
    Candidates in ``exclude`` (the controller's hysteresis: models left since the last
    re-assessment) are not switched to."""
    by_name = {c.name: c for c in cands}
    cur = by_name[current]
    deeper = [d for d in cur.depths if d > depth]
    options: list[tuple[Estimate, str]] = []
    if deeper:
        n = pht.exit_tokens(current)
        d = next((x for x in deeper if covers(pht.exit_share(current, x), n, coverage, z)), deeper[-1])
        options.append((estimate(pht, cur, d, _at(batch, cur, d)), "load_more"))
    else:  # the whole model is loaded already: staying is the alternative to a switch
        options.append((estimate(pht, cur, depth, _at(batch, cur, depth)), "stay"))
    if switching:
        for c in cands:
            if c.name != current and c.name not in exclude:
                options += [(estimate(pht, c, d, _at(batch, c, d)), "switch") for d in _depths(pht, c, coverage, z)]
    return _best(options, objective, ppl_slack, horizon, loaded or set(), coverage,
                 _ref_ppl(pht, cands, ref), z)


def _depths(pht: PerformanceHistory, cand: Candidate, coverage: float, z: float = 0.0) -> tuple[int, ...]:
    """The depths a candidate is offered at: its greedy depth and every deeper exit, so that the
    shallowest one accurate enough wins (a greedy depth can cost more perplexity than allowed)."""
    g = greedy_depth(pht, cand, coverage, z)
    return tuple(d for d in cand.depths if d >= g)


def batch_for_memory(fig: DepthFigures, memory_mb: float | None, context_tokens: int, cap: int) -> int:
    """The largest batch whose weights plus KV cache (``context_tokens`` per sequence) fit
    ``memory_mb``; ``cap`` when no budget is known, and at least 1 (a model that does not fit
    at all is the admission's business, not a batch size's)."""
    if memory_mb is None or memory_mb <= 0:
        return cap
    free = memory_mb * 2**20 - fig.weight_bytes
    per_seq = max(fig.kv_bytes_per_token * context_tokens, 1)
    return max(1, min(cap, int(free // per_seq)))


def eval_depth(cand: Candidate, memory_mb: float | None, context_tokens: int, prompts: int) -> int:
    """Where a candidate's evaluation runs: the deepest exit at which its ``prompts`` evaluation
    prompts fit one batch in ``memory_mb`` (the whole model without a budget; the shallowest exit
    when not even that fits them). The exits the PHT needs are read off every head up to that
    depth; deeper ones are estimated (``pht.estimate``). Evaluating whole where the whole model
    fits one sequence served the evaluation one prompt at a time."""
    if memory_mb is None or memory_mb <= 0:
        return cand.max_depth
    fits = [d for d in cand.depths if batch_for_memory(cand.at(d), memory_mb, context_tokens, prompts) >= prompts]
    return fits[-1] if fits else cand.depths[0]


def drop_back_depth(cand: Candidate, exits: Sequence[int], loaded: int, floor: int, coverage: float) -> int | None:
    """After a load-more to ``loaded``: the shallowest exit in ``floor`` .. below ``loaded`` that
    covers ``coverage`` of the recent tokens (``exits[k]``: tokens whose first confident exit is
    k, 0 none), None when none does. ``floor`` is the depth the last selection or switch chose,
    which was held to the accuracy bound; going below it is the next decision's business. The
    bar is the one greedy loading sets (``coverage``; 0.65 by default, above the counter's trip at
    more than 50 breaches in 100 tokens), so a depth dropped back to does not trip again at once."""
    total = sum(exits)
    if total <= 0:
        return None
    for d in cand.depths:
        if floor <= d < loaded and sum(exits[1:d + 1]) / total >= coverage:
            return d
    return None
