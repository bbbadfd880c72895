from __future__ import annotations

from adaserve.planner.helios.decide import (
    batch_for_memory,
    choose,
    covers,
    drop_back_depth,
    eval_depth,
    greedy_depth,
    load_more_or_switch,
    profile_depth,
    reference,
    shortlist,
)
from adaserve.planner.helios.pht import ItemStats, PerformanceHistory, ScoredObs
from adaserve.planner.helios.repository import Candidate, DepthFigures

from .conftest import deep, figures, small
from .test_pht import obs


def test_shortlist_orders_competent_candidates_by_the_objective(cands: list[Candidate]) -> None:
    assert [c.name for c in shortlist(cands, "throughput", 2)] == ["small", "deep"]
    assert [c.name for c in shortlist(cands, "accuracy", 1)] == ["deep"]
    # an incompetent candidate (perplexity far above the best) comes last even when fastest
    junk = Candidate("junk", "lm", 0.8, {1: figures(1, 9000.0, 50.0)})
    assert [c.name for c in shortlist([junk, *cands], "throughput", 2)] == ["small", "deep"]
    assert [c.name for c in shortlist([junk, *cands], "throughput", 3)][-1] == "junk"


def test_shortlist_keeps_each_tasks_most_accurate_candidate_before_faster_generalists() -> None:
    def model(name: str, rate: float, a: float, b: float) -> Candidate:
        f = figures(1, rate, 1.0)
        return Candidate(name, "lm", 0.8, {1: DepthFigures(1, f.tokens_per_s, f.ttft_s, f.weight_bytes,
                                                           f.kv_bytes_per_token, f.load_s, f.cpu_s_per_token,
                                                           {"a": a, "b": b}, f.exit_share)})
    prose, code, quick = model("prose", 100.0, 6.0, 6.0), model("code", 200.0, 8.0, 4.0), model("quick", 900.0, 7.0, 6.5)
    assert [c.name for c in shortlist([prose, code, quick], "throughput", 2)] == ["code", "prose"]
    assert [c.name for c in shortlist([prose, code, quick], "throughput", 3)] == ["quick", "code", "prose"]
    assert [c.name for c in shortlist([prose, code, quick], "throughput", 1)] == ["code"]


def test_greedy_depth_is_the_shallowest_exit_covering_the_share() -> None:
    pht = PerformanceHistory()
    pht.record(obs("deep", 8, (1, 0, 6, 0, 1, 0, 1, 0, 1)))  # exits at 2: 6/10, at 4: 7/10, at 6: 8/10
    d = deep()
    assert greedy_depth(pht, d, 0.6) == 2
    assert greedy_depth(pht, d, 0.7) == 4
    assert greedy_depth(pht, d, 0.75) == 6
    assert greedy_depth(pht, d, 0.95) == 8  # never covered: the whole model
    assert greedy_depth(PerformanceHistory(), d, 0.7) == 8  # nothing seen yet


def test_covers_judges_a_share_by_the_tokens_it_was_read_from() -> None:
    # 0.62 of one 8-prompt evaluation (128 tokens) is within sampling error of 0.65; of 5,000 it is not
    assert covers(0.62, 128, 0.65, z=1.645)
    assert not covers(0.62, 5000, 0.65, z=1.645)
    assert not covers(0.45, 128, 0.65, z=1.645)  # a shortfall a small sample does show
    assert covers(0.66, 5000, 0.65, z=1.645)
    # z 0: the point rule
    assert not covers(0.62, 128, 0.65) and covers(0.65, 128, 0.65)
    # no sample: nothing shows a shortfall; the point rule says nothing is covered
    assert covers(None, 0, 0.65, z=1.645) and not covers(None, 0, 0.65)


def test_a_small_sample_just_under_the_bar_does_not_push_the_greedy_depth_whole() -> None:
    d = deep()
    # 8 prompts of 16 tokens at depth 8: 10 of each 16 confident at exit 2 (62.5%), the rest at 8
    few = PerformanceHistory()
    few.record(obs("deep", 8, (0, 0, 10, 0, 0, 0, 0, 0, 6), n=8))
    assert greedy_depth(few, d, 0.65) == 8  # the point rule
    assert greedy_depth(few, d, 0.65, z=1.645) == 2
    # the same share over 100 prompts is a shortfall
    many = PerformanceHistory()
    many.record(obs("deep", 8, (0, 0, 10, 0, 0, 0, 0, 0, 6), n=100))
    assert greedy_depth(many, d, 0.65, z=1.645) == 8
    # 7 of 16 (44%) from 8 prompts is short even so; 12 of 16 by exit 4 covers
    short = PerformanceHistory()
    short.record(obs("deep", 8, (0, 0, 7, 0, 5, 0, 0, 0, 4), n=8))
    assert greedy_depth(short, d, 0.65, z=1.645) == 4
    # nothing seen: every exit is offered (the shallowest first), not only the whole model
    assert greedy_depth(PerformanceHistory(), d, 0.65, z=1.645) == 2


def test_choose_offers_a_candidate_at_the_depth_a_small_sample_does_not_rule_out(cands: list[Candidate]) -> None:
    pht = PerformanceHistory()
    # both as accurate; deep's depth 2 covers 62.5% of an 8-prompt evaluation; small's exits
    # are poor on this traffic (half breach at its last exit)
    pht.record(obs("small", 2, (8, 4, 4), n=8, ppl=5.0, secs=0.1))
    pht.record(obs("deep", 8, (0, 0, 10, 0, 0, 0, 0, 0, 6), n=8, ppl=5.0, secs=0.4))
    c = choose(pht, cands, "throughput", coverage=0.65, ppl_slack=0.05, horizon=1000, z=1.645)
    assert (c.model, c.depth) == ("deep", 2)
    assert any(o["model"] == "deep" and o["depth"] == 2 and o["exit_tokens"] == 128 for o in c.options)
    # the point rule offered deep only whole
    c = choose(pht, cands, "throughput", coverage=0.65, ppl_slack=0.05, horizon=1000)
    assert {o["depth"] for o in c.options if o["model"] == "deep"} == {8}


def test_choose_keeps_to_the_accurate_ones_then_the_objective(cands: list[Candidate]) -> None:
    pht = PerformanceHistory()
    # this traffic: the small model is fast but its perplexity is far worse than the deep one's
    pht.record(obs("small", 2, (0, 8, 0), ppl=9.0, secs=0.02))
    pht.record(obs("deep", 8, (0, 0, 8, 0, 0, 0, 0, 0, 0), ppl=4.0, secs=0.1))
    c = choose(pht, cands, "throughput", coverage=0.7, ppl_slack=0.05, horizon=1000)
    assert (c.model, c.depth) == ("deep", 2)
    assert {o["model"] for o in c.options} == {"small", "deep"}
    # with a loose accuracy bound the faster one wins
    c = choose(pht, cands, "throughput", coverage=0.7, ppl_slack=2.0, horizon=1000)
    assert c.model == "small"
    # without partial loading the choice is at the whole depth
    c = choose(pht, cands, "throughput", coverage=0.7, ppl_slack=0.05, horizon=1000, partial=False)
    assert (c.model, c.depth) == ("deep", 8)


def test_load_more_or_switch_weighs_the_load_time() -> None:
    cheap_load = Candidate("deep", "lm", 0.8, {d: figures(d, 600.0 / d, 5.0, load_s=0.01) for d in (2, 4, 6, 8)})
    s = small()
    pht = PerformanceHistory()
    pht.record(obs("deep", 2, (10, 0, 6), ppl=5.0))  # 10 of 16 breached at depth 2
    pht.record(obs("deep", 8, (0, 0, 6, 0, 10, 0, 0, 0, 0), n=4, ppl=5.0, secs=0.4))
    pht.record(obs("small", 2, (0, 8, 8), ppl=5.1, secs=0.05))
    c = load_more_or_switch(pht, [s, cheap_load], "deep", 2, "throughput", coverage=0.7, ppl_slack=0.05,
                            horizon=50)
    actions = {o["action"] for o in c.options}
    assert actions == {"load_more", "switch"}
    assert (c.model, c.action) == ("small", "switch")  # small is faster, same accuracy
    # the same choice when the small model's load would take longer than the horizon's gain
    slow_small = Candidate("small", "lm", 0.8, {1: figures(1, 400.0, 6.0, load_s=60.0),
                                                2: figures(2, 250.0, 5.5, load_s=60.0)})
    c = load_more_or_switch(pht, [slow_small, cheap_load], "deep", 2, "throughput", coverage=0.7,
                            ppl_slack=0.05, horizon=50)
    assert (c.model, c.action) == ("deep", "load_more") and c.depth == 4
    # ... unless the small model is loaded already (no load to pay)
    c = load_more_or_switch(pht, [slow_small, cheap_load], "deep", 2, "throughput", coverage=0.7,
                            ppl_slack=0.05, horizon=50, loaded={("small", 2)})
    assert c.action == "switch"
    # no switching (the ablation): only loading more
    c = load_more_or_switch(pht, [s, cheap_load], "deep", 2, "throughput", coverage=0.7, ppl_slack=0.05,
                            horizon=50, switching=False)
    assert c.action == "load_more"
    # at full depth without switching there is nothing to do
    c = load_more_or_switch(pht, [s, cheap_load], "deep", 8, "throughput", coverage=0.7, ppl_slack=0.05,
                            horizon=50, switching=False)
    assert c.action == "stay"


def test_a_candidate_without_exits_on_this_traffic_is_offered_at_every_depth() -> None:
    # deep's rows hold its speed and its perplexity on the new traffic (a probe's scores) but no
    # exits (a trip forgot them): it is offered from its shallowest exit, and that one wins
    d, s = deep(), small()
    pht = PerformanceHistory()
    pht.record(obs("small", 2, (10, 2, 4), ppl=7.0, secs=0.05))  # small breaches on this traffic
    pht.record(obs("deep", 2, (0, 0, 16), ppl=5.0, secs=0.1))
    pht.restart({"deep"}, exits=True)
    pht.record_scored(ScoredObs("deep", 2, tuple(ItemStats(0, 0, (), 5.0) for _ in range(4))))
    assert pht.exit_share("deep", 2) is None and pht.exit_tokens("deep") == 0
    c = load_more_or_switch(pht, [s, d], "small", 1, "throughput", coverage=0.65, ppl_slack=0.05, horizon=200,
                            z=1.645)
    assert (c.model, c.depth, c.action) == ("deep", 2, "switch")
    assert {o["depth"] for o in c.options if o["model"] == "deep"} == {2, 4, 6, 8}
    # the point rule: nothing seen, so only the whole model
    c = load_more_or_switch(pht, [s, d], "small", 1, "throughput", coverage=0.65, ppl_slack=0.05, horizon=200)
    assert {o["depth"] for o in c.options if o["model"] == "deep"} == {8}


def test_memory_turns_into_batch_size() -> None:
    fig = DepthFigures(2, {1: 100.0}, 0.01, 8 * 2**20, 4096, 0.1, 0.01, {"a": 5.0}, {"a": 0.5})
    deeper = DepthFigures(8, {1: 25.0}, 0.04, 32 * 2**20, 4 * 4096, 0.4, 0.04, {"a": 4.0}, {"a": 1.0})
    b2 = batch_for_memory(fig, 64.0, 128, 1024)
    b8 = batch_for_memory(deeper, 64.0, 128, 1024)
    assert b2 == (64 - 8) * 2**20 // (4096 * 128)
    assert b8 < b2 and b8 >= 1
    assert batch_for_memory(fig, None, 128, 32) == 32
    assert batch_for_memory(deeper, 1.0, 128, 32) == 1


def test_accuracy_comes_before_confidence(cands: list[Candidate]) -> None:
    pht = PerformanceHistory()
    # the deep model is confident at exit 2 on every token but far worse on this task; the small
    # one is unsure (half its tokens breach) and accurate: confidence must not buy the deep one in
    pht.record(obs("small", 2, (8, 4, 4), ppl=5.0, secs=0.05))
    pht.record(obs("deep", 8, (0, 0, 16, 0, 0, 0, 0, 0, 0), ppl=9.0, secs=0.05))
    # static selection here would serve the small one (the reference): deep's 9.0 is not within
    # 5% of what it gives on this traffic
    c = choose(pht, cands, "throughput", coverage=0.7, ppl_slack=0.05, horizon=1000, ref=cands[0])
    assert c.model == "small"
    assert any(o["model"] == "deep" and o["coverage"] == 1.0 for o in c.options)


def test_the_pht_forgets_what_a_reassessment_measures_afresh() -> None:
    pht = PerformanceHistory()
    pht.record(obs("small", 2, (0, 16, 0)))
    pht.record(obs("deep", 8, (0, 0, 16, 0, 0, 0, 0, 0, 0)))
    pht.forget({"small"})
    assert [m for m, _ in pht.rows] == ["deep"] and pht.exit_share("small", 2) is None


def _tall(weights_mb: dict[int, float]) -> Candidate:
    """A candidate whose weights grow with depth (1 KiB of KV cache per token)."""
    return Candidate("tall", "lm", 0.8, {d: DepthFigures(d, {1: 100.0 / d}, 0.01 * d, int(w * 2**20), 1024, 0.01 * d,
                                                         0.01, {"a": 5.0}, {"a": 0.5})
                                         for d, w in weights_mb.items()})


def test_the_reference_is_what_static_selection_would_pick(cands: list[Candidate]) -> None:
    # by the repository's figures at full depth: deep (4.6 / 5.52) over small (5.5 / 6.6)
    assert reference(cands).name == "deep"
    assert reference([small()]).name == "small"


def test_a_cost_objective_keeps_the_accuracy_of_static_selection_not_of_the_segments_best() -> None:
    """The Python case: the static choice (small here) whole gives 5.24; the deep model is better
    on this traffic (4.28 whole) and its depth 2 (4.68) is 9% off its own whole model but better
    than the static choice. Bounding against the best option (4.28) would forbid deep@2 and every
    small depth and force deep@4 or deeper; bounding against static selection allows deep@2."""
    pht = PerformanceHistory()
    pht.record(obs("small", 2, (0, 0, 16), ppl=5.24, secs=0.064))
    pht.record(obs("deep", 2, (0, 0, 16), ppl=4.68, secs=0.05))
    pht.record(obs("deep", 8, (0, 0, 16, 0, 0, 0, 0, 0, 0), ppl=4.28, secs=0.2))
    s, d = small(), deep()
    c = choose(pht, [s, d], "throughput", coverage=0.7, ppl_slack=0.05, horizon=1000, ref=s)
    assert (c.model, c.depth) == ("deep", 2)
    # the accuracy objective still takes the best option
    c = choose(pht, [s, d], "accuracy", coverage=0.7, ppl_slack=0.05, horizon=1000, ref=s)
    assert (c.model, c.depth) == ("deep", 8)
    # and an option worse than the static choice by more than the slack stays out however fast
    pht.forget({"deep"})
    pht.record(obs("deep", 2, (0, 0, 16), ppl=6.0, secs=0.001))
    c = choose(pht, [s, d], "throughput", coverage=0.7, ppl_slack=0.05, horizon=1000, ref=s)
    assert c.model == "small"


def test_when_no_option_reaches_the_reference_the_best_options_bound_applies(cands: list[Candidate]) -> None:
    pht = PerformanceHistory()
    # the reference (small) measured far better here, but only deep is offered: the bound is the
    # best option's then, and the fast depth within 5% of deep's whole is taken
    pht.record(obs("small", 2, (0, 0, 16), ppl=3.0))
    pht.record(obs("deep", 2, (0, 0, 16), ppl=6.0, secs=0.01))
    pht.record(obs("deep", 8, (0, 0, 16, 0, 0, 0, 0, 0, 0), ppl=5.9, secs=0.2))
    c = choose(pht, [cands[1]], "throughput", coverage=0.7, ppl_slack=0.05, horizon=1000, ref=cands[0])
    assert (c.model, c.depth) == ("deep", 2)


def test_evaluation_runs_at_the_deepest_depth_its_prompts_fit() -> None:
    t = _tall({1: 1.0, 2: 2.0, 3: 3.0, 4: 3.9})
    # 4 MB: at depth 3, 1 MB free holds 8 sequences of 128 KiB; at depth 4, 0.1 MB holds none
    assert eval_depth(t, 4.0, 128, 5) == 3
    assert eval_depth(t, 4.0, 128, 9) == 2
    assert eval_depth(t, None, 128, 5) == 4  # no budget: whole
    assert eval_depth(t, 1.05, 128, 5) == 1  # nothing fits five: the shallowest


def test_the_profile_depth_is_the_deepest_any_task_needs() -> None:
    def cand(shares: dict[int, dict[str, float]]) -> Candidate:
        return Candidate("c", "lm", 0.8, {d: DepthFigures(d, {1: 1.0}, 0.1, 1, 1, 0.1, 0.1, {"a": 5.0, "b": 5.0}, s)
                                          for d, s in shares.items()})
    assert profile_depth(cand({1: {"a": 0.7, "b": 0.6}, 2: {"a": 0.8, "b": 0.66}, 4: {"a": 0.9, "b": 0.9}}), 0.65) == 2
    assert profile_depth(cand({1: {"a": 0.7, "b": 0.1}, 2: {"a": 0.8, "b": 0.2}}), 0.65) == 2  # b: no exit covers
    assert profile_depth(cand({1: {"a": 0.7, "b": 0.7}, 2: {"a": 0.8, "b": 0.8}}), 0.65) == 1


def test_drop_back_is_the_shallowest_covering_depth_not_below_the_floor() -> None:
    d = deep()
    recent = [10, 0, 70, 0, 20, 0, 0, 0, 0]  # loaded to 6: 70% exit at 2, 90% by 4, 10% breach
    assert drop_back_depth(d, recent, loaded=6, floor=2, coverage=0.65) == 2
    assert drop_back_depth(d, recent, loaded=6, floor=4, coverage=0.65) == 4  # not below the chosen depth
    assert drop_back_depth(d, recent, loaded=6, floor=2, coverage=0.8) == 4
    assert drop_back_depth(d, recent, loaded=6, floor=2, coverage=0.95) is None  # still needed
    assert drop_back_depth(d, recent, loaded=4, floor=4, coverage=0.65) is None  # nothing shallower to go to
    assert drop_back_depth(d, [0] * 9, loaded=6, floor=2, coverage=0.65) is None
