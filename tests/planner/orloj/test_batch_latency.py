import numpy as np
import pytest

from adaserve.planner.orloj.batch_latency import BatchLatencyFit


def test_fit_converges_to_the_batch_model() -> None:
    fit = BatchLatencyFit(c0=0.005, c1=0.2)
    rng = np.random.default_rng(0)
    for _ in range(300):
        k = int(rng.integers(1, 17))
        m = float(rng.uniform(0.04, 0.12))
        assert fit.update(k, m, 0.05 + 0.25 * k * m)
    assert fit.c0 == pytest.approx(0.05, abs=2e-3)
    assert fit.c1 == pytest.approx(0.25, abs=5e-3)
    assert fit.predict(4, 0.1) == pytest.approx(0.15, abs=3e-3)


def test_unusable_observations_are_ignored() -> None:
    fit = BatchLatencyFit()
    before = fit.coefficients()
    assert not fit.update(0, 0.1, 0.1)
    assert not fit.update(2, 0.1, float("nan"))
    assert not fit.update(2, -1.0, 0.1)
    assert fit.coefficients() == before and fit.observations == 0


def test_bad_prior_is_refused() -> None:
    with pytest.raises(ValueError):
        BatchLatencyFit(c0=-1.0)
    with pytest.raises(ValueError):
        BatchLatencyFit(forget=0.1)


def test_margin_is_what_the_line_misses_a_size_by() -> None:
    # Batches of 2-4 cost 1 ms + 0.1 per k * max; a full batch of 32 costs 0.5 ms more than that
    # line says. Mostly small batches, as at light load: the shared line follows them, and only the
    # margin makes the full batch's estimate honest.
    fit = BatchLatencyFit(c0=0.001, c1=0.1)
    rng = np.random.default_rng(1)
    m = 0.001
    for i in range(400):
        k = 32 if i % 40 == 0 else int(rng.integers(2, 5))
        fit.update(k, m, 0.001 + 0.1 * k * m + (0.0005 if k == 32 else 0.0) + float(rng.normal(0, 2e-5)))
    line = fit.predict(32, m)
    assert line < 0.0045  # the line alone is optimistic for the full batch (0.0047)
    assert line + fit.margin(32) == pytest.approx(0.0047, abs=5e-5)
    assert fit.predict(3, m) + fit.margin(3) == pytest.approx(0.0013, abs=5e-5)


def test_margin_waits_for_a_few_batches_and_ignores_a_stall() -> None:
    fit = BatchLatencyFit(c0=0.001, c1=0.1)
    for _ in range(fit.MIN_SEEN - 1):
        fit.update(8, 0.001, 0.003)
    assert fit.margin(8) == 0.0  # too few batches of 8 to say
    for _ in range(5):
        fit.update(8, 0.001, 0.003)
    assert fit.predict(8, 0.001) + fit.margin(8) == pytest.approx(0.003)
    fit.update(8, 0.001, 0.050)  # one stall of the machine: the line jumps, the estimate does not
    assert fit.predict(8, 0.001) + fit.margin(8) == pytest.approx(0.003, abs=2e-4)


def test_unseen_sizes_take_their_seen_neighbours_margins() -> None:
    fit = BatchLatencyFit(c0=0.001, c1=0.1)
    assert fit.margins((1, 16, 32)) == (0.0, 0.0, 0.0)
    for _ in range(20):
        fit.update(16, 0.001, 0.0026)
        fit.update(32, 0.001, 0.0050)
    m16, m32 = fit.margin(16), fit.margin(32)
    got = fit.margins((8, 16, 24, 32))
    assert got[1] == pytest.approx(m16) and got[3] == pytest.approx(m32)
    assert got[0] == pytest.approx(m16)  # held below the smallest seen size
    assert got[2] == pytest.approx((m16 + m32) / 2)  # between seen sizes: interpolated
    assert m32 > m16  # this line misses the full batch by more


def test_margin_never_makes_a_batch_free() -> None:
    fit = BatchLatencyFit(c0=0.002, c1=0.1)
    for _ in range(10):
        fit.update(4, 0.001, 1e-6)
    assert fit.margin(4) >= -fit.c0
