"""The ``adaserve bench live`` command over ``bench.live``: options, progress, JSON and plot."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import typer

from adaserve.bench import live

DEFAULT_PLOT = Path("adaserve-live-finish-rate.png")


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _floats(text: str, what: str) -> list[float]:
    try:
        out = [float(x) for x in _csv(text)]
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not out or any(x <= 0 for x in out):
        raise typer.BadParameter(f"{what} must be positive numbers, got {text!r}")
    return out


def register(bench_app: typer.Typer) -> None:
    """Add the `live` benchmark to `adaserve bench`."""

    @bench_app.command("live")
    def live_cmd(
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
        policies: str = typer.Option(",".join(live.LIVE_POLICIES), help="Columns: planner policies, comma-separated."),
        models: str = typer.Option(",".join(live.MODELS), help="Models, comma-separated."),
        loads: str = typer.Option(",".join(map(str, live.LOADS)), help="Loads as fractions of each deadline's capacity."),
        deadlines: str = typer.Option(",".join(f"{d:g}" for d in live.DEADLINES_MS), help="Deadlines in ms."),
        repeats: int = typer.Option(3, min=1, help="Runs per cell (seeds 0..repeats-1, the same for every policy)."),
        duration: float = typer.Option(5.0, "--duration", min=1.0, help="Seconds of load per run."),
        plot_path: Path = typer.Option(DEFAULT_PLOT, "--plot", help="Where to write the PNG."),
        capacity_rps: float = typer.Option(0.0, "--capacity", min=0.0, help="Requests/s the loads are fractions of, "
                                                                            "for every model and deadline (0: measure "
                                                                            "it per model and deadline)."),
        calibrations: Path | None = typer.Option(None, "--calibrations", help="Save each run's calibration here "
                                                                               "(RUN.json; the cell's run_ids name "
                                                                               "them), to replay with `adaserve sim "
                                                                               "--calibration`."),
        persist: bool = typer.Option(False, "--persist/--no-persist", help="The embedded server's AOF, as `adaserve "
                                                                           "up` runs it (off: its rewrites are noise here)."),
    ) -> None:
        """Policies on the live pipeline, per model, load and deadline, with the calibrated simulator's prediction."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from adaserve.planner.policies import POLICIES

        cols = _csv(policies)
        bad = [p for p in cols if p not in POLICIES]
        if not cols or bad:
            raise typer.BadParameter(f"unknown policy {', '.join(bad) or '(none)'}; choose from {', '.join(POLICIES)}")
        fracs, dls, names = _floats(loads, "--loads"), _floats(deadlines, "--deadlines"), _csv(models)
        err = Console(stderr=True)
        logs = Path(tempfile.mkdtemp(prefix="adaserve-bench-live-"))
        total = len(names) * (len(dls) + repeats * len(cols) * (1 + len(fracs) * len(dls)))
        cells: list[dict[str, object]] = []
        # per model and deadline: a shorter deadline caps the batches, so the pipeline sustains less
        caps: dict[str, dict[float, float]] = {}
        clamped: dict[str, dict[float, str | None]] = {}
        t0 = time.monotonic()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err) as bar:
            task = bar.add_task("live", total=total)
            for model in names:
                runs: dict[tuple[str, float, float], list[dict[str, object]]] = {}
                with live.live_stack(model, "edf", logs, persist) as stack:
                    caps[model], clamped[model] = {}, {}
                    for dl in sorted(dls, reverse=True):
                        bar.update(task, description=f"{model}: capacity at {dl:g} ms")
                        if capacity_rps:
                            caps[model][dl], clamped[model][dl] = capacity_rps, None
                        else:
                            caps[model][dl], clamped[model][dl] = live.capacity(stack, model, dl)
                        bar.advance(task)
                    for seed in range(repeats):
                        for policy in cols:
                            bar.update(task, description=f"{model} {policy}: warm-up")
                            stack.restart_planner(policy)
                            started_ms = int(time.time() * 1000)
                            live.warm_up(stack, model, 0.5 * caps[model][max(dls)] / live.REQUESTS_PER_JOB)
                            bar.advance(task)
                            for frac in fracs:
                                for dl in dls:
                                    bar.update(task, description=f"{model} {policy} {frac:g}x {dl:g} ms #{seed}")
                                    rate = frac * caps[model][dl] / live.REQUESTS_PER_JOB
                                    runs.setdefault((policy, frac, dl), []).append(
                                        live.run_cell(stack, policy, model, rate, dl, seed, duration, started_ms,
                                                      calibrations))
                                    bar.advance(task)
                for (policy, frac, dl), rs in runs.items():
                    cells.append(live.summarise(model, frac, frac * caps[model][dl] / live.REQUESTS_PER_JOB, dl, policy,
                                                rs, caps[model][dl]))
        out = {"capacity_rps": {m: {f"{dl:g}": round(c, 1) for dl, c in by.items()} for m, by in caps.items()},
               "capacity_clamped": {m: {f"{dl:g}": w for dl, w in by.items()} for m, by in clamped.items()},
               "cells": cells,
               **live.verdict(cells), "repeats": repeats, "duration_s": duration,
               "seconds": round(time.monotonic() - t0, 1)}
        path = live.plot(cells, plot_path)
        for m, by in clamped.items():
            for dl, where in by.items():
                if where is not None:
                    err.print(f"[yellow]{m}: the capacity search at {dl:g} ms ended at its {where} "
                              f"({caps[m][dl]:.0f} requests/s): the loads are fractions of that, not of the capacity[/]")
        if json_out:
            print(json.dumps(out))
            return
        for c in cells:
            err.print(f"{c['model']:>9} {c['load']:>4}x {c['deadline_ms']:>5g} ms {c['policy']:>9}: "
                      f"{c['finish_rate']:.3f} [{c['min']:.3f}, {c['max']:.3f}]  sim {c['sim_finish_rate']}")
        err.print(f"ORLOJ below the best baseline in {out['orloj_below_best_baseline']} cells; "
                  f"simulator within 0.05 in {out['sim_within_0.05']} / {out['sim_cells']}; plot {path}")
