"""The live planner's latency correction per modality subset: each subset's scale follows its own
batches, and the selector's plans follow the scales of the subsets they use."""

from __future__ import annotations

import pytest

from adaserve.planner.mosel import StrategyMatrix, SubsetCosts
from adaserve.planner.mosel.correction import SubsetCorrection
from adaserve.planner.mosel.queue import QueuedJob, QueueState
from adaserve.planner.mosel.selector import ModalitySelector


def _batch_s(costs: SubsetCosts, subset: str, k: int) -> float:
    return costs.run_ms(costs.subsets.index(subset), k) / 1e3


def test_each_subset_learns_its_own_scale(costs: SubsetCosts) -> None:
    c = SubsetCorrection(costs, learn_rate=0.5)
    c.observe("audio", 4, 10 * _batch_s(costs, "audio", 4))
    assert c.as_dict()["audio"] == pytest.approx(10.0)  # the first batch replaces the prior
    c.observe("audio", 2, 4 * _batch_s(costs, "audio", 2))
    assert c.as_dict()["audio"] == pytest.approx(7.0)  # then a running average
    c.observe("audio", 2, 1e6)
    assert c.as_dict()["audio"] == pytest.approx(53.5)  # an outlier counts at most as 100x
    assert c.as_dict()["image"] == 1.0 and c.as_dict()["audio+image"] == 1.0
    with pytest.raises(ValueError):
        SubsetCorrection(costs, learn_rate=0.0)


def test_a_strategy_costs_each_subset_at_its_own_scale(matrix: StrategyMatrix) -> None:
    costs = matrix.costs
    c = SubsetCorrection(costs, learn_rate=1.0)
    c.observe("image", 4, 3 * _batch_s(costs, "image", 4))
    mixed = next(s for s in matrix.candidates(6, matrix.floors[len(matrix.floors) // 2])
                 if sum(1 for k in s.counts if k) > 1)
    want = sum(costs.run_ms(m, k) / 1e3 * (3.0 if costs.subsets[m] == "image" else 1.0)
               for m, k in enumerate(mixed.counts) if k)
    assert c.strategy_s(mixed) == pytest.approx(want)
    assert c.strategy_s(mixed) != pytest.approx(mixed.latency_s)


@pytest.mark.parametrize("policy", ["optimized", "random", "aggressive"])
def test_plans_follow_the_scale_of_the_subsets_they_use(matrix: StrategyMatrix, policy: str) -> None:
    """A deadline that the richest mix meets at the profile's latency: a slow subset the mix does
    not use changes nothing, while the same slowness on the mix's own subset makes it cheaper.
    One scale for every subset could not tell the two apart."""
    costs = matrix.costs
    richest = matrix.richest(4)
    used = [costs.subsets[m] for m, k in enumerate(richest.counts) if k]
    unused = [s for s in costs.subsets if s not in used]
    assert unused, "the fixture's richest mix should leave a subset out"
    job = QueuedJob("j", 4, matrix.floors[0], 0.0, 1.5 * richest.latency_s)

    other = ModalitySelector(matrix, policy, learn_rate=0.5)
    other.admit(job)
    other.observe_batch(unused[0], 4, 3 * _batch_s(costs, unused[0], 4))
    assert other.replan(QueueState([job]), 0.0, admit_new=False) == []
    assert other.strategy("j") == richest

    own = ModalitySelector(matrix, policy, learn_rate=0.5)
    own.admit(job)
    own.observe_batch(used[0], 4, 3 * _batch_s(costs, used[0], 4))
    (change,) = own.replan(QueueState([job]), 0.0, admit_new=False)
    assert change.reason == "cheaper" and change.after is not None
    assert own.cost_s(change.after) <= job.deadline
    assert change.after.meets(job.floor)


def test_feedback_of_whole_jobs_keeps_one_scale(matrix: StrategyMatrix) -> None:
    """The simulator reports whole jobs: its selector never switches to per-subset scales, so its
    decisions are those of the shared scale."""
    sel = ModalitySelector(matrix, "optimized", learn_rate=0.5)
    sel.observe(0.010, 0.020)
    assert sel.correction is None and sel.latency_scale == pytest.approx(1.5)
    s = matrix.richest(3)
    assert sel.cost_s(s) == pytest.approx(1.5 * s.latency_s)
