"""HELIOS's run-time loop (Algorithm 1) as a pure state machine over prompts and results.

``target()`` says which candidate and depth the next batch runs and how many prompts it may take;
``dispatched`` counts prompts out; ``observe`` takes a finished batch's results into the PHT and
the breach counter and makes the decisions. The phases:

1. **evaluate**: each shortlisted candidate serves the next ``eval_prompts`` prompts in turn
   (more in its batches when more wait), at the depth it is expected to serve at and no
   deeper than the memory budget fits them (every exit head up to it read), as real answers;
   once every candidate's results are in, the PHT chooses the candidate and its greedy depth
   (``helios.evaluated``);
2. **serve**: batches run at that depth; results feed the counter; when it trips, load more
   layers (``helios.loaded_more``) or switch (``helios.switched``), by ``load_more_or_switch``;
   once the tokens at a loaded-more depth show the chosen depth covering them again, drop back
   to it (``helios.dropped_back``);
3. every ``reassess`` prompts the candidates are evaluated again (back to 1).

No clock is read and nothing is published here: events are returned for the shell to send.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from adaserve.broker.errors import ConfigError

from .cbc import BreachCounter
from .decide import (
    OBJECTIVES,
    Choice,
    batch_for_memory,
    choose,
    drop_back_depth,
    eval_depth,
    greedy_depth,
    load_more_or_switch,
    profile_depth,
    reference,
    shallowest_depth,
    shortlist,
)
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
    # Paired evaluation (docs/helios.md, "Paired evaluation"): the candidates are compared on the
    # same prompts. The first candidate's evaluation batches are also read by every other
    # shortlisted candidate in a prefill-only scoring pass at its evaluation depth
    # (``score_with``: up to ``score_prompts`` prompts each per round; ``pair_each`` below), a
    # breach trip first has that many of the next prompts scored by the others before it weighs
    # load-more against switch (perplexity counted, while scores come back, on the scored
    # prompts only), evaluations run at the shallowest depth the repository admits, and a
    # re-assessment keeps the rows for their speed and the serving model's exits since the last
    # decision when no breach tripped since. Off: the fourth session's decisions.
    paired: bool = True
    score_prompts: int = 5
    # Which evaluation batches are scored (docs/helios.md, "Seventh session"): only the round's
    # first candidate's, read by every other candidate, so that all of them hold the same
    # ``score_prompts`` prompts; True: every candidate's batches are read by the others (the fifth
    # session's two-way pairing: twice the scoring passes for the same kind of evidence).
    pair_each: bool = False
    # Every evaluation batch of a candidate may take what waits (up to what the memory allows at
    # its evaluation depth) until its ``eval_prompts`` are out; False: only its first batch, the
    # later ones just the prompts its evaluation still lacks (the fifth session's). Under load
    # the queue is still filling when the first round starts: a first batch of 1 was followed by
    # one of 4, where a full batch costs little more.
    full_width: bool = True
    # How a depth's coverage is read from a sample of exits (``decide.covers``): a depth counts as
    # covering unless its share falls more than this many binomial standard errors under
    # ``coverage``; 0: the point rule (the share must reach ``coverage``; nothing seen, nothing
    # covered). The point rule on an 8-prompt evaluation offered a candidate whose partial depth
    # covers 71.5% of the task's tokens only whole (docs/helios.md, "Ninth session").
    coverage_z: float = 1.645
    # At a breach trip the other candidates' exits are forgotten: they were read on the traffic
    # the trip says has gone, and with ``coverage_z`` > 0 a candidate with none is offered at
    # every depth its probed perplexity admits. Kept and read by the point rule, they offered
    # ee-lm-code (96 wide) on Python only whole, from its evaluation on Shakespeare
    # (docs/helios.md, "Eighth session"; "Ninth session" measures each rule alone).
    trip_forgets_exits: bool = True

    def __post_init__(self) -> None:
        if min(self.k, self.eval_prompts, self.reassess, self.horizon_tokens, self.score_prompts) < 1:
            raise ConfigError("HELIOS k, eval_prompts, reassess, horizon_tokens and score_prompts must be >= 1")
        if self.score_prompts > 1024:
            raise ConfigError(f"HELIOS score_prompts must be at most 1024 (a plan's rows), got {self.score_prompts}")
        if not 0.0 < self.tau < 1.0:
            raise ConfigError(f"HELIOS tau must lie in (0, 1), got {self.tau}")
        if not 0.0 < self.coverage <= 1.0 or self.ppl_slack < 0 or self.coverage_z < 0:
            raise ConfigError(f"coverage must be in (0, 1], ppl_slack and coverage_z >= 0, got {self.coverage}, "
                              f"{self.ppl_slack}, {self.coverage_z}")


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
        self.reference = reference(self.shortlist)  # what static selection would serve with
        self.by_name = {c.name: c for c in self.all}
        self.pht = PerformanceHistory()
        self.cbc = BreachCounter(self.p.window, self.p.breach_limit)
        self.phase = "evaluate"
        self.model = self.shortlist[0].name
        self.depth = self.shortlist[0].max_depth
        self.loaded: set[tuple[str, int]] = set()  # (model, depth) some worker has loaded
        # the serving pool's memory budget and context per sequence (the scheduler's, when known):
        # where an evaluation batch fits
        self.memory_mb: float | None = None
        self.context_tokens = 128
        self._eval_at: list[int | None] = [None] * len(self.shortlist)  # depth each evaluation ran at
        # prompts waiting when each of the last batches was formed: the demand a decision sizes
        # its options' batches by (under load, the batch the memory allows at their depth)
        self._waiting: deque[int] = deque(maxlen=16)
        self._eval_sent = [0] * len(self.shortlist)
        self._eval_seen = [0] * len(self.shortlist)
        self._scored = [0] * len(self.shortlist)  # prompts each scored in this round
        self._eval_extra = 0
        self._since_select = 0
        self.counts = {"evaluations": 0, "loads": 0, "switches": 0, "breach_trips": 0, "drops": 0}
        self._floor = self.depth  # the depth the last selection or switch chose (accuracy-checked)
        self._recent: deque[tuple[int, tuple[int, ...]]] = deque()  # (tokens, exits) since a load-more
        self.events: list[Event] = []
        self._tripped_at = 0  # breaches in the window when the counter last tripped
        # Hysteresis: models a breach decision left since the last selection. A breach never
        # switches back to one of them; the next re-assessment, with fresh figures for every
        # candidate, is where a return is decided (else two candidates whose PHT rows age at
        # different rates trade places on every trip).
        self._left: set[str] = set()
        self._stale: set[str] = set()  # candidates whose rows the running re-assessment replaces
        # a breach trip's probe: candidate -> depth it scores at; prompts sent to score, scored back
        self._probe: dict[str, int] = {}
        self._probe_out: dict[str, int] = {}
        self._probe_seen: dict[str, int] = {}
        self._probe_served = 0  # prompts the current model served since the probe began
        self._tripped_since = False  # a breach tripped since the last decision
        self._scoring_seen = False  # some batch came back with scoring passes (the worker runs them)
        self._steady: str | None = None  # the serving model at a re-assessment, when none did

    def set_budget(self, memory_mb: float | None, context_tokens: int | None = None) -> None:
        """The serving pool's memory budget (and context per sequence) bounds evaluation batches."""
        self.memory_mb = memory_mb
        if context_tokens:
            self.context_tokens = context_tokens

    # -- what the next batch runs --------------------------------------------------------------
    def _eval_depth(self, i: int) -> int:
        """Where candidate ``i`` is evaluated: paired, at the shallowest depth its repository
        figures admit; unpaired, at the depth it is expected to serve at (its greedy depth as the
        PHT last saw it; before any row, the deepest its profile's tasks need); either way no
        deeper than its evaluation prompts fit one batch in memory. Every exit head up to there is
        read, so the PHT learns the exits up to the depth a decision would pick; a shortfall there
        makes the greedy depth the whole model (``greedy_depth``), a conservative answer, and depths
        not run are estimated (``pht.estimate``). Evaluating whole made the deep candidate run one
        prompt at a time under the 8 MB budget (docs/helios.md, "What caps it")."""
        at = self._eval_at[i]
        if at is not None:  # once some of its prompts went out, the rest go at the same depth
            return at
        c = self.shortlist[i]
        if not self.p.partial:
            return c.max_depth
        if self.p.paired:
            # the shallowest depth the repository admits: the first a decision could choose (its
            # greedy depth may be deeper; deeper depths are estimated from here), and never a
            # shallower one, which the accuracy bound rules out: its evaluation answers would be
            # worse than any it may serve. (With ``coverage_z`` ee-lm-s's greedy depth on
            # Shakespeare is often 1, under its admitted 2; docs/helios.md, "Ninth session".)
            expected = shallowest_depth(c, self.reference, self.p.ppl_slack)
        else:
            expected = greedy_depth(self.pht, c, self.p.coverage, self.p.coverage_z) if self.pht.of(
                c.name) else profile_depth(c, self.p.coverage)
        return min(expected, eval_depth(c, self.memory_mb, self.context_tokens, self.p.eval_prompts))

    def target(self) -> tuple[str, int, int | None]:
        """(model, depth, most prompts this batch may take: None for no limit of HELIOS's own)."""
        if self.phase == "evaluate":
            for i, c in enumerate(self.shortlist):
                if self._eval_sent[i] < self.p.eval_prompts:
                    # Its batches may take more than ``eval_prompts`` when more wait (up to what
                    # the memory allows at its evaluation depth; ``full_width``, else only its
                    # first): real answers either way, a batch costs little more than one
                    # prompt, and five prompts measure a perplexity to about +-10%, coarser than
                    # the 5% bound. (Holding every candidate to the smallest such batch was
                    # measured: 0.89 / 0.90 of the best fixed cut near saturation / in overload
                    # against 0.92 / 0.93.)
                    left = self.p.eval_prompts - self._eval_sent[i]
                    wide = self.p.full_width or self._eval_sent[i] == 0
                    return c.name, self._eval_depth(i), None if wide else left
            # every evaluation prompt is out: serve on with the last one until the results are in
            last = len(self.shortlist) - 1
            return self.shortlist[last].name, self._eval_depth(last), None
        return self.model, self.depth, None

    def score_with(self, model: str, size: int) -> tuple[tuple[str, int, int], ...]:
        """(candidate, depth, rows): who should read the first ``rows`` prompts of the batch of
        ``size`` about to go to ``model`` in a prefill-only scoring pass. During an evaluation,
        the batches of the round's first candidate are read by every other shortlisted candidate
        at its evaluation depth (fixed here for the round, so that its own evaluation batch runs
        at the same depth and its row holds the round's prompts at one depth), up to
        ``score_prompts`` prompts each per round; none otherwise. One direction is enough for a
        paired comparison (every candidate then holds the perplexity of the same prompts); the
        other candidates' own evaluation batches give their exits and speed, and their perplexity
        is not counted (``_paired_part``), so the comparison stays on the shared prompts."""
        if not self.p.paired or not self.p.switching:
            return ()
        if self.phase != "evaluate":
            return self._probe_rows(model, size)
        if not self.p.pair_each and model != self.shortlist[0].name:
            return ()
        out = []
        for i, c in enumerate(self.shortlist):
            rows = min(size, self.p.score_prompts - self._scored[i])
            if c.name != model and rows > 0:
                at = self._eval_at[i] = self._eval_depth(i)
                self._scored[i] += rows
                out.append((c.name, at, rows))
        return tuple(out)

    def _probe_rows(self, model: str, size: int) -> tuple[tuple[str, int, int], ...]:
        if model != self.model:
            return ()
        out = []
        for name, depth in self._probe.items():
            rows = min(size, self.p.score_prompts - self._probe_out.get(name, 0))
            if rows > 0:
                self._probe_out[name] = self._probe_out.get(name, 0) + rows
                out.append((name, depth, rows))
        return tuple(out)

    def _batch_of(self, c: Candidate, depth: int) -> int:
        """The batch ``c`` at ``depth`` would run at: what the queue has held of late, bounded by
        the memory budget at that depth (Sec. 5.2: the memory a partial load saves becomes batch)."""
        demand = max(round(sum(self._waiting) / len(self._waiting)), 1) if self._waiting else 1
        return batch_for_memory(c.at(depth), self.memory_mb, self.context_tokens, demand)

    def dispatched(self, model: str, depth: int, n: int, waiting: int | None = None) -> None:
        """``n`` prompts went out to ``model`` at ``depth``; ``waiting``: how many were queued."""
        self._waiting.append(max(n, waiting or 0))
        if self.phase == "evaluate":
            for i, c in enumerate(self.shortlist):
                if c.name == model and self._eval_sent[i] < self.p.eval_prompts:
                    self._eval_sent[i] += n
                    self._eval_at[i] = depth
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
        self._steady = None if self._tripped_since else self.model
        self._probe, self._probe_out, self._probe_seen = {}, {}, {}
        self.phase = "evaluate"
        self._eval_sent = [0] * len(self.shortlist)
        self._eval_seen = [0] * len(self.shortlist)
        self._eval_at = [None] * len(self.shortlist)
        self._scored = [0] * len(self.shortlist)
        self._eval_extra = 0

    def _is_eval(self, obs: BatchObs) -> int | None:
        """The shortlist index whose evaluation ``obs`` is a result of, if any."""
        for i, c in enumerate(self.shortlist):
            if c.name == obs.model and obs.depth == self._eval_at[i]:
                return i
        return None

    # -- results -------------------------------------------------------------------------------
    def observe(self, obs: BatchObs) -> list[Event]:
        if obs.model not in self.by_name:
            return []
        ev = self._is_eval(obs) if self.phase == "evaluate" else None
        if obs.model in self._stale and ev is not None:
            self._renew(obs.model)
        self._scoring_seen = self._scoring_seen or bool(obs.scored)
        if self.p.paired and self._scoring_seen and (self.phase == "evaluate" or self._probe):
            obs = self._paired_part(obs)
        self.pht.record(obs)
        for s in obs.scored:
            if s.model not in self.by_name:
                continue
            if s.model in self._stale:  # its first evidence of this round
                self._renew(s.model)
            self.pht.record_scored(s)
            if s.model in self._probe and self.phase == "serve":
                self._probe_seen[s.model] = self._probe_seen.get(s.model, 0) + len(s.items)
        self.loaded.add((obs.model, obs.depth))
        if self.phase == "evaluate":
            if ev is not None:
                self._eval_seen[ev] += len(obs.items)
            # Every candidate's evaluation prompts are back; or, when some never come back (expired,
            # failed), every candidate has results and as many prompts again went out meanwhile.
            late = self._eval_extra >= self.p.eval_prompts * len(self.shortlist)
            if all(seen >= self.p.eval_prompts for seen in self._eval_seen) or (
                    late and all(seen > 0 for seen in self._eval_seen)):
                self._select()
            return self._take()
        if self._probe:
            self._probe_served += len(obs.items)
            # decided once every probed candidate's scores are in; or without them, once four
            # times as many prompts were served (a worker that does not score: the old decision)
            if all(self._probe_seen.get(m, 0) >= self.p.score_prompts for m in self._probe) or (
                    self._probe_served >= 4 * self.p.score_prompts):
                self._probe, self._probe_out, self._probe_seen = {}, {}, {}
                self._decide_breach()
                return self._take()
        if obs.model != self.model or obs.depth != self.depth:
            return self._take()  # a batch planned before the last decision
        if self._probe:
            return self._take()  # the trip's decision waits for the probe's scores
        for it in obs.items:
            if self.cbc.add_many(it.tokens, it.breaches):
                self._breach()
                return self._take()
        if self.depth > self._floor:
            self._maybe_drop_back(obs)
        return self._take()

    @staticmethod
    def _paired_part(obs: BatchObs) -> BatchObs:
        """``obs`` with the perplexity of only the requests the other candidates also read (the
        batch's first ones): a decision compares the candidates on the same prompts, and a batch
        larger than the scoring passes would otherwise outweigh them with prompts of its own."""
        k = min((len(s.items) for s in obs.scored), default=0)
        if k >= len(obs.items):
            return obs
        return replace(obs, items=obs.items[:k] + tuple(replace(i, prompt_ppl=None) for i in obs.items[k:]))

    def _renew(self, model: str) -> None:
        """A re-assessment's first evidence of ``model`` came in: its older figures go. Unpaired,
        its rows go (rows from before a task change would outvote a handful of prompts). Paired,
        the rows stay for their speed (a depth's speed does not change with the traffic), its
        perplexity counts from here on, on the prompts every candidate reads, and so do its exits,
        except the serving model's when no breach tripped since the decision that put it in
        service: the traffic has not moved under it, and its exits since then (up to a window of
        batches) decide its depth better than a handful of evaluation prompts (whose coverage
        misses the bar 15% of the time on Shakespeare at depth 2; docs/helios.md)."""
        self._stale.discard(model)
        if not self.p.paired:
            self.pht.forget({model})
            return
        steady = model == self._steady
        self.pht.restart({model}, exits=not steady, since_mark=steady)

    def _maybe_drop_back(self, obs: BatchObs) -> None:
        """A load-more answered a burst of breaches; once the last ``window`` tokens at the deeper
        depth show a shallower one (not below the chosen depth) covering ``coverage`` of them
        again, the burst is over: serve there again (the deeper layers stay resident, so a new
        burst costs no load)."""
        for it in obs.items:
            if it.exits:
                self._recent.append((it.tokens, it.exits))
        seen = sum(t for t, _ in self._recent)
        while self._recent and seen - self._recent[0][0] >= self.p.window:  # keep the last window
            seen -= self._recent.popleft()[0]
        if seen < self.p.window:
            return
        exits = [0] * (self.depth + 1)
        for _, ex in self._recent:
            for k, n in enumerate(ex[:self.depth + 1]):
                exits[k] += n
        d = drop_back_depth(self.by_name[self.model], exits, self.depth, self._floor, self.p.coverage)
        if d is None:
            return
        before = (self.model, self.depth)
        total = sum(exits)
        options = [{"model": self.model, "depth": k, "action": "drop_back" if k == d else "hold",
                    "coverage": round(sum(exits[1:k + 1]) / total, 4), "tokens": seen}
                   for k in self.by_name[self.model].depths if self._floor <= k <= before[1]]
        self.depth = d
        self.cbc.reset()
        self._decided()
        self._recent.clear()
        self.counts["drops"] += 1
        self.events.append(("helios.dropped_back", {
            "family": self.family, "objective": self.objective, "from_model": before[0], "from_depth": before[1],
            "model": self.model, "depth": d, "action": "drop_back", "options": options,
            "breaches": exits[0]}))

    def _select(self) -> None:
        """Evaluation done: the PHT picks the candidate and its depth."""
        c = choose(self.pht, self.shortlist, self.objective, coverage=self.p.coverage, ppl_slack=self.p.ppl_slack,
                   horizon=self.p.horizon_tokens, partial=self.p.partial, loaded=self.loaded, ref=self.reference,
                   batch=self._batch_of, z=self.p.coverage_z)
        before = (self.model, self.depth)
        first = self.counts["evaluations"] == 0
        self._apply(c)
        self._floor = c.depth
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
        self._tripped_since = True
        if not self.p.partial and not self.p.switching:
            self.cbc.reset()
            return
        others = [c for c in self.shortlist if c.name != self.model and c.name not in self._left]
        if self.p.paired and others:
            # score the next prompts with the others first; every candidate's perplexity counts
            # from here, so the decision compares them on the same prompts
            self._tripped_at = self.cbc.count
            self.cbc.reset()
            # the serving model keeps its exits (the breaches that tripped are what a load-more
            # is weighed on); the others' were read before the traffic moved (``trip_forgets_exits``)
            self.pht.restart({self.model}, exits=False)
            self.pht.restart({c.name for c in self.shortlist if c.name != self.model},
                             exits=self.p.trip_forgets_exits)
            self._probe = {c.name: self._probe_depth(c) for c in others}
            self._probe_out, self._probe_seen, self._probe_served = {}, {}, 0
            return
        self._decide_breach()

    def _probe_depth(self, c: Candidate) -> int:
        """Where a probed candidate scores: the shallowest depth its repository figures admit
        (``shallowest_depth``), the first a switch could start it at; deeper ones are estimated
        from there, and a shallower one the accuracy bound rules out."""
        return shallowest_depth(c, self.reference, self.p.ppl_slack)

    def _decide_breach(self) -> None:
        c = load_more_or_switch(self.pht, self.shortlist, self.model, self.depth, self.objective,
                                coverage=self.p.coverage, ppl_slack=self.p.ppl_slack, horizon=self.p.horizon_tokens,
                                switching=self.p.switching, loaded=self.loaded, exclude=frozenset(self._left),
                                ref=self.reference, batch=self._batch_of, z=self.p.coverage_z)
        before = (self.model, self.depth)
        if not self.p.paired:
            self._tripped_at = self.cbc.count
        self.cbc.reset()
        if c.action == "stay" or (c.model, c.depth) == before:
            self._decided()
            return
        self._apply(c)
        if c.action == "load_more":
            self._recent.clear()
            self.counts["loads"] += 1
            self.events.append(("helios.loaded_more", self._body(c, before)))
        else:
            self._floor = c.depth
            self._left.add(before[0])
            self.counts["switches"] += 1
            self.events.append(("helios.switched", self._body(c, before)))

    def _apply(self, c: Choice) -> None:
        self.model, self.depth = c.model, c.depth
        self.cbc.reset()
        self._decided()

    def _decided(self) -> None:
        self.pht.mark(self.model)
        self._tripped_since = False

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
                "reference": self.reference.name,
                "breaches": self.cbc.count, "rows": self.pht.snapshot()}
