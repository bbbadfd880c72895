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
