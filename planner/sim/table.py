"""The paper's finish-rate tables, re-run in the simulator: every (workload, SLO, policy) cell.

The load of each workload is chosen once (``paper_load``, or one fraction of saturation given as
``load``) and kept for all its cells; each cell averages ``seeds`` runs, every policy seeing the
same arrivals and execution times per seed. Cells run in a process pool; results do not depend on
the pool's order. ``compare`` says, per (workload, SLO), by how much ORLOJ leads the best baseline
and how it stands against the paper, ties included: a cell where every policy finishes everything
has nothing to win, and the summary says so rather than counting it as a win.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaserve.planner.sim.experiment import Setup, paper_load, run
from adaserve.planner.sim.paper import paper_value
from adaserve.planner.sim.workloads import paper_workload

__all__ = ["SLOS", "TABLE_POLICIES", "TIE", "WORKLOADS", "Cell", "compare", "outcome", "paired", "run_table"]

WORKLOADS = ("std-0.5", "std-1", "std-2", "one-modal", "two-modal", "four-modal", "eight-modal", "static")
SLOS = (1.5, 2.0, 3.0, 4.0, 5.0)
TABLE_POLICIES = ("orloj", "clipper", "nexus", "clockwork", "fifo")
# Without per-request results, finish rates closer than this are a tie; ``ceiling`` also uses it.
TIE = 0.005
Z_5PCT = 1.96
# The paper's claim to check: ORLOJ above every baseline from this SLO multiple up.
FROM_SLO = 2.0


@dataclass(frozen=True)
class Cell:
    workload: str
    slo: float
    policy: str
    finish_rate: float
    paper: float | None
    seconds: float  # wall time the simulations of this cell took
    # Per request, met or not, over all seeds (packed bits); equal arrivals make cells of one
    # (workload, SLO) comparable request by request.
    met: tuple[bytes, ...] = field(default=(), repr=False, compare=False)

    def as_json(self) -> dict[str, object]:
        return {"workload": self.workload, "slo": self.slo, "policy": self.policy,
                "finish_rate": round(self.finish_rate, 4), "paper": self.paper}


def _one(args: tuple[str, float, str, int, int, str, float | None]) -> Cell:
    workload, slo, policy, requests, seeds, arrivals, load = args
    w = paper_workload(workload)
    rates, took, met = [], 0.0, []
    for seed in range(seeds):
        res, secs = run(Setup(w, slo, load=load, requests=requests, arrivals=arrivals, seed=seed), policy)
        rates.append(res.finish_rate)
        met.append(res.met_bits)
        took += secs
    return Cell(workload, slo, policy, sum(rates) / len(rates), paper_value(workload, slo, policy), took, tuple(met))


def run_table(workloads: Iterable[str] = WORKLOADS, slos: Iterable[float] = SLOS,
              policies: Iterable[str] = TABLE_POLICIES, *, requests: int = 4000, seeds: int = 2, arrivals: str = "trace",
              load: float | None = None, jobs: int = 2,
              progress: Callable[[Cell], None] | None = None) -> tuple[list[Cell], dict[str, float]]:
    """All cells, in (workload, slo, policy) order, and the offered load of each workload.

    ``load`` (a fraction of saturation, the same for every workload) replaces the paper's load:
    for sweeps that show how the comparison depends on it.
    """
    workloads, slos, policies = list(workloads), list(slos), list(policies)
    for name in workloads:
        paper_workload(name)  # unknown names fail before any work starts
    if load is not None and not load > 0:
        raise ValueError("load must be a positive fraction of the saturation throughput")
    loads = {name: round(load if load is not None else paper_load(paper_workload(name)), 4) for name in workloads}
    # ORLOJ cells first: they are the slow ones, so the pool ends evenly
    order = sorted(((w, s, p, requests, seeds, arrivals, load) for w in workloads for s in slos for p in policies),
                   key=lambda a: a[2] != "orloj")
    done: dict[tuple[str, float, str], Cell] = {}
    if jobs <= 1:
        for args in order:
            cell = _one(args)
            done[(cell.workload, cell.slo, cell.policy)] = cell
            if progress:
                progress(cell)
    else:
        with ProcessPoolExecutor(jobs) as pool:
            for cell in pool.map(_one, order):
                done[(cell.workload, cell.slo, cell.policy)] = cell
                if progress:
                    progress(cell)
    cells = [done[(w, s, p)] for w in workloads for s in slos for p in policies]
    return cells, loads


def _by_case(cells: list[Cell]) -> dict[tuple[str, float], dict[str, Cell]]:
    by: dict[tuple[str, float], dict[str, Cell]] = {}
    for c in cells:
        by.setdefault((c.workload, c.slo), {})[c.policy] = c
    return by


def paired(a: Cell, b: Cell) -> tuple[int, int] | None:
    """Requests only ``a`` met and requests only ``b`` met (same arrivals); None without that data."""
    if not a.met or len(a.met) != len(b.met) or any(len(x) != len(y) for x, y in zip(a.met, b.met)):
        return None
    only_a = only_b = 0
    for x, y in zip(a.met, b.met):
        u, v = np.frombuffer(x, dtype=np.uint8), np.frombuffer(y, dtype=np.uint8)
        only_a += int(np.unpackbits(u & ~v).sum())
        only_b += int(np.unpackbits(v & ~u).sum())
    return only_a, only_b


def outcome(margin: float, counts: tuple[int, int] | None = None) -> str:
    """ORLOJ against the best baseline: ``above``, ``tie`` or ``below``.

    With per-request results (``counts``: requests only ORLOJ met, requests only the baseline
    met) a difference counts when McNemar's test finds it at the 5% level; without them, when
    it is larger than ``TIE``.
    """
    if counts is not None:
        only_a, only_b = counts
        z = (abs(only_a - only_b) - 1) / math.sqrt(only_a + only_b) if only_a + only_b else 0.0
        return "tie" if z <= Z_5PCT else ("above" if only_a > only_b else "below")
    return "tie" if abs(margin) <= TIE else ("above" if margin > 0 else "below")


def compare(cells: list[Cell], *, within: float = 0.03) -> tuple[list[dict[str, object]], dict[str, Any]]:
    """The cells as JSON with ``margin`` (and ORLOJ's ``outcome``), and a summary of the claims.

    A cell's margin is its finish rate minus the best other policy's in its (workload, SLO). The
    summary counts ORLOJ's cells from ``FROM_SLO`` up as strictly above every baseline, tied
    (``ceiling`` marks ties where the best baseline already finishes >= 1 - TIE: nothing left to
    win) or below, and lists ORLOJ's cells more than ``within`` under the paper's ORLOJ.
    """
    by = _by_case(cells)
    rows: list[dict[str, object]] = []
    counts = {"above": 0, "tie": 0, "below": 0}
    listed: dict[str, list[dict[str, object]]] = {"tie": [], "below": []}
    misses: list[dict[str, object]] = []
    compared = 0
    for c in cells:
        row = c.as_json()
        others = [o for p, o in by[(c.workload, c.slo)].items() if p != c.policy]
        best = max(others, key=lambda o: o.finish_rate) if others else None
        row["margin"] = None if best is None else round(c.finish_rate - best.finish_rate, 4)
        if c.policy == "orloj" and best is not None:
            pair = paired(c, best)
            res = outcome(c.finish_rate - best.finish_rate, pair)
            row["outcome"] = res
            if c.slo >= FROM_SLO:
                counts[res] += 1
                if res in listed:
                    listed[res].append({"workload": c.workload, "slo": c.slo, "orloj": row["finish_rate"],
                                        "best_baseline": round(best.finish_rate, 4), "policy": best.policy,
                                        "only_orloj_met": pair[0] if pair else None,
                                        "only_baseline_met": pair[1] if pair else None,
                                        "ceiling": best.finish_rate >= 1.0 - TIE})
        if c.policy == "orloj" and c.paper is not None:
            compared += 1
            if c.finish_rate < c.paper - within:
                misses.append({"workload": c.workload, "slo": c.slo, "orloj": row["finish_rate"], "paper": c.paper,
                               "short_by": round(c.paper - c.finish_rate, 4)})
        rows.append(row)
    summary: dict[str, Any] = {
        "test": "McNemar, paired by request over all seeds, 5% level (|difference| > TIE without per-request data)",
        "tie_within": TIE,
        "orloj_vs_baselines": {"from_slo": FROM_SLO, **counts, "ties": listed["tie"], "below_cells": listed["below"]},
        "orloj_vs_paper": {"within": within, "cells": compared, "met": compared - len(misses), "misses": misses},
    }
    return rows, summary
