import numpy as np
import pytest

from adaserve.planner.orloj.distributions import POOLED, ExecDistributions
from adaserve.planner.orloj.order_stats import expected_max_mixed
from adaserve.planner.orloj.tables import BatchTables


def _snapshot() -> object:
    d = ExecDistributions(min_samples=10)
    rng = np.random.default_rng(0)
    for x in rng.normal(0.04, 0.003, 300):
        d.add("short", x, 0.0)
    for x in rng.normal(0.10, 0.003, 300):
        d.add("long", x, 0.0)
    return d.rebuild()


def test_estimates_grow_with_size_and_know_each_app() -> None:
    t = BatchTables(_snapshot(), 0.05, 0.25, (1, 2, 4, 8), 0.1)  # type: ignore[arg-type]
    for app in ("short", "long", "unknown"):
        _, ests = t.row(app)
        assert list(ests) == sorted(ests)
    assert t.entry("short", 1).est_s == pytest.approx(0.05 + 0.25 * 0.04, abs=0.003)
    assert t.entry("long", 1).est_s == pytest.approx(0.05 + 0.25 * 0.10, abs=0.003)
    # a short request in a batch of 8 most likely shares it with long ones
    assert t.entry("short", 8).est_s > 0.05 + 0.25 * 8 * 0.09
    assert t.known("unknown") == POOLED


def test_predict_uses_the_actual_mix() -> None:
    snap = _snapshot()
    t = BatchTables(snap, 0.05, 0.25, (1, 2, 4), 0.1)  # type: ignore[arg-type]
    exact = expected_max_mixed(snap.edges, [snap.masses["short"], snap.masses["long"]], [3, 1])  # type: ignore[attr-defined]
    assert t.predict(["short", "short", "long", "short"]) == pytest.approx(0.05 + 0.25 * 4 * exact)
    assert t.predict(["short"] * 4) < t.predict(["short"] * 3 + ["long"])
    assert t.predict([]) == 0.0


def test_score_segments_have_few_breaks() -> None:
    t = BatchTables(_snapshot(), 0.05, 0.25, (1, 16), 0.1, score_bins=6)  # type: ignore[arg-type]
    for app in ("short", "long", POOLED):
        for k in (1, 16):
            assert len(t.entry(app, k).segments.breaks) <= 7


def test_a_row_is_made_when_first_asked_for_and_matches_the_one_off_figures() -> None:
    snap = _snapshot()
    t = BatchTables(snap, 0.05, 0.25, (1, 2, 4), 0.1)  # type: ignore[arg-type]
    assert not t._entries  # a rebuild holds the planner's loop: nothing is made before it is read
    entries, _ = t.row("short")
    assert {app for app, _ in t._entries} == {"short"}  # not the pool's row, nor another app's
    masses = [snap.masses["short"], snap.masses[POOLED]]  # type: ignore[attr-defined]
    for k, e in zip((1, 2, 4), entries):
        emax = expected_max_mixed(snap.edges, masses, [1, k - 1])  # type: ignore[attr-defined]
        assert e.est_s == 0.05 + 0.25 * k * emax  # exactly: the same arithmetic, done once per app
    assert t.entry(POOLED, 2).est_s > 0 and {app for app, _ in t._entries} == {"short", POOLED}
