"""The paper's finish-rate tables, re-run in the simulator: every (workload, SLO, policy) cell.

The load of each workload is chosen once (``paper_load``) and kept for all its cells; each cell
averages ``seeds`` runs, every policy seeing the same arrivals and execution times per seed.
Cells run in a process pool; results do not depend on the pool's order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from adaserve.planner.sim.experiment import Setup, paper_load, run
from adaserve.planner.sim.paper import paper_value
from adaserve.planner.sim.workloads import paper_workload

__all__ = ["POLICIES", "SLOS", "WORKLOADS", "Cell", "run_table"]

WORKLOADS = ("std-0.5", "std-1", "std-2", "one-modal", "two-modal", "four-modal", "eight-modal", "static")
SLOS = (1.5, 2.0, 3.0, 4.0, 5.0)
POLICIES = ("orloj", "clipper", "nexus", "clockwork", "fifo")


@dataclass(frozen=True)
class Cell:
    workload: str
    slo: float
    policy: str
    finish_rate: float
    paper: float | None
    seconds: float  # wall time the simulations of this cell took

    def as_json(self) -> dict[str, object]:
        return {"workload": self.workload, "slo": self.slo, "policy": self.policy,
                "finish_rate": round(self.finish_rate, 4), "paper": self.paper}


def _one(args: tuple[str, float, str, int, int, str]) -> Cell:
    workload, slo, policy, requests, seeds, arrivals = args
    w = paper_workload(workload)
    rates, took = [], 0.0
    for seed in range(seeds):
        res, secs = run(Setup(w, slo, requests=requests, arrivals=arrivals, seed=seed), policy)
        rates.append(res.finish_rate)
        took += secs
    return Cell(workload, slo, policy, sum(rates) / len(rates), paper_value(workload, slo, policy), took)


def run_table(workloads: Iterable[str] = WORKLOADS, slos: Iterable[float] = SLOS,
              policies: Iterable[str] = POLICIES, *, requests: int = 4000, seeds: int = 2, arrivals: str = "trace",
              jobs: int = 2, progress: Callable[[Cell], None] | None = None) -> tuple[list[Cell], dict[str, float]]:
    """All cells, in (workload, slo, policy) order, and the offered load of each workload."""
    workloads, slos, policies = list(workloads), list(slos), list(policies)
    for name in workloads:
        paper_workload(name)  # unknown names fail before any work starts
    loads = {name: round(paper_load(paper_workload(name)), 4) for name in workloads}
    # ORLOJ cells first: they are the slow ones, so the pool ends evenly
    order = sorted(((w, s, p, requests, seeds, arrivals) for w in workloads for s in slos for p in policies),
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
