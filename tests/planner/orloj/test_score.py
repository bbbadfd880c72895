import itertools
import math

import numpy as np
import pytest

from adaserve.planner.orloj.score import priority_reference, score_segments

EDGES = np.array([0.10, 0.12, 0.15, 0.20, 0.30])
MASS = np.array([0.1, 0.4, 0.3, 0.2])
MEAN = 0.17
B = 0.1


def test_segments_equal_eq2_evaluated_literally() -> None:
    segs = score_segments(EDGES, MASS, MEAN, B, cost=2.0)
    deadline = 1000.0
    for tau in np.linspace(0.0, 0.6, 61):
        t = deadline - tau
        assert segs.value(tau, B) == pytest.approx(priority_reference(t, deadline, EDGES, MASS, MEAN, B, 2.0),
                                                   rel=1e-9, abs=1e-12)


def test_score_rises_as_the_deadline_nears_while_every_bin_is_safe() -> None:
    segs = score_segments(EDGES, MASS, MEAN, B)
    taus = [2.0, 1.0, 0.5, 0.31]  # all beyond the last bin edge
    vals = [segs.value(t, B) for t in taus]
    assert all(a < b for a, b in itertools.pairwise(vals))


def test_score_is_zero_past_the_last_bin() -> None:
    segs = score_segments(EDGES, MASS, MEAN, B)
    assert segs.value(0.10, B) == 0.0
    assert segs.value(0.05, B) == 0.0
    assert segs.value(-1.0, B) == 0.0
    assert segs.value(0.11, B) > 0.0


def test_score_falls_inside_the_bins() -> None:
    segs = score_segments(EDGES, MASS, MEAN, B)
    assert segs.value(0.25, B) > segs.value(0.16, B) > segs.value(0.11, B)


def test_milestones_are_the_bin_edges_before_the_deadline() -> None:
    segs = score_segments(EDGES, MASS, MEAN, B)
    deadline = 50.0
    seg = segs.segment(1.0)
    times = []
    while (at := segs.milestone(deadline, seg)) is not None:
        times.append(at)
        seg = segs.segment_at(deadline, at)
    np.testing.assert_allclose(times, deadline - EDGES[::-1])


def test_a_milestone_always_moves_the_request_on() -> None:
    segs = score_segments(EDGES, MASS, MEAN, B)
    for deadline in (0.3, 1e3 + 0.1, 123456.789):
        seg = segs.segment_at(deadline, deadline - 10.0)
        while (at := segs.milestone(deadline, seg)) is not None:
            nxt = segs.segment_at(deadline, at)
            assert nxt < seg
            seg = nxt


def test_empty_bins_add_no_milestones() -> None:
    edges = np.array([0.1, 0.2, 0.3, 0.4])
    full = score_segments(edges, np.array([0.5, 0.1, 0.4]), 0.2, B)
    holed = score_segments(edges, np.array([0.5, 0.0, 0.5]), 0.2, B)
    assert len(holed.breaks) <= len(full.breaks)
    assert holed.value(0.25, B) == pytest.approx(priority_reference(100 - 0.25, 100, edges, np.array([0.5, 0.0, 0.5]), 0.2, B))


def test_nearer_mean_latency_scores_higher() -> None:
    """1/E[L] in Eq. (1): the cheaper batch is worth more per second of worker time."""
    fast = score_segments(EDGES, MASS, 0.15, B)
    slow = score_segments(EDGES, MASS, 0.30, B)
    assert fast.value(1.0, B) == pytest.approx(2 * slow.value(1.0, B))
    assert math.isfinite(fast.value(1.0, B))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        score_segments(EDGES, MASS, 0.0, B)
    with pytest.raises(ValueError):
        score_segments(EDGES, MASS, MEAN, 0.0)
    with pytest.raises(ValueError):
        score_segments(EDGES[::-1], MASS, MEAN, B)
