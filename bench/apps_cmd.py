"""The ``adaserve bench apps`` command over ``bench.apps``: options, progress, JSON and plot."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import typer

from adaserve.bench import apps as apps_bench
from adaserve.bench.apps_losses import explain
from adaserve.bench.live_cmd import _csv

DEFAULT_PLOT = Path("adaserve-apps-finish-rate.png")


def _queues(text: str) -> list[float]:
    try:
        out = [float(x) for x in _csv(text)]
    except ValueError:
        raise typer.BadParameter(f"--queue-ms must be comma-separated numbers, got {text!r}") from None
    if not out or any(not 0.0 <= x <= 10_000.0 for x in out):
        raise typer.BadParameter(f"--queue-ms must be numbers within 0..10000 (0: every slot), got {text!r}")
    return list(dict.fromkeys(out))


def register(bench_app: typer.Typer) -> None:
    """Add the `apps` benchmark to `adaserve bench`."""

    @bench_app.command("apps")
    def apps_cmd(
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
        model: str = typer.Option(apps_bench.DEFAULT_MODEL, help="A language model every app sends to."),
        apps: str = typer.Option(apps_bench.DEFAULT_APPS, help="Apps sent at once, comma-separated "
                                                               "name:new_tokens:deadline_ms:jobs_per_s."),
        policies: str = typer.Option("orloj,edf", help="Columns: planner policies, comma-separated."),
        queue_ms: str = typer.Option("25,0", "--queue-ms", help="Rows: the planner's --queue-ms settings, "
                                                                 "comma-separated (0: every slot)."),
        repeats: int = typer.Option(3, min=1, help="Runs per cell (seeds 0..repeats-1, the same for every cell)."),
        duration: float = typer.Option(8.0, "--duration", min=1.0, help="Seconds of load per run."),
        plot_path: Path = typer.Option(DEFAULT_PLOT, "--plot", help="Where to write the PNG."),
    ) -> None:
        """Several apps of a language model at once on the live pipeline, per policy and --queue-ms."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from adaserve.broker import load_settings
        from adaserve.planner.policies import POLICIES

        cols = _csv(policies)
        bad = [p for p in cols if p not in POLICIES]
        if not cols or bad:
            raise typer.BadParameter(f"unknown policy {', '.join(bad) or '(none)'}; choose from {', '.join(POLICIES)}")
        try:
            parsed = apps_bench.parse_apps(apps)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        queues = _queues(queue_ms)
        err = Console(stderr=True)
        logs = Path(tempfile.mkdtemp(prefix="adaserve-bench-apps-"))
        t0 = time.monotonic()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err) as bar:
            task = bar.add_task("starting", total=repeats * len(queues) * len(cols))

            def tick(what: str) -> None:
                if bar.tasks[0].description != "starting":
                    bar.advance(task)
                bar.update(task, description=what)

            with apps_bench.AppsStack(load_settings(), model, cols[0], logs) as stack:
                stack.wait_ready()
                cells = apps_bench.bench(stack, parsed, cols, queues, repeats, duration, tick)
            bar.advance(task)
        out = {"model": model, "apps": [asdict(a) for a in parsed], "cells": cells,
               "orloj_minus_edf": apps_bench.paired(cells), "repeats": repeats, "duration_s": duration,
               "seconds": round(time.monotonic() - t0, 1)}
        path = apps_bench.plot(cells, plot_path)
        if json_out:
            print(json.dumps(out))
            return
        for c in cells:
            per_app = ", ".join(f"{n} {v:.3f}" for n, v in c["apps"].items())
            sim = f"  simulated {c['sim_finish_rate']:.3f}" if "sim_finish_rate" in c else ""
            err.print(f"--queue-ms {c['queue_ms']:>5g} {c['policy']:>9}: {c['finish_rate']:.3f} "
                      f"[{c['min']:.3f}, {c['max']:.3f}]  ({per_app}){sim}")
            for line in explain(c):
                err.print(f"    {line}", soft_wrap=True)
        err.print(f"plot {path}")
