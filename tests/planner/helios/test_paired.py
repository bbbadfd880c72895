"""Paired evaluation: the candidates compared on the same prompts (scoring passes), a breach trip
that waits for the others' scores, and the serving model's exits kept across a steady
re-assessment. Constructed candidates (conftest): ``small`` (depths 1, 2) and ``deep`` (2..8),
``deep`` the static selection's reference."""

from __future__ import annotations

from adaserve.planner.helios.controller import Helios, HeliosParams
from adaserve.planner.helios.pht import BatchObs, ItemStats, PerformanceHistory, ScoredObs, item_stats, scored_of
from adaserve.planner.helios.repository import Candidate

SMALL_EXITS = (0, 16, 0)              # every token confident at exit 1
DEEP_EXITS = (0, 0, 16, 0, 0, 0, 0, 0, 0)  # every token confident at exit 2


def _items(n: int, exits: tuple[int, ...], ppl: float) -> tuple[ItemStats, ...]:
    return tuple(ItemStats(16, exits[0], exits, ppl) for _ in range(n))


def _scores(model: str, depth: int, ppls: list[float]) -> ScoredObs:
    return ScoredObs(model, depth, tuple(ItemStats(0, 0, (), p) for p in ppls))


def _evaluate(h: Helios, own: dict[str, float], other: dict[str, float], paired: bool,
              deep_exits: tuple[int, ...] = DEEP_EXITS) -> None:
    """One evaluation round of 3 prompts per candidate. ``own[m]``: m's perplexity on its own
    prompts; ``other[m]``: m's perplexity on the other candidate's prompts (what a scoring pass of
    m reads). ``small`` is fast on this traffic, ``deep`` slow."""
    sent = []
    while h.phase == "evaluate" and len(sent) < 2:
        model, depth, _ = h.target()
        plan = h.score_with(model, 3)
        h.dispatched(model, depth, 3)
        sent.append((model, depth, plan))
    for model, depth, plan in sent:
        exits = SMALL_EXITS if model == "small" else deep_exits
        scored = tuple(_scores(m, d, [other[m]] * n) for m, d, n in plan) if paired else ()
        h.observe(BatchObs(model, depth, 3, 0.01 if model == "small" else 0.2, _items(3, exits, own[model]),
                           scored=scored))


def test_an_evaluation_batch_is_scored_by_the_other_candidates_at_their_evaluation_depth(
        cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, score_prompts=2))
    model, depth, _ = h.target()
    assert model == "small"
    # deep's repository figures admit depth 2 (within 5% of deep whole on task a): it is evaluated,
    # and scores, there; at most score_prompts rows of a batch
    assert h.score_with(model, 3) == (("deep", 2, 2),)
    h.dispatched(model, depth, 3)
    assert h.target()[:2] == ("deep", 2)
    # deep's own evaluation batches are not read by small: the round compares them on small's
    assert h.score_with("deep", 1) == ()
    # both ways (pair_each): each candidate's batches are read by the others
    b = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, score_prompts=2, pair_each=True))
    model, depth, _ = b.target()
    assert b.score_with(model, 3) == (("deep", 2, 2),)
    b.dispatched(model, depth, 3)
    assert b.score_with("deep", 1) == (("small", 2, 1),)
    assert b.score_with("deep", 5) == (("small", 2, 1),)  # one left of its two
    assert b.score_with("deep", 5) == ()
    # unpaired: no scoring pass, deep evaluated where its profile says every task is covered
    u = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, paired=False))
    assert u.score_with("small", 3) == ()


def test_a_round_is_scored_on_the_first_candidates_batches_until_score_prompts_are_read(
        cands: list[Candidate]) -> None:
    # batches of one (light load): each of small's is read by deep until deep has read two
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, score_prompts=2))
    plans = []
    while h.target()[0] == "small":
        model, depth, _ = h.target()
        plans.append(h.score_with(model, 1))
        h.dispatched(model, depth, 1)
    assert plans == [(("deep", 2, 1),), (("deep", 2, 1),), ()]


def test_paired_scores_compare_the_candidates_on_the_same_prompts(cands: list[Candidate]) -> None:
    # small's own prompts are hard (6.0), deep's easy (5.0); on the same prompts small is within
    # 2% of deep (5.1 against 5.0 on deep's, 6.0 against 5.9 on small's)
    own, other = {"small": 6.0, "deep": 5.0}, {"small": 5.1, "deep": 5.9}
    unpaired = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, paired=False))
    _evaluate(unpaired, own, other, paired=False)
    assert unpaired.phase == "serve" and unpaired.model == "deep"  # small looked 20% worse
    # one way: deep reads small's prompts; deep's own batch counts for its exits and speed only
    paired = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3))
    _evaluate(paired, own, other, paired=True)
    assert paired.phase == "serve" and paired.model == "small"
    assert paired.pht.rows[("small", 2)].perplexity() == pytest_approx(6.0)
    assert paired.pht.rows[("deep", 2)].perplexity() == pytest_approx(5.9)
    assert paired.pht.rows[("deep", 2)].tokens_per_s() is not None
    # both ways: each row holds both candidates' prompts
    both = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, pair_each=True))
    _evaluate(both, own, other, paired=True)
    assert both.phase == "serve" and both.model == "small"
    assert both.pht.rows[("small", 2)].perplexity() == pytest_approx((6.0 ** 3 * 5.1 ** 3) ** (1 / 6))


def pytest_approx(x: float) -> object:
    import pytest

    return pytest.approx(x, rel=1e-6)


def _serve(h: Helios, n: int, exits: tuple[int, ...], ppl: float, scores: dict[str, float] | None = None) -> list[str]:
    """Serve ``n`` prompts one at a time with the current model; ``scores``: what each scoring
    pass asked for reads (None: a worker that does not score)."""
    names = []
    for _ in range(n):
        model, depth, _ = h.target()
        plan = h.score_with(model, 1)
        h.dispatched(model, depth, 1)
        ex = [sum(exits[depth + 1:]) + exits[0], *exits[1:depth + 1]]
        scored = tuple(_scores(m, d, [scores[m]] * k) for m, d, k in plan) if scores is not None else ()
        obs = BatchObs(model, depth, 1, 0.01, (ItemStats(sum(exits), ex[0], tuple(ex), ppl),), scored=scored)
        names += [name for name, _ in h.observe(obs)]
    return names


def test_a_breach_trip_waits_for_the_others_scores_then_decides_on_them(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, score_prompts=4, reassess=10_000))
    _evaluate(h, {"small": 5.1, "deep": 5.0}, {"small": 5.1, "deep": 5.0}, paired=True)
    assert h.model == "small"
    assert _serve(h, 5, SMALL_EXITS, 5.1) == [] and h.score_with("small", 1) == ()  # no probe while steady
    # the task changes: small breaches on most tokens; the trip starts a probe, no decision yet
    hard = (14, 1, 1)
    trip = 0
    while not h._probe:
        _serve(h, 1, hard, 7.0, scores={"deep": 5.0})
        trip += 1
        assert trip < 20
    assert h.counts["breach_trips"] == 1 and h.model == "small"
    assert h.score_with("small", 3) == (("deep", 2, 3),)  # the probe's rows, fixed for it
    h._probe_out.clear()
    # three prompts scored: still waiting; the fourth completes it and the switch is made on
    # the same prompts (deep 5.0 against small's 7.0)
    assert _serve(h, 3, hard, 7.0, scores={"deep": 5.0}) == [] and h.model == "small"
    assert "helios.switched" in _serve(h, 1, hard, 7.0, scores={"deep": 5.0})
    assert (h.model, h.depth) == ("deep", 2)


def test_a_trip_judges_the_other_candidates_depth_by_the_new_traffic(cands: list[Candidate]) -> None:
    def trip(params: HeliosParams) -> Helios:
        h = Helios("lm", cands, "throughput", params)
        # deep was evaluated (at depth 2) on task a, where every one of its tokens breaches there
        _evaluate(h, {"small": 5.1, "deep": 5.0}, {"small": 5.1, "deep": 5.0}, paired=True, deep_exits=(16, 0, 0))
        assert h.model == "small" and h.depth == 2
        kept = sum(h.pht.exit_distribution("small").values())
        # task b: small breaches until the counter trips
        while not h._probe:
            _serve(h, 1, (14, 1, 1), 7.0, scores={"deep": 5.0})
        # the serving model keeps its exits, the tripping breaches among them
        assert sum(h.pht.exit_distribution("small").values()) > kept
        return h

    def probe(h: Helios) -> None:
        # deep scores the next prompts at depth 2 (5.0 against small's 7.0); then the decision
        assert h.score_with("small", 4) == (("deep", 2, 4),)
        h._probe_out.clear()
        _serve(h, 4, (14, 1, 1), 7.0, scores={"deep": 5.0})
        assert not h._probe

    h = trip(HeliosParams(eval_prompts=3, score_prompts=4, reassess=10_000))
    # deep's exits on task a say nothing of task b: forgotten at the trip, so deep is offered from
    # depth 2, where the probe found it accurate, and switched to there
    assert h.pht.exit_share("deep", 2) is None
    probe(h)
    assert h.counts["switches"] == 1 and (h.model, h.depth) == ("deep", 2)
    # the rules before (its exits kept, the point rule): deep offered only whole
    old = trip(HeliosParams(eval_prompts=3, score_prompts=4, reassess=10_000, coverage_z=0.0,
                            trip_forgets_exits=False))
    assert old.pht.exit_share("deep", 2) == 0.0
    probe(old)
    assert (old.model, old.depth) == ("deep", 8)


def test_a_probe_without_scores_still_decides(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, score_prompts=2, reassess=10_000))
    _evaluate(h, {"small": 5.1, "deep": 5.0}, {"small": 5.1, "deep": 5.0}, paired=True)
    served = 0
    while not h._probe:
        _serve(h, 1, (14, 1, 1), 7.0)
        served += 1
    # a worker that runs no scoring pass: the decision comes after 4 x score_prompts prompts
    events = _serve(h, 7, (14, 1, 1), 7.0)
    assert not h._probe or h.counts["switches"] + h.counts["loads"] == 0
    events += _serve(h, 1, (14, 1, 1), 7.0)
    assert not h._probe and ("helios.switched" in events or "helios.loaded_more" in events)


def test_a_steady_reassessment_keeps_the_serving_models_exits_since_its_selection(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, reassess=20))
    _evaluate(h, {"small": 5.1, "deep": 5.0}, {"small": 5.1, "deep": 5.0}, paired=True)
    assert (h.model, h.depth) == ("small", 2)  # depth 1 is confident but 5.5% off deep whole
    _serve(h, 20, SMALL_EXITS, 5.1, scores={"deep": 5.0})
    assert h.phase == "evaluate" and h.counts["breach_trips"] == 0
    served = h.pht.rows[("small", 2)]
    # evaluated at depth 2, the shallowest its figures admit, not at its greedy depth on what it
    # served (1), which the accuracy bound rules out
    assert h.target()[:2] == ("small", 2)
    _evaluate(h, {"small": 5.1, "deep": 5.0}, {"small": 5.1, "deep": 5.0}, paired=True)
    # the 20 prompts served since the selection still count for its exits with this round's 3
    # (not the first evaluation's 3 from before it); their perplexity does not; the row keeps
    # every batch for its speed
    assert served.prompts == 3 + 20 + 3
    assert served.perplexity() == pytest_approx(5.1)
    assert sum(served.exit_counts()) == 23 * 16
    assert sum(h.pht.exit_distribution("small").values()) == 23 * 16
    # small's evaluation batch (the round's first) was read by deep; deep's was read by no one
    assert not served.scored and len(h.pht.rows[("deep", 2)].scored) == 3
    # the other candidate's exits are read afresh
    assert sum(h.pht.exit_distribution("deep").values()) == 3 * 16


def test_after_a_trip_a_reassessment_reads_every_candidates_exits_afresh(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, reassess=6, score_prompts=50))
    _evaluate(h, {"small": 5.1, "deep": 5.0}, {"small": 5.1, "deep": 5.0}, paired=True)
    assert h.model == "small"
    # the task changes: a trip (its probe still waiting for scores) before the re-assessment
    _serve(h, 6, (14, 1, 1), 5.1, scores={"deep": 5.0})
    assert h.counts["breach_trips"] == 1 and h.phase == "evaluate" and h.model == "small"
    _evaluate(h, {"small": 5.1, "deep": 5.0}, {"small": 5.1, "deep": 5.0}, paired=True)
    assert sum(h.pht.exit_distribution("small").values()) == 3 * 16  # the evaluation's alone


def test_while_scores_come_back_only_the_scored_prompts_count_for_perplexity(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, score_prompts=2))
    model, depth, _ = h.target()
    plan = h.score_with(model, 6)
    h.dispatched(model, depth, 6)
    items = tuple(ItemStats(16, 0, SMALL_EXITS, p) for p in (5.0, 5.0, 9.0, 9.0, 9.0, 9.0))
    h.observe(BatchObs(model, depth, 6, 0.05, items, scored=tuple(_scores(m, d, [5.0] * n) for m, d, n in plan)))
    row = h.pht.rows[(model, depth)]
    # the four prompts deep did not read do not count for small's perplexity; they count for its
    # exits and speed
    assert row.perplexity() == pytest_approx(5.0) and row.prompts == 6 and sum(row.exit_counts()) == 6 * 16
    # a worker that never scores: every served prompt counts, as unpaired
    u = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3, score_prompts=2))
    model, depth, _ = u.target()
    u.score_with(model, 6)
    u.dispatched(model, depth, 6)
    u.observe(BatchObs(model, depth, 6, 0.05, items))
    assert u.pht.rows[(model, depth)].perplexity() == pytest_approx((5.0 ** 2 * 9.0 ** 4) ** (1 / 6))


def test_restart_keeps_speed_and_counts_perplexity_afresh() -> None:
    pht = PerformanceHistory()
    pht.record(BatchObs("m", 2, 4, 0.5, _items(4, (0, 0, 16), 9.0)))
    pht.record_scored(_scores("m", 2, [8.0]))
    row = pht.rows[("m", 2)]
    assert row.tokens_per_s() == 128.0 and row.perplexity() is not None
    pht.restart({"m"}, exits=False)
    assert row.perplexity() is None and row.tokens_per_s() == 128.0 and row.exit_counts()[2] == 64
    pht.record_scored(_scores("m", 2, [4.0]))
    assert row.perplexity() == 4.0 and row.scored and len(row.scored) == 1
    pht.restart({"m"}, exits=True)
    assert sum(row.exit_counts()) == 0 and row.tokens_per_s() == 128.0


def test_scored_figures_travel_in_the_lm_map_and_group_by_model_and_depth() -> None:
    a = item_stats({"tokens": 16, "breaches": 0, "exits": [0, 16], "prompt_ppl": 5.0,
                    "scored": [{"model": "x", "depth": 2, "prompt_ppl": 6.0}, {"model": "y", "depth": 4}]})
    b = item_stats({"tokens": 16, "breaches": 0, "exits": [0, 16], "prompt_ppl": 5.5,
                    "scored": [{"model": "x", "depth": 2, "prompt_ppl": 7.0}]})
    c = item_stats({"tokens": 16, "breaches": 0})
    assert a is not None and b is not None and c is not None and c.scored == ()
    groups = {(s.model, s.depth): [i.prompt_ppl for i in s.items] for s in scored_of((a, b, c))}
    assert groups == {("x", 2): [6.0, 7.0], ("y", 4): [None]}
    assert item_stats({"tokens": 1, "breaches": 0, "scored": [{"depth": 2}]}) is None  # malformed: no model
