from __future__ import annotations

import math

import pytest

from adaserve.planner.helios.pht import BatchObs, ItemStats, PerformanceHistory, estimate
from adaserve.planner.helios.repository import Candidate


def obs(model: str, depth: int, exits: tuple[int, ...], *, n: int = 2, ppl: float = 5.0, secs: float = 0.1,
        load_s: float | None = None) -> BatchObs:
    tokens = sum(exits)
    return BatchObs(model, depth, n, secs, tuple(ItemStats(tokens, exits[0], exits, ppl) for _ in range(n)), load_s)


def test_rows_keep_tokens_breaches_rate_and_perplexity() -> None:
    pht = PerformanceHistory()
    pht.record(obs("deep", 8, (2, 10, 0, 0, 4), ppl=4.0, secs=0.2, load_s=0.3))
    pht.record(obs("deep", 8, (0, 16, 0, 0, 0), ppl=9.0, secs=0.2))
    row = pht.rows[("deep", 8)]
    assert row.prompts == 4 and row.tokens == 64 and row.breaches == 4
    assert row.tokens_per_s() == pytest.approx(64 / 0.4)
    assert row.perplexity() == pytest.approx(6.0)  # geometric mean of 4 and 9
    assert row.load_s == 0.3  # the last measured load stays when later batches paid none
    assert row.exit_counts() == [4, 52, 0, 0, 8, 0, 0, 0, 0]


def test_exit_share_counts_breaches_at_a_partial_depth_as_deeper() -> None:
    pht = PerformanceHistory()
    pht.record(obs("deep", 4, (4, 8, 0, 0, 4)))  # exits index = exit head; 4 breaches at depth 4
    assert pht.exit_share("deep", 1) == pytest.approx(8 / 16)
    assert pht.exit_share("deep", 4) == pytest.approx(12 / 16)
    assert pht.exit_share("deep", 8) == pytest.approx(12 / 16)  # unknown beyond 4: not covered
    assert pht.exit_share("small", 1) is None


def test_window_forgets_old_batches() -> None:
    pht = PerformanceHistory(window=2)
    for ppl in (100.0, 2.0, 2.0):
        pht.record(obs("small", 2, (0, 4, 4), ppl=ppl))
    assert pht.rows[("small", 2)].perplexity() == pytest.approx(2.0)


def test_results_without_exit_figures_count_confident_tokens_at_the_loaded_depth() -> None:
    pht = PerformanceHistory()
    pht.record(BatchObs("small", 2, 1, 0.1, (ItemStats(10, 3),)))
    assert pht.rows[("small", 2)].exit_counts() == [3, 0, 7]


def test_estimate_scales_the_profile_by_what_this_traffic_measured(cands: list[Candidate]) -> None:
    pht = PerformanceHistory()
    deep = cands[1]
    e0 = estimate(pht, deep, 4)
    assert e0.tokens_per_s == pytest.approx(150.0) and e0.coverage is None
    # measured at depth 8 at half the profiled rate and twice the perplexity
    prof8 = deep.at(8)
    pht.record(obs("deep", 8, (0, 8, 0, 0, 0), n=1, secs=8 / (prof8.rate(1) / 2),
                   ppl=2 * prof8.mean_perplexity()))
    e = estimate(pht, deep, 4)
    assert e.tokens_per_s == pytest.approx(75.0)
    assert e.perplexity == pytest.approx(2 * deep.at(4).mean_perplexity())
    assert e.coverage == pytest.approx(1.0)
    assert math.isfinite(e.cost_per_token)


def test_estimate_scales_a_measured_row_to_another_batch_size(cands: list[Candidate]) -> None:
    pht = PerformanceHistory()
    deep = cands[1]
    prof = deep.at(2)
    # measured at batch 4 at half the profiled rate there
    pht.record(obs("deep", 2, (0, 0, 16), n=4, secs=64 / (prof.rate(4) / 2)))
    assert estimate(pht, deep, 2, batch=4).tokens_per_s == pytest.approx(prof.rate(4) / 2)
    # at batch 16 the same traffic should run at half the profiled batch-16 rate
    assert estimate(pht, deep, 2, batch=16).tokens_per_s == pytest.approx(prof.rate(16) / 2)
    assert estimate(pht, deep, 4, batch=16).tokens_per_s == pytest.approx(deep.at(4).rate(16) / 2)
