"""The HELIOS bench's simulator on constructed traces and costs (no model files): the closed loop
of the light cell, and loads charged as the worker's runner cache charges them."""

import numpy as np
import pytest

from adaserve.bench.helios_sim import _evict, simulate
from adaserve.bench.helios_trace import Costs, Trace
from adaserve.planner.helios.repository import Candidate, DepthFigures

NEW = 4
P = 12


def _costs(name: str, depths: tuple[int, ...], weight_mb: float) -> Costs:
    per = {d: {1: 0.010 * d, 4: 0.012 * d, 16: 0.020 * d} for d in depths}
    return Costs(name, per, per, {d: 0.5 * d for d in depths}, {d: int(weight_mb * d * 2**20) for d in depths},
                 {d: 1024 * d for d in depths}, 64, {"a": 0.1}, {"a": 0.01})


def _trace(name: str, depths: tuple[int, ...]) -> Trace:
    e = len(depths)
    return Trace(name, depths, np.full((P, NEW), depths[0]), np.ones((P, NEW, e), bool), np.full((P, e), 5.0))


def _cand(c: Costs) -> Candidate:
    figs = {d: DepthFigures(d, {1: 100.0, 4: 300.0, 16: 800.0}, 0.01, c.weight_bytes[d], c.kv_bytes_per_token[d],
                            c.load_s[d], 0.01, {"a": 5.0}, {"a": 1.0}) for d in c.step_s}
    return Candidate(c.model, "lm", 0.4, figs)


@pytest.fixture
def setup() -> tuple[dict[str, Trace], dict[str, Costs], list[Candidate]]:
    costs = {"m": _costs("m", (1, 2), 1.0), "n": _costs("n", (1, 2), 1.0)}
    traces = {k: _trace(k, (1, 2)) for k in costs}
    return traces, costs, [_cand(c) for c in costs.values()]


def test_a_closed_loop_with_one_in_flight_never_idles_and_batches_one(setup) -> None:
    traces, costs, cands = setup
    # arrivals given far apart: the closed loop ignores them (only their number counts)
    spread = np.arange(P) * 100.0
    run = simulate("fixed-m-d2", spread, traces, costs, cands, new=NEW, memory_mb=64.0, max_batch=16,
                   tasks=["a"] * P, in_flight=1)
    assert run.batches == [1] * P
    assert run.last_done - run.first_arrival == pytest.approx(run.busy_s)
    # the same prompts arriving at once: larger batches, the same tokens in less time
    burst = simulate("fixed-m-d2", np.zeros(P), traces, costs, cands, new=NEW, memory_mb=64.0, max_batch=16,
                     tasks=["a"] * P)
    assert max(burst.batches) > 1 and burst.busy_s < run.busy_s
    # an open-loop rate below capacity idles between prompts
    slow = simulate("fixed-m-d2", spread, traces, costs, cands, new=NEW, memory_mb=64.0, max_batch=16, tasks=["a"] * P)
    assert slow.last_done - slow.first_arrival > 10 * slow.busy_s
    with pytest.raises(ValueError):
        simulate("fixed-m-d2", spread, traces, costs, cands, new=NEW, memory_mb=64.0, max_batch=16, in_flight=0)


def test_the_worker_cache_keeps_runners_within_the_budget_least_recently_used_out(setup) -> None:
    _, costs, _ = setup
    held = {("m", 2): 0, ("n", 2): 1, ("n", 1): 2}  # 2 + 2 + 1 MB, last used in that order
    _evict(held, costs, 5.0, keep={("n", 1)})
    assert held == {("m", 2): 0, ("n", 2): 1, ("n", 1): 2}  # 5 MB fit
    _evict(held, costs, 4.0, keep={("m", 2)})
    assert set(held) == {("m", 2), ("n", 1)}  # the least recently used other one went
    _evict(held, costs, 0.5, keep={("m", 2)})
    assert set(held) == {("m", 2)}  # the one in use stays, alone over the budget


def test_a_fixed_cut_loads_once_and_helios_pays_a_load_per_runner_not_per_return(setup) -> None:
    traces, costs, cands = setup
    run = simulate("fixed-m-d2", np.zeros(P), traces, costs, cands, new=NEW, memory_mb=64.0, max_batch=2,
                   tasks=["a"] * P, in_flight=1)
    assert run.loads == 1
    # evaluation serves m then n (each at its depths), and serving goes back to one of them:
    # with room for all, each (model, depth) is loaded once at most
    h = simulate("helios", np.zeros(P), traces, costs, cands, new=NEW, memory_mb=64.0, max_batch=2,
                 tasks=["a"] * P, in_flight=1)
    assert len(h.exits) >= 2 and h.loads == len(h.exits)
