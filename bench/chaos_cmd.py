"""The ``adaserve bench chaos`` command: each scenario on a fresh stack, a progress bar, a table or
one JSON object."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import typer

from adaserve.bench import chaos, chaos_faults


def register(bench_app: typer.Typer) -> None:
    """Add the `chaos` benchmark to `adaserve bench`."""

    @bench_app.command("chaos")
    def chaos_cmd(
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
        only: str = typer.Option("", help="Scenarios, comma-separated (default: all): "
                                          + ", ".join(s.name for s in chaos_faults.SCENARIOS)),
        rate: float = typer.Option(40.0, min=1.0, help="Jobs per second (4 fsdd-cnn requests each)."),
        before: float = typer.Option(3.0, min=0.5, help="Seconds of load before the fault."),
        after: float = typer.Option(8.0, min=1.0, help="Seconds of load after the fault ended."),
        surge_seconds: float = typer.Option(20.0, min=1.0, help="How long the overload scenario's surge lasts."),
    ) -> None:
        """Faults under load (broker restarts, killed and frozen workers and planners): requests
        submitted, lost and duplicated, and the time to recover, per scenario."""
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.table import Table

        names = [x.strip() for x in only.split(",") if x.strip()] or [s.name for s in chaos_faults.SCENARIOS]
        try:
            picked = [chaos_faults.scenario(n) for n in names]
        except KeyError as exc:
            raise typer.BadParameter(f"unknown scenario {exc}; choose from "
                                     f"{', '.join(s.name for s in chaos_faults.SCENARIOS)}") from None
        picked = [chaos_faults.with_surge(sc, surge_seconds) for sc in picked]
        err = Console(stderr=True)
        root = Path(tempfile.mkdtemp(prefix="adaserve-bench-chaos-"))
        outcomes: list[chaos.Outcome] = []
        with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err,
                      transient=json_out) as bar:
            task = bar.add_task("chaos", total=len(picked) * (before + after + 10.0))
            for sc in picked:
                bar.update(task, description=f"{sc.name}: starting")
                with chaos.chaos_stack(root / sc.name, **sc.stack) as stack:  # type: ignore[arg-type]
                    stack.wait_ready(120)
                    bar.update(task, description=sc.name)
                    outcomes.append(chaos.run(stack, sc.name, sc.fault, rate=rate, before_s=before, after_s=after,
                                              tick=lambda s: bar.advance(task, s), deadline_ms=sc.deadline_ms))
                bar.advance(task, before + 10.0)
        if json_out:
            typer.echo(json.dumps({"scenarios": [o.model_dump() for o in outcomes], "rate": rate,
                                   "logs": str(root)}))
            return
        table = Table(title=f"bench chaos: {rate:g} jobs/s x 4 requests (logs in {root})")
        for col in ("scenario", "submitted", "completed", "lost", "dup", "first result s", "backlog s", "worst job s",
                    "alive", "redis MB"):
            table.add_column(col, justify="left" if col == "scenario" else "right")
        for o in outcomes:
            table.add_row(o.scenario, str(o.submitted), str(o.completed), str(o.unfinished), str(o.duplicated),
                          _s(o.first_result_s), _s(o.backlog_s), _s(o.worst_job_s),
                          "yes" if o.alive else "NO", f"{o.peak_redis_mb:.0f}")
        Console().print(table)


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
