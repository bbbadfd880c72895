"""The MOSEL evaluation workload (Sec. 7.1): jobs of normally distributed size, accuracy floors
drawn within the model's range, deadlines, and bursty arrivals replayed from a real trace.

The paper replays a Twitter trace; we replay the Azure LLM inference trace kept with the project
(one hour of a production service, CC BY 4.0, Patel et al., ISCA 2024): its inter-arrival gaps,
scaled to the offered rate, keep its bursts and its slow swings of rate (191 to 507 arrivals a
minute over the hour).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .costs import SubsetCosts
from .queue import QueuedJob


def arrival_times(gaps_s: np.ndarray | None, rate: float, n_jobs: int, seed: int) -> np.ndarray:
    """``n_jobs`` arrival times at mean ``rate``: the trace's gaps replayed from a seed-chosen
    offset (``adaserve.workload.arrivals.replay``), or a Poisson process without a trace."""
    from adaserve.workload.arrivals import poisson, replay

    duration = n_jobs / rate
    if gaps_s is None:
        times = poisson(rate, duration * 1.5 + 1.0, seed=seed)
    else:
        start = int(np.random.default_rng(seed).integers(0, len(gaps_s)))
        times = replay(gaps_s, rate, duration * 1.5 + 1.0, start=start)
    if times.size < n_jobs:
        raise ValueError("the arrival process produced fewer arrivals than jobs asked for")
    return times[:n_jobs]


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Job sizes ~ Normal(``size_mean``, ``size_std``) rounded and clipped to 1..``max_size``;
    floors ~ Uniform over the model's accuracy range; deadline = arrival + ``slo_mult`` x the
    job's latency alone at its most accurate strategy (so big jobs get proportionally longer)."""

    size_mean: float = 16.0
    size_std: float = 6.0
    max_size: int = 32
    slo_mult: float = 10.0


def size_distribution(spec: WorkloadSpec) -> np.ndarray:
    """P(size = n) for n = 1..max_size: the rounded, clipped normal (for exact expectations)."""
    from scipy.stats import norm

    edges = np.arange(0.5, spec.max_size + 1.5)
    cdf = norm.cdf(edges, spec.size_mean, spec.size_std)
    p = np.diff(cdf)
    p[0] += cdf[0]
    p[-1] += 1.0 - cdf[-1]
    probs: np.ndarray = p
    return probs


def make_jobs(costs: SubsetCosts, spec: WorkloadSpec, arrivals: np.ndarray, seed: int) -> list[QueuedJob]:
    """Jobs for the given arrival times; ``costs`` are the true ones (deadlines do not move with
    the planner's estimate of them)."""
    rng = np.random.default_rng(seed + 1)
    sizes = np.clip(np.rint(rng.normal(spec.size_mean, spec.size_std, arrivals.size)), 1, spec.max_size)
    floors = rng.uniform(costs.min_accuracy, costs.max_accuracy, arrivals.size)
    best = costs.richest
    jobs = []
    for k, (t, n, f) in enumerate(zip(arrivals, sizes.astype(int), floors)):
        counts = tuple(int(n) if m == best else 0 for m in range(len(costs.subsets)))
        alone = costs.strategy(counts).latency_s
        jobs.append(QueuedJob(f"j{k}", int(n), float(f), float(t), float(t) + spec.slo_mult * alone))
    return jobs
