from __future__ import annotations

import itertools
import math

import pytest

from adaserve.broker.errors import InvalidMessage
from adaserve.planner.mosel import StrategyMatrix, floor_grid, matrix_path


def test_grid_ends_on_the_best_accuracy() -> None:
    g = floor_grid(0.62, 0.96, 0.05)
    assert g[0] == 0.62 and g[-1] == 0.96
    assert all(b > a for a, b in itertools.pairwise(g))
    assert len(floor_grid(0.5, 0.7, 0.1)) == 3  # 0.5, 0.6, 0.7: no duplicate at the end


def test_lookup_rounds_the_floor_up_to_the_grid(matrix: StrategyMatrix) -> None:
    floors = matrix.floors
    probes = [0.0, floors[0], floors[0] + 1e-12, 0.7, 0.8, 0.85, 0.9, floors[-2] + 1e-6, floors[-1]]
    for f in probes:
        i = matrix.floor_index(f)
        # the nearest grid floor at or above f, found by a linear scan
        want = next(k for k, g in enumerate(floors) if g >= f - 1e-9)
        assert i == want, f
        for n in range(1, matrix.max_size + 1):
            s = matrix.lookup(n, f)
            assert s.size == n and s.meets(f)


def test_unreachable_floor_and_bad_size_are_rejected(matrix: StrategyMatrix) -> None:
    with pytest.raises(InvalidMessage) as e:
        matrix.lookup(2, 0.99)
    assert e.value.reason == "accuracy_floor"
    with pytest.raises(InvalidMessage):
        matrix.lookup(0, 0.7)
    with pytest.raises(InvalidMessage):
        matrix.candidates(matrix.max_size + 1, 0.7)


def test_candidates_are_a_pareto_front_meeting_the_floor(matrix: StrategyMatrix) -> None:
    for n in range(1, matrix.max_size + 1):
        for f in (0.62, 0.75, 0.9):
            cands = matrix.candidates(n, f)
            assert cands[0] == matrix.lookup(n, f)
            assert cands[-1] == matrix.richest(n)
            assert all(s.meets(f) for s in cands)
            for a, b in itertools.pairwise(cands):
                assert b.accuracy > a.accuracy and b.latency_s > a.latency_s


def test_richest_runs_everything_on_the_best_subset(matrix: StrategyMatrix) -> None:
    s = matrix.richest(4)
    assert s.by_subset() == {"audio+image": 4}
    assert math.isclose(s.accuracy, 0.96)


def test_save_and_load_round_trip(matrix: StrategyMatrix, tmp_path) -> None:
    path = matrix_path(tmp_path / "av-digits.json")
    assert path.name == "av-digits.mosel.json"
    matrix.save(path)
    back = StrategyMatrix.load(path)
    assert back.entries == matrix.entries
    assert back.lookup(5, 0.8) == matrix.lookup(5, 0.8)


def test_a_tampered_entry_below_its_floor_does_not_load(matrix: StrategyMatrix) -> None:
    data = matrix.model_dump()
    top = len(data["floors"]) - 1
    data["entries"][1][top] = [0, 0, 2]  # two image-only requests for the 0.96 floor
    with pytest.raises(ValueError):
        StrategyMatrix.model_validate(data)
