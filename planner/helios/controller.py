"""HELIOS's run-time loop (Algorithm 1) as a pure state machine over prompts and results.

``target()`` says which candidate and depth the next batch runs and how many prompts it may take;
``dispatched`` counts prompts out; ``observe`` takes a finished batch's results into the PHT and
the breach counter and makes the decisions. The phases:

1. **evaluate**: each shortlisted candidate serves the next ``eval_prompts`` prompts in turn,
   whole (every exit head read), as real answers; once every candidate's results are in, the
   PHT chooses the candidate and its greedy depth (``helios.evaluated``);
2. **serve**: batches run at that depth; results feed the counter; when it trips, load more
   layers (``helios.loaded_more``) or switch (``helios.switched``), by ``load_more_or_switch``;
3. every ``reassess`` prompts the candidates are evaluated again (back to 1).

No clock is read and nothing is published here: events are returned for the shell to send.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaserve.broker.errors import ConfigError

from .cbc import BreachCounter
from .decide import OBJECTIVES, Choice, choose, load_more_or_switch, shortlist
from .pht import BatchObs, PerformanceHistory
from .repository import Candidate

Event = tuple[str, dict[str, object]]


@dataclass(frozen=True)
class HeliosParams:
    k: int = 2
    eval_prompts: int = 5
    coverage: float = 0.65
    window: int = 100
    breach_limit: int = 50
    reassess: int = 150
    ppl_slack: float = 0.05
    switching: bool = True  # ablation: off = no load-more-or-switch on breaches, no re-assessment
    partial: bool = True    # ablation: off = always the whole model
    horizon_tokens: int = 2000  # tokens a decision is amortised over (the load time against them)
    # The confidence threshold a token's exit is judged by: 0.4, not the paper's 0.8. These
    # character models are rarely sure (at 0.8 only 19-31% of ee-lm-s's tokens are confident at
    # any exit: no depth covers ``coverage`` and partial loading never engages); at 0.4 a partial
    # depth of each task's best model covers 65% on its own task, and the counter trips when the
    # task changes under it (docs/helios.md, "tau and coverage", has the figures). It travels
    # with each request (the runner's ``tau`` input).
    tau: float = 0.4

    def __post_init__(self) -> None:
        if self.k < 1 or self.eval_prompts < 1 or self.reassess < 1 or self.horizon_tokens < 1:
            raise ConfigError("HELIOS k, eval_prompts, reassess and horizon_tokens must be >= 1")
        if not 0.0 < self.tau < 1.0:
            raise ConfigError(f"HELIOS tau must lie in (0, 1), got {self.tau}")
        if not 0.0 < self.coverage <= 1.0 or self.ppl_slack < 0:
            raise ConfigError(f"coverage must be in (0, 1] and ppl_slack >= 0, got {self.coverage}, {self.ppl_slack}")


class Helios:
    def __init__(self, family: str, candidates: Sequence[Candidate], objective: str = "throughput",
                 params: HeliosParams | None = None) -> None:
        if objective not in OBJECTIVES:
            raise ConfigError(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")
        if not candidates:
            raise ConfigError(f"family {family!r} has no candidate models")
        self.family, self.objective = family, objective
        self.p = params or HeliosParams()
        self.all = tuple(candidates)
        self.shortlist = shortlist(self.all, objective, self.p.k)
        self.by_name = {c.name: c for c in self.all}
        self.pht = PerformanceHistory()
        self.cbc = BreachCounter(self.p.window, self.p.breach_limit)
        self.phase = "evaluate"
        self.model = self.shortlist[0].name
        self.depth = self.shortlist[0].max_depth
        self.loaded: set[tuple[str, int]] = set()  # (model, depth) some worker has loaded
        self._eval_sent = [0] * len(self.shortlist)
        self._eval_seen = [0] * len(self.shortlist)
        self._eval_extra = 0
        self._since_select = 0
        self.counts = {"evaluations": 0, "loads": 0, "switches": 0, "breach_trips": 0}
        self.events: list[Event] = []
        self._tripped_at = 0  # breaches in the window when the counter last tripped
        # Hysteresis: models a breach decision left since the last selection. A breach never
        # switches back to one of them; the next re-assessment, with fresh figures for every
        # candidate, is where a return is decided (else two candidates whose PHT rows age at
        # different rates trade places on every trip).
        self._left: set[str] = set()
        self._stale: set[str] = set()  # candidates whose rows the running re-assessment replaces

    # -- what the next batch runs --------------------------------------------------------------
    def target(self) -> tuple[str, int, int | None]:
        """(model, depth, most prompts this batch may take: None for no limit of HELIOS's own)."""
        if self.phase == "evaluate":
            for i, c in enumerate(self.shortlist):
                if self._eval_sent[i] < self.p.eval_prompts:
                    return c.name, c.max_depth, self.p.eval_prompts - self._eval_sent[i]
            # every evaluation prompt is out: serve on with the last one until the results are in
            last = self.shortlist[-1]
            return last.name, last.max_depth, None
        return self.model, self.depth, None

    def dispatched(self, model: str, depth: int, n: int) -> None:
        if self.phase == "evaluate":
            for i, c in enumerate(self.shortlist):
                if c.name == model and self._eval_sent[i] < self.p.eval_prompts:
                    self._eval_sent[i] += n
                    return
            self._eval_extra += n  # served on while the evaluation's results come in
            return
        self._since_select += n
        if self.p.switching and self._since_select >= self.p.reassess:
            self._start_evaluation()

    def _start_evaluation(self) -> None:
        # each candidate's rows are dropped when its first evaluation result comes in (not now:
        # the table stays readable meanwhile), so the choice rests on today's traffic only
        self._stale = {c.name for c in self.shortlist}
        self.phase = "evaluate"
        self._eval_sent = [0] * len(self.shortlist)
        self._eval_seen = [0] * len(self.shortlist)
        self._eval_extra = 0

    # -- results -------------------------------------------------------------------------------
    def observe(self, obs: BatchObs) -> list[Event]:
        if obs.model not in self.by_name:
            return []
        if obs.model in self._stale and self.phase == "evaluate" and obs.depth == self.by_name[obs.model].max_depth:
            self.pht.forget({obs.model})
            self._stale.discard(obs.model)
        self.pht.record(obs)
        self.loaded.add((obs.model, obs.depth))
        if self.phase == "evaluate":
            for i, c in enumerate(self.shortlist):
                if c.name == obs.model and obs.depth == c.max_depth:
                    self._eval_seen[i] += len(obs.items)
            # Every candidate's evaluation prompts are back; or, when some never come back (expired,
            # failed), every candidate has results and as many prompts again went out meanwhile.
            late = self._eval_extra >= self.p.eval_prompts * len(self.shortlist)
            if all(seen >= self.p.eval_prompts for seen in self._eval_seen) or (
                    late and all(seen > 0 for seen in self._eval_seen)):
                self._select()
            return self._take()
        if obs.model != self.model or obs.depth != self.depth:
            return self._take()  # a batch planned before the last decision
        for it in obs.items:
            if self.cbc.add_many(it.tokens, it.breaches):
                self._breach()
                break
        return self._take()

    def _select(self) -> None:
        """Evaluation done: the PHT picks the candidate and its depth."""
        c = choose(self.pht, self.shortlist, self.objective, coverage=self.p.coverage, ppl_slack=self.p.ppl_slack,
                   horizon=self.p.horizon_tokens, partial=self.p.partial, loaded=self.loaded)
        before = (self.model, self.depth)
        first = self.counts["evaluations"] == 0
        self._apply(c)
        self._left.clear()
        self.phase, self._since_select = "serve", 0
        self.counts["evaluations"] += 1
        self.events.append(("helios.evaluated", self._body(c, before)))
        if not first and c.model != before[0]:
            # a re-assessment that moves to another candidate is a switch (Sec. 3.4.2)
            self.counts["switches"] += 1
            self.events.append(("helios.switched", {**self._body(c, before), "action": "reassess"}))

    def _breach(self) -> None:
        self.counts["breach_trips"] += 1
        if not self.p.partial and not self.p.switching:
            self.cbc.reset()
            return
        c = load_more_or_switch(self.pht, self.shortlist, self.model, self.depth, self.objective,
                                coverage=self.p.coverage, ppl_slack=self.p.ppl_slack, horizon=self.p.horizon_tokens,
                                switching=self.p.switching, loaded=self.loaded, exclude=frozenset(self._left))
        before, self._tripped_at = (self.model, self.depth), self.cbc.count
        self.cbc.reset()
        if c.action == "stay" or (c.model, c.depth) == before:
            return
        self._apply(c)
        if c.action == "load_more":
            self.counts["loads"] += 1
            self.events.append(("helios.loaded_more", self._body(c, before)))
        else:
            self._left.add(before[0])
            self.counts["switches"] += 1
            self.events.append(("helios.switched", self._body(c, before)))

    def _apply(self, c: Choice) -> None:
        self.model, self.depth = c.model, c.depth
        self.cbc.reset()

    def _body(self, c: Choice, before: tuple[str, int]) -> dict[str, object]:
        return {"family": self.family, "objective": self.objective, "from_model": before[0],
                "from_depth": before[1], "model": c.model, "depth": c.depth, "action": c.action,
                "options": list(c.options), "breaches": self._tripped_at}

    def _take(self) -> list[Event]:
        out, self.events = self.events, []
        return out

    def snapshot(self) -> dict[str, object]:
        return {"family": self.family, "objective": self.objective, "phase": self.phase, "model": self.model,
                "depth": self.depth, "shortlist": [c.name for c in self.shortlist], "counts": dict(self.counts),
                "breaches": self.cbc.count, "rows": self.pht.snapshot()}
