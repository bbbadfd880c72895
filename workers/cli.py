"""Commands of adaserve.workers, added to the `adaserve` CLI by `register`."""

from __future__ import annotations

import typer

from adaserve.workers.config import DEFAULT_RERUN_BUDGET, DEFAULT_SLOTS


def register(app: typer.Typer) -> None:
    """Add this package's commands (and sub-command groups) to the top-level app."""
    app.command("worker")(worker)


def worker(
    pool: str = typer.Option("cpu", "--pool", help="Pool to serve: its batch stream and consumer group (cpu, gpu, or "
                                                   "any name, e.g. a second CPU pool for split placement)."),
    device: str = typer.Option("", "--device", help="cpu or gpu (default: gpu for pools named gpu*, else cpu)."),
    slots: int = typer.Option(DEFAULT_SLOTS, "--slots", min=1, help="Batches held at once (one running, the rest "
                                                                    "prefetched while the planner sends the next)."),
    models: str = typer.Option("", "--models", help="Comma-separated models to preload and advertise (default: every "
                                                    "built model)."),
    threads: int = typer.Option(0, "--threads", min=0, help="Intra-op threads per ONNX session (0: the CPUs this process "
                                                            "may use, capped by a container's CPU limit)."),
    name: str = typer.Option("", "--name", help="Worker id and consumer name (default: pool-host-pid-random)."),
    io_binding: bool = typer.Option(False, "--io-binding/--no-io-binding", help="GPU: run ONNX sessions through IO "
                                                                                "binding with kept device buffers (off: "
                                                                                "slower for small models, see `adaserve "
                                                                                "bench gpu`)."),
    memory_mb: int = typer.Option(0, "--memory-mb", min=0, help="Memory budget in MiB for model weights and KV cache, "
                                                                 "advertised to planners (HELIOS sizes batches by it; "
                                                                 "0: ADASERVE_WORKER_MEMORY_MB, else none)."),
    rerun_budget: float = typer.Option(DEFAULT_RERUN_BUDGET, "--rerun-budget", min=0.0, max=0.5,
                                       help="Share of the worker's time spent, while it has no batch, re-running "
                                            "served requests alone for ORLOJ's per-application execution times "
                                            "(0: off)."),
    log_level: str = typer.Option("INFO", "--log-level", help="Logging level."),
) -> None:
    """Serve batches of one pool until SIGTERM or Ctrl-C, then finish the batches in hand and exit."""
    import redis
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    from adaserve.broker import AdaserveError, Settings, load_settings
    from adaserve.broker.heap import keep_freed_memory
    from adaserve.process import settle_heap, setup_logging, stop_on_signals
    from adaserve.workers.config import WorkerConfig
    from adaserve.workers.service import Worker

    err = Console(stderr=True)
    setup_logging(log_level, rich=True)
    stop = stop_on_signals(
        on_first=lambda name: err.print(f"[yellow]{name}: finishing the batches in hand[/yellow]"),
        on_second=lambda: err.print("[red]second signal: leaving at once; batches in hand will be reclaimed[/red]"),
    )
    settings: Settings | None = None
    try:
        settings = load_settings()
        keep_freed_memory(settings.heap_keep_mb)
        config = WorkerConfig(
            pool=pool, device=device or None, slots=slots, threads=threads or None, name=name or None,
            io_binding=io_binding, memory_mb=memory_mb or settings.worker_memory_mb, rerun_budget=rerun_budget,
            models=tuple(m.strip() for m in models.split(",") if m.strip()) or None,
        )
        w = Worker(settings, config)
        with Progress(TextColumn("loading models"), BarColumn(), TextColumn("{task.completed}/{task.total} {task.description}"),
                      console=err, transient=True) as progress:
            task = progress.add_task("", total=None)

            def on_load(model: str, i: int, n: int) -> None:
                progress.update(task, completed=i, total=max(n, 1), description=model)

            w.start(on_load, stop=stop)
        settle_heap()  # the models are loaded: what the serving loop keeps for good
        w.run(stop)  # also when a signal came during start: it then only says goodbye
    except AdaserveError as exc:
        err.print(f"[red]adaserve worker: {exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        from adaserve.broker.connection import shown_url

        where = shown_url(settings.redis_url) if settings is not None else "?"
        err.print(f"[red]adaserve worker: cannot reach the server at {where}: {exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None
