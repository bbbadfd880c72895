"""The split rule on constructed per-unit times: the band, the crossing tensor, the tie-breaks."""

from __future__ import annotations

import pytest

from adaserve.models.node_times import choice_of, shipped, unit_times_from_trace
from adaserve.models.split_point import choose_split


def test_picks_the_smallest_crossing_tensor_inside_the_band() -> None:
    # tails: cut1 0.9, cut2 0.5, cut3 0.14, cut4 0.08, cut5 0.02
    times = [10, 40, 36, 6, 6, 2]
    crossing = [None, 100, 100, 900, 400, 10]
    c = choose_split(times, crossing)
    assert (c.cut, c.crossing_bytes, c.in_band) == (4, 400, True)
    assert c.tail_share == pytest.approx(0.08)
    assert [k.cut for k in c.candidates] == [1, 2, 3, 4, 5]


def test_equal_tensors_in_the_band_go_to_the_share_nearest_its_middle() -> None:
    times = [80, 6, 7, 7]  # tails: 0.2, 0.14, 0.07
    c = choose_split(times, [None, 50, 50, 50])
    assert (c.cut, c.in_band) == (3, True)  # 0.07 is 0.03 from the middle (0.10), 0.14 is 0.04
    assert choose_split([80, 4, 9, 7], [None, 50, 50, 50]).cut == 3  # tails 0.2, 0.16, 0.07: 0.16 is out
    assert choose_split([80, 8, 5, 7], [None, 50, 50, 50]).cut == 2  # 0.12 beats 0.07


def test_nearest_cut_to_the_band_when_none_lies_in_it() -> None:
    times = [70, 25, 5]  # tails: 0.30, 0.05 -> the second is in the band
    assert choose_split(times, [None, 10, 1_000]).cut == 2
    times = [50, 30, 20]  # tails 0.5, 0.2: none in the band, 0.2 is nearest
    c = choose_split(times, [None, 10, 1_000])
    assert (c.cut, c.in_band) == (2, False)


def test_cuts_without_one_crossing_tensor_are_skipped() -> None:
    c = choose_split([80, 10, 10], [None, 4, None])
    assert c.cut == 1 and not c.in_band


@pytest.mark.parametrize(("times", "crossing"), [([1, 2], [None]), ([0, 0], [None, 1]), ([1, -1], [None, 1]),
                                                 ([1, 1], [None, None])])
def test_bad_inputs_are_refused(times: list[float], crossing: list[int | None]) -> None:
    with pytest.raises(ValueError):
        choose_split(times, crossing)


def test_trace_events_are_summed_per_unit_and_run() -> None:
    def ev(name: str, dur: float) -> dict[str, object]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur}

    run = [ev("/units.0/Conv", 5), ev("ReorderOutput", 1), ev("/units.1/Relu", 2), ev("/units.2/Gemm", 3)]
    events = [{"cat": "Session", "name": "model_run", "dur": 99}, *run, *run]
    assert unit_times_from_trace(events, 3) == [[6.0, 2.0, 3.0], [6.0, 2.0, 3.0]]


@pytest.mark.parametrize("model", ["effnet-lite0", "ee-lm-s-split"])
def test_the_recorded_times_give_the_recorded_cut(model: str) -> None:
    doc = shipped(model)
    assert choice_of(doc) == doc["split"]["cut"] and doc["split"]["in_band"]
    assert 0.05 <= doc["split"]["tail_share"] <= 0.15


def test_effnet_split_constant_is_the_rule_s_choice() -> None:
    from adaserve.models.effnet.export import SPLIT_AFTER

    assert choice_of(shipped("effnet-lite0")) - 1 == SPLIT_AFTER
