"""The strategy matrix of av-video's shipped profile: cheap audio for low floors, the costly
audio+video mixed in only as floors rise past what audio alone reaches."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker.profiles import Profile
from adaserve.planner.mosel import StrategyMatrix, SubsetCosts, build_matrix
from adaserve.planner.mosel.matrix import matrix_path
from adaserve.planner.mosel.store import SHIPPED_DIR

PATH = SHIPPED_DIR / "av-video.json"


@pytest.fixture(scope="module")
def profile() -> Profile:
    return Profile.from_json(PATH.read_bytes())


@pytest.fixture(scope="module")
def shipped(profile: Profile) -> StrategyMatrix:
    m = StrategyMatrix.load(matrix_path(PATH))
    assert m.profile_created_ms == profile.created_ms and m.max_size == 32 and m.floor_step == 0.01
    return m


def test_the_profile_has_the_cost_structure(profile: Profile) -> None:
    costs = SubsetCosts.from_profile(profile)
    acc = dict(zip(costs.subsets, costs.accuracy))
    assert acc["video"] < acc["audio"] < acc["audio+video"]
    per_request = {s: costs.run_ms(m, 32) / 32 for m, s in enumerate(costs.subsets)}
    assert per_request["audio+video"] >= 10 * per_request["audio"]


@pytest.mark.parametrize("n", [4, 16, 32])
def test_cheap_subset_for_low_floors_costly_one_mixed_in_as_floors_rise(shipped: StrategyMatrix, n: int) -> None:
    acc = dict(zip(shipped.subsets, shipped.accuracy))
    costly = []
    for f in shipped.floors:
        s = shipped.lookup(n, f)
        counts = s.by_subset()
        assert s.accuracy >= f - 1e-9 and counts.get("video", 0) == 0
        if f <= acc["audio"] + 1e-9:
            assert counts == {"audio": n}
        costly.append(counts.get("audio+video", 0))
    assert costly == sorted(costly)  # never fewer costly requests for a higher floor
    assert costly[-1] == n  # the top floor needs every request on both modalities
    # A floor just above audio alone needs some costly requests, far from all of them.
    above = shipped.lookup(n, acc["audio"] + 0.01).by_subset().get("audio+video", 0)
    assert 0 < above <= max(1, n // 2)


def test_shipped_matrix_is_what_the_solver_gives(profile: Profile, shipped: StrategyMatrix) -> None:
    fresh = build_matrix(SubsetCosts.from_profile(profile), 6, step=0.01, model="av-video")
    for n in range(1, 7):
        for f in fresh.floors[::4]:
            assert fresh.lookup(n, f).counts == shipped.lookup(n, f).counts


def test_least_work_is_a_fraction_of_all_modalities(shipped: StrategyMatrix) -> None:
    floors = np.linspace(shipped.floors[0], shipped.floors[-1], 50)
    least = np.mean([shipped.lookup(16, f).latency_s for f in floors])
    assert least < shipped.richest(16).latency_s / 3.6
