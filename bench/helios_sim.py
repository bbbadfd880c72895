"""Replaying the drifting stream through the policies with the measured per-token costs.

One worker slot, prompts arriving as a Poisson stream at a given rate, or in a closed loop (a fixed
number of prompts in flight, the next one sent when one finishes: with one in flight, the paper's
own setup, Sec. 4.3 and 5.1); a batch takes a (partial) load when its model and depth are not held
(the worker's cache of runners, evicted least recently used first while their weights exceed the
memory budget, as ``workers/runners.py`` does), a prefill and ``new`` lockstep steps at its depth
and size (or, for ``static-*``, batch size one with each token leaving at its first confident exit,
the EE-LLM baseline, at the ``early-exit`` variant's measured cost). HELIOS runs the planner's own
controller (``planner/helios``): the simulated results feed its PHT exactly as ``batch.finished``
does live.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from adaserve.bench.helios_trace import BATCHES, Costs, Trace
from adaserve.planner.helios import BatchObs, Candidate, DepthFigures, Helios, HeliosParams, ItemStats, ScoredObs
from adaserve.planner.helios.decide import batch_for_memory


def _at(table: dict[int, float], b: int) -> float:
    """Seconds at batch ``b``, linear between the measured sizes (beyond: per-request slope)."""
    sizes = sorted(table)
    if b <= sizes[0]:
        return table[sizes[0]]
    for lo, hi in itertools.pairwise(sizes):
        if b <= hi:
            return table[lo] + (table[hi] - table[lo]) * (b - lo) / (hi - lo)
    lo, hi = sizes[-2], sizes[-1]
    return table[hi] + (table[hi] - table[lo]) / (hi - lo) * (b - hi)


def candidate(c: Costs, profile: Candidate, new: int = 16) -> Candidate:
    """The repository's entry for a model: its offline profile (``helios.json``, read by the
    planner's own reader) with the speed figures replaced by what this run measured side by side
    (the host is shared: a profile's wall-clock rates date from another load)."""
    figs = {}
    for d in c.step_s:
        p = profile.at(d)
        rate = {b: b * new / (c.prefill_s[d][b] + (new - 1) * c.step_s[d][b]) for b in BATCHES}
        figs[d] = DepthFigures(d, rate, c.prefill_s[d][1], p.weight_bytes, p.kv_bytes_per_token, c.load_s[d],
                               1.0 / rate[1], dict(p.perplexity), dict(p.exit_share))
    return Candidate(c.model, profile.family, profile.tau, figs, profile.device)


@dataclass
class Run:
    policy: str
    tokens: int = 0
    busy_s: float = 0.0
    first_arrival: float = 0.0
    last_done: float = 0.0
    ttft: list[float] = field(default_factory=list)
    log_ppl: list[float] = field(default_factory=list)
    task_log_ppl: dict[str, list[float]] = field(default_factory=dict)  # per segment of the stream
    batches: list[int] = field(default_factory=list)
    exits: dict[str, int] = field(default_factory=dict)  # "model@depth" -> tokens
    loads: int = 0
    switches: int = 0
    loaded_more: int = 0
    dropped_back: int = 0
    breach_trips: int = 0
    evaluations: int = 0
    breach_tokens: int = 0
    breach_same: int = 0  # breaching tokens whose token at the served exit is the whole model's
    scoring_s: float = 0.0  # seconds of prefill-only scoring passes (paired evaluation)

    def figures(self) -> dict[str, object]:
        span = max(self.last_done - self.first_arrival, 1e-9)
        t = np.array(self.ttft) if self.ttft else np.zeros(1)
        return {"policy": self.policy, "tokens_per_s": self.tokens / span, "ttft_p50_s": float(np.percentile(t, 50)),
                "ttft_p99_s": float(np.percentile(t, 99)),
                "perplexity": float(math.exp(np.mean(self.log_ppl))) if self.log_ppl else None,
                "perplexity_by_task": {t: float(math.exp(np.mean(v))) for t, v in self.task_log_ppl.items()},
                "cpu_s_per_token": self.busy_s / max(self.tokens, 1), "mean_batch": float(np.mean(self.batches)),
                "exits": dict(sorted(self.exits.items())), "loads": self.loads, "switches": self.switches,
                "loaded_more": self.loaded_more, "dropped_back": self.dropped_back, "breach_trips": self.breach_trips,
                "evaluations": self.evaluations, "scoring_s": self.scoring_s,
                "breach_unchanged": self.breach_same / self.breach_tokens if self.breach_tokens else None}


def simulate(policy: str, arrivals: np.ndarray, traces: dict[str, Trace], costs: dict[str, Costs],
             cands: Sequence[Candidate], *, new: int, memory_mb: float, max_batch: int, objective: str = "throughput",
             params: HeliosParams | None = None, tasks: Sequence[str] | None = None,
             in_flight: int | None = None) -> Run:
    """``in_flight``: a closed loop with that many prompts outstanding (``arrivals`` then gives only
    their number): prompt ``i + in_flight`` arrives when prompt ``i`` finishes, so no policy idles
    and none is capped by an offered rate; tokens/s is then each policy's own speed at that load."""
    if in_flight is not None:
        if in_flight < 1:
            raise ValueError(f"in_flight must be >= 1, got {in_flight}")
        arrivals = np.where(np.arange(len(arrivals)) < in_flight, 0.0, np.inf)
    run = Run(policy, first_arrival=float(arrivals[0]))
    by_name = {c.name: c for c in cands}
    helios = Helios("lm", cands, objective, params) if policy.startswith("helios") else None
    if helios is not None:  # the worker's budget, as its heartbeat tells the live planner
        helios.set_budget(memory_mb, costs[helios.shortlist[0].name].block_size)
    # what the worker holds, as workers/runners.py does: one runner per (model, depth), each
    # loaded whole from disk, the least recently used evicted while their weights exceed the budget
    held: dict[tuple[str, int], int] = {}
    now, nxt, n = 0.0, 0, len(arrivals)
    while nxt < n:
        now = max(now, float(arrivals[nxt]))
        waiting = int(np.searchsorted(arrivals, now, side="right")) - nxt
        if policy.startswith("static-"):
            model, depth, limit = policy[7:], by_name[policy[7:]].max_depth, 1
        elif policy.startswith("fixed-"):
            model, _, d = policy[6:].rpartition("-d")
            depth, limit = int(d), None
        else:
            assert helios is not None
            model, depth, limit = helios.target()
        c, tr = costs[model], traces[model]
        size = batch_for_memory(by_name[model].at(depth), memory_mb, c.block_size, max_batch)
        size = min(size, waiting, limit or size)
        batch = list(range(nxt, nxt + size))
        load = 0.0
        if (model, depth) not in held:
            load = c.load_s[depth]
            run.loads += 1
        held[(model, depth)] = len(run.batches)  # last used
        _evict(held, costs, memory_mb, keep={(model, depth)})
        ei = tr.exits.index(depth) if depth in tr.exits else len(tr.exits) - 1
        if policy.startswith("static-"):
            p = batch[0]
            # the early-exit variant's measured seconds for a prompt of this task (its tokens
            # leave at their first confident exit, but every exit head is read on the way)
            task = tasks[p] if tasks is not None and tasks[p] in c.early_exit_s else None
            exec_s = c.early_exit_s[task] if task else float(np.mean(list(c.early_exit_s.values())))
            static_ttft = c.early_exit_ttft_s[task] if task else float(np.mean(list(c.early_exit_ttft_s.values())))
            for e in tr.exit_at_tau[p]:
                key = f"{model}@{e if e else depth}"
                run.exits[key] = run.exits.get(key, 0) + 1
        else:
            exec_s = _at(c.prefill_s[depth], size) + (new - 1) * _at(c.step_s[depth], size)
            run.exits[f"{model}@{depth}"] = run.exits.get(f"{model}@{depth}", 0) + new * size
        scored: list[ScoredObs] = []
        scoring = 0.0  # the other candidates' prefill-only passes over this batch, after it
        if helios is not None:
            for other, sd, rows in helios.score_with(model, size):
                if (other, sd) not in held:
                    scoring += costs[other].load_s[sd]
                    run.loads += 1
                held[(other, sd)] = len(run.batches)
                _evict(held, costs, memory_mb, keep={(other, sd), (model, depth)})
                # one prefill over the first ``rows`` prompts (the measured prefill: it includes
                # a first token's head, a little more than a scoring pass needs)
                scoring += _at(costs[other].prefill_s[sd], rows)
                scored.append(ScoredObs(other, sd, tuple(_scored(traces[other], p, sd) for p in batch[:rows])))
            run.scoring_s += scoring
        start = now + load
        for p in batch:
            run.ttft.append(start + (exec_s / new if not policy.startswith("static-") else static_ttft)
                            - float(arrivals[p]))
            run.log_ppl.append(math.log(float(tr.ppl[p, ei])))
            if tasks is not None:
                run.task_log_ppl.setdefault(tasks[p], []).append(run.log_ppl[-1])
            e = tr.exit_at_tau[p]
            breach = (e == 0) | (e > depth)
            run.breach_tokens += int(breach.sum()) if not policy.startswith("static-") else 0
            run.breach_same += int((breach & tr.agree[p, :, ei]).sum()) if not policy.startswith("static-") else 0
        now = start + exec_s + scoring  # the answers are out before the scoring; the slot is not
        run.busy_s += load + exec_s + scoring
        run.tokens += new * size
        run.batches.append(size)
        run.last_done = now
        if in_flight is not None:  # each finished prompt lets the next one in
            later = [p + in_flight for p in batch if p + in_flight < n]
            arrivals[later] = now
        nxt += size
        if helios is not None:
            helios.dispatched(model, depth, size, waiting)
            items = tuple(_item(tr, p, depth, ei, new) for p in batch)
            helios.observe(BatchObs(model, depth, size, exec_s, items, load if load > 0 else None, tuple(scored)))
            helios.events.clear()
    if helios is not None:
        run.loaded_more = helios.counts["loads"]
        run.dropped_back = helios.counts["drops"]
        run.breach_trips = helios.counts["breach_trips"]
        run.switches = helios.counts["switches"]
        run.evaluations = helios.counts["evaluations"]
        run.loads = max(run.loads, helios.counts["loads"])
    return run


def _evict(held: dict[tuple[str, int], int], costs: dict[str, Costs], memory_mb: float,
           keep: set[tuple[str, int]]) -> None:
    budget = memory_mb * 2**20
    while sum(costs[m].weight_bytes[d] for m, d in held) > budget:
        victims = [k for k in held if k not in keep]
        if not victims:
            return  # the one in use alone exceeds the budget: it is served anyway
        del held[min(victims, key=lambda k: held[k])]


def _scored(tr: Trace, p: int, depth: int) -> ItemStats:
    """What ``tr``'s model reads of prompt ``p`` in a prefill-only pass at ``depth``: the prompt's
    perplexity there (no tokens: nothing is generated)."""
    ei = tr.exits.index(depth) if depth in tr.exits else len(tr.exits) - 1
    return ItemStats(0, 0, (), float(tr.ppl[p, ei]))


def _item(tr: Trace, p: int, depth: int, ei: int, new: int) -> ItemStats:
    e = np.where(tr.exit_at_tau[p] > depth, 0, tr.exit_at_tau[p])
    exits = np.bincount(e, minlength=depth + 1).tolist()
    return ItemStats(new, int((e == 0).sum()), tuple(int(x) for x in exits), float(tr.ppl[p, ei]))
