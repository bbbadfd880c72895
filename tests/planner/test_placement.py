"""Operator-chosen split placement: parsing the option, and which plan a batch gets."""

from __future__ import annotations

import pytest

from adaserve.broker import ConfigError
from adaserve.planner.config import PlannerConfig
from adaserve.planner.core import Decision
from adaserve.planner.placement import Split, parse_split, parse_splits, place

SPLITS = parse_splits(("effnet-lite0=gpu:cpu",))


def test_a_split_reads_model_first_and_second_pool() -> None:
    assert parse_split(" effnet-lite0=gpu:cpu-2 ") == Split("effnet-lite0", "gpu", "cpu-2", "part1")


@pytest.mark.parametrize(("specs", "match"), [
    (("effnet-lite0",), "MODEL=FIRST_POOL:SECOND_POOL"),
    (("effnet-lite0=gpu",), "MODEL=FIRST_POOL:SECOND_POOL"),
    (("effnet lite0=gpu:cpu",), "MODEL=FIRST_POOL:SECOND_POOL"),
    (("effnet-lite0=gpu:gpu",), "two different pools"),
    (("m=a:b", "m=b:c"), "split twice"),
])
def test_bad_splits_are_config_errors(specs: tuple[str, ...], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_splits(specs)


def test_the_planner_config_checks_its_splits_when_made() -> None:
    assert PlannerConfig(split=("m=a:b",)).split == ("m=a:b",)
    with pytest.raises(ConfigError, match="two different pools"):
        PlannerConfig(split=("m=a:a",))


def test_a_batch_sent_to_the_first_pool_runs_part_1_and_names_the_second() -> None:
    plan = place("effnet-lite0", "gpu", Decision(), SPLITS, {"gpu", "cpu"})
    assert plan.variant == "part1"
    assert (plan.placement.pool, plan.placement.part, plan.placement.next_pool) == ("gpu", 1, "cpu")


@pytest.mark.parametrize(("model", "pool", "decision", "serving"), [
    ("effnet-lite0", "cpu", Decision(), {"gpu", "cpu"}),            # sent to the second pool: whole there
    ("effnet-lite0", "gpu", Decision(), {"gpu"}),                   # no live worker of the second pool
    ("fsdd-cnn", "gpu", Decision(), {"gpu", "cpu"}),                # not a split model
    ("effnet-lite0", "gpu", Decision(variant="whole"), {"gpu", "cpu"}),  # the policy chose a variant
])
def test_otherwise_the_chosen_variant_runs_whole(model: str, pool: str, decision: Decision, serving: set[str]) -> None:
    plan = place(model, pool, decision, SPLITS, serving)
    assert plan.variant == decision.variant
    assert (plan.placement.pool, plan.placement.part, plan.placement.next_pool) == (pool, None, None)


def test_modalities_chosen_by_the_policy_are_kept() -> None:
    plan = place("av-digits", "cpu", Decision(variant="audio", modalities=("audio",)), SPLITS, {"cpu"})
    assert plan.modalities == ("audio",) and plan.variant == "audio"
