import numpy as np
import pytest

from adaserve.planner.orloj.distributions import POOLED, ExecDistributions


def test_prior_serves_until_samples_arrive() -> None:
    d = ExecDistributions(prior_samples=np.array([0.05, 0.06]), min_samples=5)
    snap = d.snapshot
    assert snap.apps == [POOLED]
    assert 0.045 < snap.mean() < 0.065
    d.add("a", 0.2, now=0.0)
    assert d.rebuild() is snap  # too few samples: the prior stays


def test_per_app_histograms_on_one_grid() -> None:
    d = ExecDistributions(min_samples=10, nbins=16)
    rng = np.random.default_rng(0)
    for x in rng.normal(0.04, 0.002, 200):
        d.add("short", x, now=1.0)
    for x in rng.normal(0.10, 0.002, 200):
        d.add("long", x, now=1.0)
    d.add("rare", 0.07, now=1.0)
    snap = d.rebuild()
    assert set(snap.apps) == {POOLED, "short", "long"}
    assert snap.mean("short") == pytest.approx(0.04, abs=0.005)
    assert snap.mean("long") == pytest.approx(0.10, abs=0.005)
    assert snap.mass_of("rare") is snap.masses[POOLED]  # too few of its own: the pool stands in
    for m in snap.masses.values():
        assert m.size == snap.edges.size - 1 and m.sum() == pytest.approx(1.0)


def test_window_keeps_only_the_latest_samples() -> None:
    d = ExecDistributions(window=100, min_samples=10)
    for _ in range(500):
        d.add("a", 0.01, now=0.0)
    for _ in range(100):
        d.add("a", 0.05, now=0.0)
    assert len(d) == 100
    assert d.rebuild().mean("a") == pytest.approx(0.05, abs=0.002)


def test_reset_interval_forgets_old_inputs() -> None:
    d = ExecDistributions(reset_s=10.0, min_samples=20)
    for i in range(100):
        d.add("a", 0.01, now=i * 0.05)
    old = d.rebuild()
    d.add("a", 0.09, now=11.0)  # past the reset interval: the window is wiped first
    assert len(d) == 1
    assert d.rebuild() is old  # kept until the new window is thick enough
    for _ in range(30):
        d.add("a", 0.09, now=12.0)
    assert d.rebuild().mean("a") == pytest.approx(0.09, abs=0.003)


def test_from_histogram_and_bad_samples() -> None:
    d = ExecDistributions.from_histogram(np.array([0.01, 0.02, 0.03]), np.array([3, 1]))
    assert d.snapshot.mean() == pytest.approx(0.0175, abs=0.001)
    d.add("a", float("nan"), now=0.0)
    d.add("a", -1.0, now=0.0)
    assert len(d) == 0
    with pytest.raises(ValueError):
        ExecDistributions(prior_samples=np.array([-0.1]))
    with pytest.raises(ValueError):
        ExecDistributions(window=1)


def test_a_batch_added_at_once_is_its_requests_added_one_by_one() -> None:
    """``add_many`` (one call per finished batch on the planner's loop) against ``add`` per request:
    the same samples kept, bad ones left out, the same reset and the same snapshot."""
    rng = np.random.default_rng(5)
    one, many = ExecDistributions(window=50, reset_s=2.0), ExecDistributions(window=50, reset_s=2.0)
    for step in range(40):
        now = step * 0.25
        batch = [(f"a{rng.integers(0, 2)}", float(x)) for x in rng.gamma(2.0, 0.004, int(rng.integers(1, 6)))]
        batch += [("a0", float("nan")), ("a1", -0.002), ("a0", float("inf")), ("a1", 0.0)][: int(rng.integers(0, 5))]
        for app, s in batch:
            one.add(app, s, now)
        many.add_many(batch, now)
        assert len(one) == len(many) and one.pending_samples == many.pending_samples
        if step % 10 == 9:
            one.rebuild()
            many.rebuild()
            np.testing.assert_array_equal(one.snapshot.edges, many.snapshot.edges)
            assert one.snapshot.masses.keys() == many.snapshot.masses.keys()
    assert list(one._samples) == list(many._samples)
