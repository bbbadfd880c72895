"""The planner's HEFT settings and glue: validated at construction, the plan a choice becomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaserve.broker.errors import ConfigError
from adaserve.planner.config import PlannerConfig
from adaserve.planner.core import Decision
from adaserve.planner.heft.live import LivePlacement, parse_kinds
from adaserve.planner.pools import PoolView

PROFILE = Path(__file__).resolve().parents[3] / "docs" / "gpu-h100.json"
M = "effnet-lite0"


def test_settings_are_checked_with_a_clear_error(tmp_path: Path) -> None:
    PlannerConfig(placement="heft", heft_profile=str(PROFILE), pool_kind=("fast=gpu",))
    with pytest.raises(ConfigError, match="unknown placement"):
        PlannerConfig(placement="round-robin")
    with pytest.raises(ConfigError, match="POOL=KIND"):
        PlannerConfig(placement="heft", pool_kind=("fast",))
    with pytest.raises(ConfigError, match="not a file"):
        PlannerConfig(placement="heft", heft_profile=str(tmp_path / "nope.json"))
    assert parse_kinds(("a=gpu", "b = cpu")) == {"a": "gpu", "b": "cpu"}


def _pools(gpu_free: bool = True) -> list[PoolView]:
    return [PoolView("gpu", 1, 0 if gpu_free else 1, {M}), PoolView("cpu", 1, 0, {M})]


def test_from_the_h100_profile_light_load_is_whole_on_the_gpu_and_a_backlog_splits() -> None:
    lp = LivePlacement.build(str(PROFILE), (), frozenset())
    assert lp.handles(M) and not lp.handles("unknown-model")
    c = lp.choose(M, 8, 8, _pools(), 10.0)
    assert c is not None and c.label == "whole@gpu"
    plan = lp.plan(c, Decision())
    assert plan.variant == "default" and plan.placement.pool == "gpu" and plan.placement.next_pool is None
    c = lp.choose(M, 32, 32 * 8, _pools(), 10.0)  # seven batches of 32 behind this one
    assert c is not None and c.label == "part1@gpu->part2@cpu"
    plan = lp.plan(c, Decision())
    assert (plan.variant, plan.placement.part, plan.placement.next_pool) == ("part1", 1, "cpu")
    # a batch whose policy chose another variant (a modality subset, say) runs that variant whole
    assert lp.plan(c, Decision(variant="audio")).variant == "audio"


def test_a_model_under_a_manual_split_is_left_to_it() -> None:
    assert not LivePlacement.build(str(PROFILE), (), frozenset({M})).handles(M)


def test_finished_batches_teach_the_histories_and_report_the_error() -> None:
    lp = LivePlacement.build(str(PROFILE), (), frozenset())
    c = lp.choose(M, 32, 32 * 8, _pools(), 10.0)
    assert c is not None and c.split
    fields = lp.dispatched("b1", M, c, 32)
    assert fields["placement"] == c.label and fields["predicted_finish_ms"] == pytest.approx(c.finish * 1000)
    assert lp.finished("b1", "gpu", M, "part1", 1, 32, 5.5, 10_006.0) is None
    out = lp.finished("b1.0", "cpu", M, "part2", 2, 32, 14.0, 10_030.0)
    assert out is not None and out.batch_id == "b1" and out.error == pytest.approx(10.030 - c.finish)
    state = lp.state(10.1)
    measured = [h for h in state["histories"] if h["n"] == 1]
    assert {(h["part"], h["kind"], h["batch"]) for h in measured} == {("part1", "gpu", 32), ("part2", "cpu", 32)}
    # a whole run of another variant is not the whole model's time
    lp.finished("b2", "gpu", M, "audio", None, 8, 99.0, 10_200.0)
    whole = [h for h in lp.state(10.3)["histories"] if h["part"] == "whole" and h["n"]]
    assert whole == []


def test_a_pools_measured_dispatch_delay_moves_its_start() -> None:
    lp = LivePlacement.build(str(PROFILE), (), frozenset())
    plain = lp.choose(M, 8, 8, _pools(), 10.0)
    late = lp.choose(M, 8, 8, _pools(), 10.0, delays={"gpu": 0.004})
    assert plain is not None and late is not None and late.label == plain.label == "whole@gpu"
    assert late.finish == pytest.approx(plain.finish + 0.004)


def test_the_rate_caps_batches_only_of_a_policy_that_does_not_size_them_by_deadline() -> None:
    lp = LivePlacement.build(str(PROFILE), (), frozenset())
    for i in range(401):  # 2,000 requests/s
        lp.placer.arrived(M, 10.0 + i * 0.0005)
    pool = _pools()[0]
    b = lp.size(M, 10.2, 32, pool, "fifo")
    assert b == 3  # the profile's line: 0.79 ms + 0.16 ms per photo; 3 photos (1.28 ms) keep up with 1.5 ms
    assert lp.size(M, 10.2, 32, pool, "orloj") == 32 and lp.size(M, 10.2, 32, pool, "edf") == 32
    assert lp.placer.sizes[M][2] == b  # chosen (and published) either way
