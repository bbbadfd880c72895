from itertools import combinations
from math import factorial

import numpy as np
import pytest

from adaserve.planner.orloj.order_stats import (
    Mixture,
    cdf_at_edges,
    expected_max_identical,
    expected_max_mixed,
    max_masses,
)


def _hist(rng: np.random.Generator, peaks: list[float], n: int = 20000, bins: int = 24) -> tuple[np.ndarray, np.ndarray]:
    x = np.concatenate([rng.normal(p, 0.01, n // len(peaks)) for p in peaks])
    counts, edges = np.histogram(x, bins=bins)
    return edges, counts / counts.sum()


def _monte_carlo(rng: np.random.Generator, edges: np.ndarray, mass: np.ndarray, k: int, n: int = 200_000) -> np.ndarray:
    """Draws from the histogram read as piecewise uniform, as the estimator reads it."""
    b = rng.choice(mass.size, size=(n, k), p=mass)
    return edges[b] + rng.random((n, k)) * np.diff(edges)[b]


@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_identical_matches_monte_carlo(k: int) -> None:
    rng = np.random.default_rng(1)
    edges, mass = _hist(rng, [0.04, 0.10])
    mc = _monte_carlo(rng, edges, mass, k).max(axis=1).mean()
    assert expected_max_identical(edges, mass, k) == pytest.approx(mc, abs=6e-4)


def test_mixed_matches_monte_carlo() -> None:
    rng = np.random.default_rng(2)
    edges = np.linspace(0.0, 0.2, 41)
    short = np.histogram(rng.normal(0.04, 0.01, 20000), bins=edges)[0].astype(float)
    long = np.histogram(rng.normal(0.12, 0.02, 20000), bins=edges)[0].astype(float)
    short, long = short / short.sum(), long / long.sum()
    draws = np.concatenate([_monte_carlo(rng, edges, short, 3), _monte_carlo(rng, edges, long, 2)], axis=1)
    assert expected_max_mixed(edges, [short, long], [3, 2]) == pytest.approx(draws.max(axis=1).mean(), abs=6e-4)


def test_mixed_with_one_histogram_is_the_identical_case() -> None:
    rng = np.random.default_rng(3)
    edges, mass = _hist(rng, [0.05, 0.07, 0.15])
    for k in (1, 3, 8):
        assert expected_max_mixed(edges, [mass], [k]) == pytest.approx(expected_max_identical(edges, mass, k), rel=1e-12)


def test_product_of_cdfs_equals_the_papers_subset_formula() -> None:
    """Eq. (8) integrated to a CDF: F_(k) = sum_kappa (-1)^(k-kappa) kappa^k / k! sum_{|s|=kappa} F_s^k."""
    rng = np.random.default_rng(4)
    edges = np.linspace(0.0, 1.0, 11)
    masses = rng.random((4, 10))
    masses /= masses.sum(axis=1, keepdims=True)
    f = cdf_at_edges(masses)  # (4, 11)
    k = 4
    subset_form = np.zeros(11)
    for kappa in range(1, k + 1):
        for s in combinations(range(k), kappa):
            fs = f[list(s)].mean(axis=0)
            subset_form += (-1) ** (k - kappa) * kappa**k / factorial(k) * fs**k
    product = np.prod(f, axis=0)
    np.testing.assert_allclose(subset_form, product, atol=1e-12)
    np.testing.assert_allclose(max_masses(edges, masses, [1, 1, 1, 1]), np.diff(product), atol=1e-12)


def test_max_masses_sum_to_one_and_shift_right() -> None:
    rng = np.random.default_rng(5)
    edges, mass = _hist(rng, [0.04, 0.10])
    m8 = max_masses(edges, [mass], [8])
    assert m8.sum() == pytest.approx(1.0)
    mids = (edges[:-1] + edges[1:]) / 2
    assert m8 @ mids > mass @ mids


def test_static_histogram_gives_its_value() -> None:
    edges = np.array([0.0695, 0.0705])
    assert expected_max_identical(edges, np.array([1.0]), 16) == pytest.approx(0.0705, abs=1e-4)


@pytest.mark.parametrize(("edges", "mass"), [
    ([0.1], []), ([0.2, 0.1], [1.0]), ([0.0, 0.1], [-1.0]), ([0.0, 0.1, 0.2], [1.0]), ([0.0, 0.1], [0.0]),
])
def test_bad_histograms_are_refused(edges: list[float], mass: list[float]) -> None:
    with pytest.raises(ValueError):
        expected_max_identical(np.array(edges), np.array(mass), 2)


def test_bad_counts_are_refused() -> None:
    edges, mass = np.array([0.0, 0.1, 0.2]), np.array([0.5, 0.5])
    with pytest.raises(ValueError):
        expected_max_mixed(edges, [mass, mass], [1])
    with pytest.raises(ValueError):
        expected_max_mixed(edges, [mass], [0])
    with pytest.raises(ValueError):
        expected_max_identical(edges, mass, 0)


def test_a_mixture_prepared_once_answers_for_every_count() -> None:
    rng = np.random.default_rng(3)
    edges = np.linspace(0.001, 0.004, 17)
    a, b = rng.random(16), rng.random(16)
    mix = Mixture(edges, [a, b])
    fa, fb = cdf_at_edges(a), cdf_at_edges(b)
    for k in (1, 2, 5, 9):
        assert np.allclose(mix.max_masses([1, k - 1]), np.diff(fa * fb ** (k - 1)), atol=1e-15)
    same = Mixture(edges, [a, a])
    for k in (1, 3, 8):
        assert same.expected_max([1, k - 1]) == pytest.approx(expected_max_identical(edges, a, k), rel=1e-12)
    with pytest.raises(ValueError):
        mix.expected_max([1, 2, 3])
    with pytest.raises(ValueError):
        mix.max_masses([0, 0])
