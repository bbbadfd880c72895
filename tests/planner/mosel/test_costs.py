from __future__ import annotations

import pytest

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.profiles import LatencyPoint, Profile, QualityPoint
from adaserve.planner.mosel import SubsetCosts, synthetic_av_digits_profile


def _profile(points: dict[str, dict[int, float]], acc: dict[str, float]) -> Profile:
    lat = [LatencyPoint(variant=v, device="cpu", batch_size=b, p50_ms=ms, p90_ms=ms, mean_ms=ms, repeats=1)
           for v, row in points.items() for b, ms in row.items()]
    q = [QualityPoint(variant=v, metric="accuracy", value=a, n=10) for v, a in acc.items()]
    return Profile(model="m", created_ms=1.0, latency=lat, quality=q)


def test_run_ms_splits_into_the_cheapest_batches() -> None:
    # A batch of 3 costs more than 2 + 1 here, so 3 requests run as two batches.
    c = SubsetCosts(("a",), (0.5,), ((1.0, 1.5, 4.0),))
    assert c.run_ms(0, 0) == 0.0
    assert c.run_ms(0, 3) == pytest.approx(2.5)
    assert c.run_ms(0, 6) == pytest.approx(4.5)  # 2+2+2 = 1.5*3
    assert c.run_ms(0, 7) == pytest.approx(5.5)  # 2+2+2+1


def test_strategy_accuracy_is_the_mean_over_requests() -> None:
    c = SubsetCosts(("x", "y"), (0.5, 0.9), ((1.0, 2.0), (3.0, 5.0)))
    s = c.strategy((1, 3))
    assert s.accuracy == pytest.approx((0.5 + 3 * 0.9) / 4)
    assert s.latency_s == pytest.approx((1.0 + 5.0 + 3.0) / 1e3)
    assert s.by_subset() == {"x": 1, "y": 3}
    assert s.label() == "x:1,y:3"
    assert s.assign(["r1", "r2", "r3", "r4"]) == {"r1": "x", "r2": "y", "r3": "y", "r4": "y"}
    with pytest.raises(ValueError):
        s.assign(["r1"])


def test_from_profile_fills_skipped_batch_sizes() -> None:
    p = _profile({"audio": {1: 2.0, 4: 5.0}, "image": {1: 1.0, 2: 1.0, 4: 1.0}},
                 {"audio": 0.8, "image": 0.6})
    c = SubsetCosts.from_profile(p)
    assert c.subsets == ("audio", "image")
    assert c.batch_ms[0] == pytest.approx((2.0, 3.0, 4.0, 5.0))
    assert c.max_batch == 4


def test_from_profile_rejects_a_variant_without_accuracy() -> None:
    p = _profile({"audio": {1: 2.0}}, {})
    with pytest.raises(InvalidMessage):
        SubsetCosts.from_profile(p)
    with pytest.raises(InvalidMessage):
        SubsetCosts.from_profile(synthetic_av_digits_profile(), device="gpu")


def test_bad_tables_are_refused() -> None:
    with pytest.raises(ValueError):
        SubsetCosts(("a", "a"), (0.5, 0.5), ((1.0,), (1.0,)))
    with pytest.raises(ValueError):
        SubsetCosts(("a", "b"), (0.5, 0.5), ((1.0,), (1.0, 2.0)))
    with pytest.raises(ValueError):
        SubsetCosts(("a",), (0.5,), ((-1.0,),))


def test_scaled_multiplies_every_latency(costs: SubsetCosts) -> None:
    s = costs.scaled(1.5)
    assert s.run_ms(1, 7) == pytest.approx(1.5 * costs.run_ms(1, 7))
    assert s.accuracy == costs.accuracy
