from __future__ import annotations

import pytest

from adaserve.broker.errors import ConfigError
from adaserve.broker.events import HeliosDroppedBack
from adaserve.planner.helios.controller import Helios, HeliosParams
from adaserve.planner.helios.pht import BatchObs, ItemStats
from adaserve.planner.helios.repository import Candidate


def run(h: Helios, n: int, exits_of: dict[str, tuple[int, ...]], ppl_of: dict[str, float],
        bodies: list[tuple[str, dict[str, object]]] | None = None) -> list[str]:
    """Serve ``n`` prompts one by one; each result's exits and perplexity from the tables (the
    events' bodies into ``bodies`` when given)."""
    names = []
    for _ in range(n):
        model, depth, _ = h.target()
        h.dispatched(model, depth, 1)
        full = exits_of[model]
        # at a partial depth, tokens exiting deeper are breaches
        ex = [sum(full[depth + 1:]) + full[0], *full[1:depth + 1]]
        item = ItemStats(sum(full), ex[0], tuple(ex), ppl_of[model] * (1.0 + 0.02 * (h.by_name[model].max_depth - depth)))
        for name, body in h.observe(BatchObs(model, depth, 1, 0.01 * depth, (item,))):
            names.append(name)
            if bodies is not None:
                bodies.append((name, body))
    return names


def test_evaluates_each_candidate_then_serves_the_choice_at_its_greedy_depth(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(paired=False, eval_prompts=3, reassess=1000))
    served = []
    for _ in range(6):
        model, depth, limit = h.target()
        served.append((model, depth, limit))
        h.dispatched(model, depth, 1)
    assert [s[0] for s in served] == ["small"] * 3 + ["deep"] * 3
    assert all(d == h.by_name[m].max_depth for m, d, _ in served)
    events = run(h, 1, {"small": (0, 16, 0), "deep": (0, 0, 16, 0, 0, 0, 0, 0, 0)}, {"small": 5.0, "deep": 5.0})
    assert h.phase == "evaluate" and not events  # results of the evaluation prompts not in yet
    for m, d, secs in (("small", 2, 0.05), ("deep", 8, 0.2)):  # deep is the slower one on this traffic
        h.observe(BatchObs(m, d, 3, secs, tuple(ItemStats(16, 0, (0, 16, 0) if m == "small" else
                                                          (0, 0, 16, 0, 0, 0, 0, 0, 0), 5.0) for _ in range(3))))
    assert h.phase == "serve"
    assert (h.model, h.depth) == ("small", 1)  # every token confident at exit 1: depth 1 covers them


def test_a_task_change_trips_the_counter_and_switches(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=2, reassess=10_000))
    task_a = ({"small": (0, 16, 0), "deep": (0, 0, 12, 0, 4, 0, 0, 0, 0)}, {"small": 5.0, "deep": 5.0})
    events = run(h, 20, *task_a)
    assert events[0] == "helios.evaluated" and h.model == "small"
    # task b: the small model breaches on most tokens; the deep one is confident at exit 2
    task_b = ({"small": (14, 1, 1), "deep": (0, 0, 15, 0, 1, 0, 0, 0, 0)}, {"small": 5.0, "deep": 5.0})
    events = run(h, 40, *task_b)
    assert "helios.switched" in events or "helios.loaded_more" in events
    assert h.counts["breach_trips"] >= 1
    assert h.model == "deep"  # loading more of small would not help: it breaches at full depth too


def test_reassessment_comes_back_every_interval(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=2, reassess=10))
    events = run(h, 40, {"small": (0, 16, 0), "deep": (0, 0, 16, 0, 0, 0, 0, 0, 0)}, {"small": 5.0, "deep": 5.0})
    assert events.count("helios.evaluated") >= 3


def test_no_partial_loading_serves_the_whole_model(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=2, partial=False))
    run(h, 10, {"small": (0, 16, 0), "deep": (0, 0, 16, 0, 0, 0, 0, 0, 0)}, {"small": 5.0, "deep": 5.0})
    assert h.depth == h.by_name[h.model].max_depth


def test_bad_settings_are_refused(cands: list[Candidate]) -> None:
    with pytest.raises(ConfigError):
        Helios("lm", cands, "speed")
    with pytest.raises(ConfigError):
        Helios("lm", [], "throughput")
    with pytest.raises(ConfigError):
        HeliosParams(coverage=0.0)


def test_an_evaluation_whose_results_never_all_come_back_still_ends(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(paired=False, eval_prompts=3, reassess=1000))
    for _ in range(6):  # both candidates' evaluation prompts go out
        model, depth, _ = h.target()
        h.dispatched(model, depth, 1)
    # one result of each comes back; the other evaluation prompts expired
    for m in ("small", "deep"):
        d = h.by_name[m].max_depth
        h.observe(BatchObs(m, d, 1, 0.01, (ItemStats(16, 0, tuple([0] * d + [16]), 5.0),)))
    assert h.phase == "evaluate"
    for _ in range(6):  # serving on with the last candidate meanwhile
        model, depth, _ = h.target()
        h.dispatched(model, depth, 1)
    events = h.observe(BatchObs("deep", 8, 1, 0.01, (ItemStats(16, 0, tuple([0] * 8 + [16]), 5.0),)))
    assert h.phase == "serve" and [e for e, _ in events] == ["helios.evaluated"]


def test_a_breach_never_switches_back_before_the_next_reassessment(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(paired=False, eval_prompts=2, reassess=10_000))
    run(h, 10, {"small": (0, 16, 0), "deep": (0, 0, 16, 0, 0, 0, 0, 0, 0)}, {"small": 5.0, "deep": 5.0})
    assert (h.model, h.counts["switches"]) == ("small", 0)
    # small breaches and does worse than deep did: a trip switches to deep
    run(h, 20, {"small": (14, 1, 1), "deep": (0, 0, 16, 0, 0, 0, 0, 0, 0)}, {"small": 6.0, "deep": 5.0})
    assert (h.model, h.counts["switches"]) == ("deep", 1)
    # now deep breaches and does worse than small's last figures: small looks better again on
    # stale rows, but going back is the re-assessment's call, not a breach's
    events = run(h, 40, {"small": (14, 1, 1), "deep": (16, 0, 0, 0, 0, 0, 0, 0, 0)}, {"small": 6.0, "deep": 7.0})
    assert h.counts["breach_trips"] >= 3 and "helios.switched" not in events
    assert (h.model, h.counts["switches"]) == ("deep", 1)


def test_a_reassessment_replaces_a_candidates_rows_only_when_its_evaluation_reports(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(paired=False, eval_prompts=2, reassess=6))
    table = {"small": (0, 16, 0), "deep": (0, 0, 16, 0, 0, 0, 0, 0, 0)}
    run(h, 4, table, {"small": 5.0, "deep": 5.0})  # the first evaluation
    while h.phase == "serve":
        run(h, 1, table, {"small": 5.0, "deep": 5.0})
    # the re-assessment has begun: the table still holds what was measured so far
    assert h.pht.rows and h.snapshot()["rows"]
    served = {k for k in h.pht.rows if k[0] == "small"}
    assert served >= {("small", 1)} and h.pht.rows[("small", 1)].prompts > 1
    run(h, 1, table, {"small": 5.0, "deep": 5.0})  # small's first evaluation result
    # evaluated at the depth it serves at (its greedy depth, 1), its served rows replaced by it
    assert {k for k in h.pht.rows if k[0] == "small"} == {("small", 1)}
    assert h.pht.rows[("small", 1)].prompts == 1


def _tall() -> Candidate:
    """A deep candidate whose weights grow with depth: 1 MB a layer pair (KV 2 KiB a token)."""
    from .conftest import figures

    return Candidate("deep", "lm", 0.8, {d: figures(d, 600.0 / d, 4.7 - 0.0125 * d, weight_mb=d / 2)
                                         for d in (2, 4, 6, 8)})


def test_evaluation_runs_as_a_batch_where_the_memory_fits_it(cands: list[Candidate]) -> None:
    tall = _tall()
    h = Helios("lm", [cands[0], tall], "throughput", HeliosParams(paired=False, eval_prompts=3, reassess=1000))
    # 3 MB: deep whole (4 MB of weights) does not fit; at depth 4 (2 MB) 1 MB holds 4 sequences
    # of 256 KiB, at depth 6 nothing
    h.set_budget(3.0, 128)
    sent = []
    while h.phase == "evaluate" and len(sent) < 4:
        model, depth, limit = h.target()
        sent.append((model, depth, limit))
        h.dispatched(model, depth, 3, waiting=20)
    assert ("deep", 4) in {(m, d) for m, d, _ in sent}
    # the first batch of each candidate has no limit of HELIOS's own (the scheduler bounds it by
    # the memory at that depth): more than eval_prompts when more wait
    assert [limit for _, _, limit in sent[:2]] == [None, None]
    # results at depth 4 complete deep's evaluation (exits read up to there)
    for m, d in (("small", 2), ("deep", 4)):
        ex = (0, 0, 3) if m == "small" else (0, 0, 3, 0, 0)
        h.observe(BatchObs(m, d, 3, 0.05, tuple(ItemStats(3, 0, ex, 5.0) for _ in range(3))))
    assert h.phase == "serve" and h.counts["evaluations"] == 1


def test_every_evaluation_batch_takes_what_waits_until_the_candidate_has_its_prompts(
        cands: list[Candidate]) -> None:
    # under load the queue is still filling when a round starts: a first batch of one prompt
    for wide, second in ((True, None), (False, 4)):
        h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=5, full_width=wide))
        model, depth, limit = h.target()
        assert limit is None
        h.dispatched(model, depth, 1, waiting=1)
        # full width: the next batch of the same candidate is bounded only by the scheduler (the
        # memory at its depth, what waits); else by the four prompts its evaluation still lacks
        assert h.target() == (model, depth, second)
        h.dispatched(model, depth, 9, waiting=9)
        assert h.target()[0] != model  # its evaluation prompts are out: the next candidate's turn


def test_without_a_budget_the_evaluation_is_whole(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(eval_prompts=3))
    assert {h.target()[1]} == {cands[0].max_depth}


def test_a_load_more_drops_back_once_the_breaches_subside(cands: list[Candidate]) -> None:
    h = Helios("lm", cands, "throughput", HeliosParams(paired=False, eval_prompts=2, reassess=10_000))
    # deep is the accurate one (small's 6.0 is 20% off it) and exits at 2: served at depth 2
    easy = {"small": (0, 16, 0), "deep": (0, 0, 16, 0, 0, 0, 0, 0, 0)}
    ppl = {"small": 6.0, "deep": 5.0}
    run(h, 10, easy, ppl)
    assert (h.model, h.depth) == ("deep", 2)
    # a burst of tokens that need depth 4: the counter trips, more layers are loaded
    hard = {"small": (16, 0, 0), "deep": (0, 0, 4, 0, 12, 0, 0, 0, 0)}
    events = run(h, 8, hard, ppl)
    assert "helios.loaded_more" in events and h.depth > 2
    deeper = h.depth
    # while the tokens still need it, the depth is held
    assert "helios.dropped_back" not in run(h, 20, hard, ppl) and h.depth == deeper
    # the burst is over: after a window of tokens that exit at 2 again, back to depth 2
    bodies: list[tuple[str, dict[str, object]]] = []
    events = run(h, 10, easy, ppl, bodies)
    assert "helios.dropped_back" in events and (h.model, h.depth) == ("deep", 2)
    assert h.counts["drops"] == 1 and h.counts["breach_trips"] >= 1
    # the event carries the figures that decided and is a valid telemetry event
    body = next(b for n, b in bodies if n == "helios.dropped_back")
    ev = HeliosDroppedBack(ts=0.0, **body)  # type: ignore[arg-type]
    assert (ev.from_depth, ev.depth) == (deeper, 2)
    cov = {o["depth"]: o["coverage"] for o in ev.options}
    assert cov[2] >= 0.65 and set(cov) == {d for d in (2, 4, 6, 8) if d <= deeper}


def test_options_are_sized_by_the_queue_and_the_memory(cands: list[Candidate]) -> None:
    tall = _tall()
    h = Helios("lm", [cands[0], tall], "throughput", HeliosParams())
    h.set_budget(3.0, 128)
    assert h._batch_of(tall, 2) == 1  # nothing queued yet: one prompt
    for _ in range(4):
        h.dispatched("small", 2, 3, waiting=30)
    # 30 waiting: at depth 2 (1 MB) 2 MB hold 8 sequences; at depth 4, 4
    assert h._batch_of(tall, 2) == 8 and h._batch_of(tall, 4) == 4
