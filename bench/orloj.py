"""`adaserve bench orloj`: the ORLOJ paper's finish-rate tables (appendix A), re-run in the simulator.

For each workload (the paper's case IDs) and SLO multiple of the P99 time alone, every policy's
finish rate next to the paper's value (null where the paper has none: FIFO), its ``margin`` over
the best other policy, and a ``summary`` of where ORLOJ is strictly above every baseline, tied
(nothing to win when everyone finishes everything) or below, and where it misses the paper's
ORLOJ. One JSON object on stdout with ``--json``; a PNG plot of the same numbers with the paper's
values dotted; a progress bar on stderr.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

DEFAULT_PLOT = Path("adaserve-orloj-finish-rate.png")


def plot(cells: list[dict[str, object]], loads: dict[str, float], path: Path) -> Path:
    """Finish rate against SLO, one panel per workload; the paper's values dotted, same colours."""
    from adaserve.bench.figures import panels, save

    workloads = list(dict.fromkeys(str(c["workload"]) for c in cells))
    policies = list(dict.fromkeys(str(c["policy"]) for c in cells))
    colours = {p: f"C{i}" for i, p in enumerate(policies)}
    fig, axes = panels(len(workloads), sharey=True)
    for ax, w in zip(axes.flat, workloads):
        mine = [c for c in cells if c["workload"] == w]
        for p in policies:
            pts = [(float(c["slo"]), float(c["finish_rate"])) for c in mine if c["policy"] == p]  # type: ignore[arg-type]
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", color=colours[p], label=p)
            ref = [(float(c["slo"]), float(c["paper"])) for c in mine  # type: ignore[arg-type]
                   if c["policy"] == p and c["paper"] is not None]
            if ref:
                ax.plot([x for x, _ in ref], [y for _, y in ref], ":", marker=".", color=colours[p], alpha=0.6,
                        label=f"{p} (paper)")
        ties = sum(1 for c in mine if c["policy"] == "orloj" and c.get("outcome") == "tie")
        ax.set_title(f"{w} (load {loads.get(w, float('nan')):.2f}, {ties} tie{'s' if ties != 1 else ''})")
        ax.set_xlabel("SLO (x P99 alone)")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("finish rate")
    axes[0][0].legend(fontsize=6, ncol=2)
    return save(fig, axes, len(workloads), path)


def register(bench_app: typer.Typer) -> None:
    """Add the `orloj` benchmark to `adaserve bench`."""

    @bench_app.command("orloj")
    def orloj_cmd(
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
        requests: int = typer.Option(4000, min=100, help="Requests per simulated run."),
        seeds: int = typer.Option(8, min=1, help="Runs per cell (different arrivals and execution times); 8 give "
                                                 "McNemar the power to separate leads of 0.2 points."),
        jobs: int = typer.Option(2, min=1, help="Worker processes."),
        arrivals: str = typer.Option("trace", help="Arrival pattern: trace (Azure, scaled), poisson, constant, bursty."),
        workloads: str = typer.Option("", help="Comma-separated case IDs (default: all of the table)."),
        load: float | None = typer.Option(None, min=0.01, help="Arrival rate / saturation for every workload "
                                          "(default: the paper's method, one trace at 1 / E[time alone])."),
        policies: str = typer.Option("", help="Comma-separated policies (default: orloj,clipper,nexus,clockwork,fifo)."),
        plot_path: Path = typer.Option(DEFAULT_PLOT, "--plot", help="Where to write the PNG plot."),
    ) -> None:
        """Finish rate of ORLOJ and the baselines per workload and SLO, against the paper's tables."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.table import Table

        from adaserve.planner.sim.table import SLOS, TABLE_POLICIES, WORKLOADS, compare, run_table

        wl = [w for w in workloads.split(",") if w] or list(WORKLOADS)
        pols = [p for p in policies.split(",") if p] or list(TABLE_POLICIES)
        err = Console(stderr=True)
        start = time.perf_counter()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, transient=json_out) as bar:
            task = bar.add_task("simulating cells", total=len(wl) * len(SLOS) * len(pols))

            def tick(cell: object) -> None:
                bar.update(task, advance=1, description=f"{cell.workload} {cell.slo}x {cell.policy}")  # type: ignore[attr-defined]

            try:
                cells, loads = run_table(wl, SLOS, pols, requests=requests, seeds=seeds, arrivals=arrivals,
                                         load=load, jobs=jobs, progress=tick)
            except ValueError as exc:
                raise typer.BadParameter(str(exc)) from exc
        rows, summary = compare(cells)
        png = plot(rows, loads, plot_path)
        err.print(f"plot: {png.resolve()}  ({time.perf_counter() - start:.0f} s)")
        if json_out:
            typer.echo(json.dumps({"cells": rows, "offered_load": loads, "summary": summary}))
            return
        by = {(c.workload, c.slo, c.policy): c for c in cells}
        for w in wl:
            table = Table(title=f"{w}: finish rate (paper) at load {loads[w]:.2f}")
            table.add_column("policy")
            for s in SLOS:
                table.add_column(f"{s:g}x", justify="right")
            for p in pols:
                vals = [by[(w, s, p)] for s in SLOS]
                table.add_row(p, *(f"{c.finish_rate:.2f}" + (f" ({c.paper:.2f})" if c.paper is not None else "") for c in vals))
            Console().print(table)
        vb, vp = summary["orloj_vs_baselines"], summary["orloj_vs_paper"]
        Console().print(f"ORLOJ vs the best baseline from {vb['from_slo']:g}x P99: {vb['above']} above, {vb['tie']} tied "
                        f"({sum(1 for t in vb['ties'] if t['ceiling'])} at the ceiling: nothing to win), {vb['below']} below; "
                        f"vs the paper's ORLOJ: {vp['met']}/{vp['cells']} within {vp['within']:g}")
