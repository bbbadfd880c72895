"""``adaserve up`` and ``adaserve demo``: the whole pipeline on this machine."""

from __future__ import annotations

import json
import time

import typer
from rich.console import Console

err = Console(stderr=True)


def up(
    workers: int = typer.Option(1, "--workers", "-w", min=0, help="CPU workers to start."),
    gpu: bool | None = typer.Option(None, "--gpu/--no-gpu", help="Start a GPU worker (default: when a GPU is visible)."),
    policy: str = typer.Option("edf", help="Planner policy."),
    slots: int = typer.Option(2, min=1, help="Batches each worker accepts at once."),
) -> None:
    """Start the pipeline (embedded server unless ADASERVE_REDIS_URL is set) until Ctrl-C or SIGTERM."""
    from adaserve.broker import load_settings
    from adaserve.runtime import stop_on_signals
    from adaserve.stack import Stack

    settings = load_settings()
    stop = stop_on_signals()
    stack = Stack(settings, cpu_workers=workers, gpu_worker=gpu, policy=policy, slots=slots)
    with stack:
        _announce(stack)
        stack.wait_ready()
        err.print(f"[green]ready[/]: {workers} CPU worker(s); Ctrl-C stops everything")
        while not stop.is_set():
            stack.check()
            stop.wait(0.5)
        err.print("stopping…")


def _announce(stack: object) -> None:
    from adaserve.stack import Stack

    assert isinstance(stack, Stack)
    url = stack.settings.redis_url
    if stack.embedded:
        err.print(f"[yellow]embedded server[/] at {url} (data in {stack.settings.data_dir / 'server'}, AOF on). "
                  "It is for one machine: set ADASERVE_REDIS_URL to use a real Redis or Valkey.")
    err.print(f"telemetry: ADASERVE_REDIS_URL={url} adaserve tail   logs: {stack.log_dir}")


def register(app: typer.Typer) -> None:
    app.command("up")(up)
