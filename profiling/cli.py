"""`adaserve profile [MODEL]`, `adaserve profile show [MODEL]`, `adaserve profile helios` and `adaserve
profiler` (the rq worker)."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup

from adaserve.process import cli_error

if TYPE_CHECKING:
    import redis
    from rq.job import Job

    from adaserve.broker import Keys, Settings
    from adaserve.profiling.measure import MeasureConfig


class Device(str, enum.Enum):
    cpu = "cpu"
    gpu = "gpu"


class _RunByDefault(TyperGroup):
    """``adaserve profile X`` means ``adaserve profile run X`` unless X names a sub-command."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]  # typer's Context
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


profile_app = typer.Typer(
    cls=_RunByDefault, no_args_is_help=False,
    help=("Offline profiles: latency, quality, execution times. `adaserve profile [MODEL] [OPTIONS]` "
          "is short for `adaserve profile run [MODEL] [OPTIONS]`."))


def register(app: typer.Typer) -> None:
    """Add the profiler's commands to the top-level app."""
    from adaserve.profiling.nodes import nodes

    profile_app.command("nodes")(nodes)
    app.add_typer(profile_app, name="profile")
    app.command("profiler")(profiler)


@profile_app.command("helios")
def helios(
    only: Annotated[list[str] | None, typer.Option("--only", help="Model to profile (repeatable; "
                                                                   "default: every lm candidate).")] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Timed runs per figure (the median is kept).")] = 5,
    tau: Annotated[float, typer.Option(min=0.0, max=1.0, help="Confidence threshold of the exits.")] = 0.8,
    windows: Annotated[int, typer.Option(min=1, help="Held-out windows per task for exit shares.")] = 64,
    rss: Annotated[bool, typer.Option("--rss/--no-rss", help="Measure resident memory per depth "
                                                              "(a fresh process each).")] = True,
    out: Annotated[Path | None, typer.Option(help="Model folders under this dir (e.g. models/zoo); "
                                                  "default: where the model resolves.")] = None,
) -> None:
    """Measure each lm candidate's HELIOS profile per depth and write it as helios.json beside its manifest."""
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from adaserve.models.cli import LM_CANDIDATES, _data_dir
    from adaserve.models.lm.helios_profile import write_helios_profile
    from adaserve.models.manifest import read_manifest
    from adaserve.models.registry import find_model
    from adaserve.profiling.helios import measure_profile

    console = Console(stderr=True)
    data_dir = _data_dir()
    with Progress(console=console) as progress:
        for name in only or LM_CANDIDATES:
            model_dir = (out / name) if out else find_model(name, data_dir)
            info = read_manifest(model_dir)
            task = progress.add_task(f"{name}", total=None)

            def on_step(step: str, t: TaskID = task, n: str = name) -> None:
                progress.update(t, description=f"{n}: {step}")

            profile = measure_profile(model_dir, info, tau=tau, repeats=repeats, windows=windows, rss=rss,
                                      on_step=on_step)
            path = write_helios_profile(model_dir, profile)
            progress.update(task, description=f"{name}: done", total=1, completed=1)
            figures = ", ".join(f"d{d.depth} {d.tokens_per_s['1']:.0f}/{d.tokens_per_s['16']:.0f} tok/s"
                                for d in profile.depths)
            console.print(f"[green]{name}[/] -> {path}: {figures} (batch 1 / 16)")


@profile_app.command("run")
def run(
    model: str = typer.Argument("", help="Model to profile (default: every built or shipped model)."),
    device: Device = typer.Option(Device.cpu, "--device", help="Device the variants are measured on."),
    variant: list[str] = typer.Option([], "--variant", help="Only these variants (repeatable)."),
    tiny: bool = typer.Option(False, "--tiny", help="Batch sizes 1,2,4, 3 repeats, few samples: seconds."),
    batch_sizes: str = typer.Option("", "--batch-sizes", help="Comma-separated batch sizes in 1..32."),
    repeats: int = typer.Option(0, "--repeats", min=0, help="Timed runs per batch size (0: default)."),
    wait: bool = typer.Option(False, "--wait", help="Follow the jobs with progress bars until they end."),
    local: bool = typer.Option(False, "--local", help="Measure in this process instead of on rq workers."),
) -> None:
    """Enqueue one rq job per (model, variant, device); `adaserve profiler` workers run them."""
    from dataclasses import replace

    from adaserve.broker import AdaserveError, load_settings
    from adaserve.profiling.measure import MeasureConfig

    try:
        settings = load_settings()
        cfg = MeasureConfig.tiny() if tiny else MeasureConfig()
        if batch_sizes:
            cfg = replace(cfg, batch_sizes=_sizes(batch_sizes))
        if repeats:
            cfg = replace(cfg, repeats=repeats)
        targets = _targets(model, variant, settings.data_dir)
        if local:
            _run_local(settings, targets, device.value, cfg)
            return
        from adaserve.profiling.jobs import enqueue

        jobs = enqueue(settings, targets, device.value, cfg)
    except (AdaserveError, ValueError) as exc:
        raise cli_error(str(exc)) from None
    from rich.console import Console

    out = Console()
    out.print(f"enqueued {len(jobs)} profiling job(s) on rq queue "
              f"[bold]{jobs[0].origin if jobs else '-'}[/bold]; run `adaserve profiler` to serve them")
    if wait:
        _follow(settings, jobs)


def _sizes(text: str) -> tuple[int, ...]:
    from adaserve.broker.errors import InvalidArgument

    try:
        return tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise InvalidArgument(f"--batch-sizes must be comma-separated integers, got {text!r}") from None


def _targets(model: str, variants: list[str], data_dir: Path) -> list[tuple[str, str]]:
    from adaserve.profiling.run import model_info
    from adaserve.workers.runtime.loader import available_models

    models = [model] if model else available_models(data_dir)
    if not models:
        from adaserve.broker.errors import ModelNotFound

        raise ModelNotFound("no built or shipped models to profile (run `adaserve models build`)")
    targets = []
    for m in models:
        info = model_info(m, data_dir)
        names = variants or [v.name for v in info.variants]
        for name in names:
            targets.append((m, info.variant(name).name))
    return targets


def _run_local(settings: Settings, targets: list[tuple[str, str]], device: str,
               cfg: MeasureConfig) -> None:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from adaserve.profiling.run import measure_model_variant
    from adaserve.profiling.store import load_file, merge, merge_into_redis, save_file

    with Progress(console=Console(stderr=True)) as progress:
        for model, variant in targets:
            name = f"{model}/{variant}"
            task = progress.add_task(name, total=1)

            def report(done: int, total: int, stage: str, task: TaskID = task, name: str = name) -> None:
                progress.update(task, completed=done, total=total, description=f"{name}: {stage}")

            new = measure_model_variant(model, variant, device, settings.data_dir, cfg, report)
            merged = merge(load_file(settings.data_dir, model), new)
            if settings.redis_url:
                from adaserve.broker import Keys, connect

                merged = merge_into_redis(connect(settings), Keys(settings.namespace), new)
            path = save_file(settings.data_dir, merged)
    Console().print(f"profiles written under {path.parent}")


def _follow(settings: Settings, jobs: list[Job]) -> None:
    """Progress bars from each job's meta until every job has finished or failed."""
    import time

    from rich.console import Console
    from rich.progress import Progress

    from adaserve.broker import Keys, connect
    from adaserve.profiling.jobs import job_progress
    from adaserve.profiling.store import load, save_file

    err = Console(stderr=True)
    failed = []
    with Progress(console=err) as progress:
        tasks = {j.id: progress.add_task(j.description or j.id, total=1) for j in jobs}
        pending = list(jobs)
        while pending:
            for job in list(pending):
                status = job.get_status(refresh=True)
                p = job_progress(job)
                progress.update(tasks[job.id], completed=p["done"], total=max(1, p["total"]),
                                description=f"{job.description}: {status.value} {p['stage']}")
                if status.value in ("finished", "failed", "stopped", "canceled"):
                    pending.remove(job)
                    if status.value != "finished":
                        failed.append((job, job.latest_result()))
            time.sleep(0.5)
    for job, result in failed:
        err.print(f"[red]{job.description} failed:[/red] {getattr(result, 'exc_string', '') or ''}")
    conn, keys = connect(settings), Keys(settings.namespace)
    for model in sorted({j.kwargs["model"] for j in jobs}):
        stored = load(conn, keys, model)
        if stored:
            Console().print(f"{model}: profile in Redis at {keys.profile(model)}, file "
                            f"{save_file(settings.data_dir, stored)}")
    if failed:
        raise typer.Exit(1)


@profile_app.command("show")
def show(
    model: str = typer.Argument("", help="Model (default: every profiled model)."),
    as_json: bool = typer.Option(False, "--json", help="Print the profiles as JSON instead of tables."),
    plot_path: Path = typer.Option(None, "--plot",
                                   help="PNG to write (default: <data_dir>/profiles/<model|all>.png)."),
) -> None:
    """Print stored profiles (Redis first, then the data directory) and write a plot."""
    from rich.console import Console

    from adaserve.broker import AdaserveError, load_settings
    from adaserve.profiling.show import plot, tables
    from adaserve.profiling.store import load, load_file, stored_models

    try:
        settings = load_settings()
        conn, keys = _maybe_redis(settings)
        if model:
            names = [model]
        elif conn is not None and keys is not None:
            names = stored_models(conn, keys, settings.data_dir)
        else:
            names = sorted(p.stem for p in (settings.data_dir / "profiles").glob("*.json"))
        profiles = []
        for name in names:
            p = (load(conn, keys, name) if conn is not None and keys is not None else None) or load_file(settings.data_dir, name)
            if p is None:
                raise cli_error(f"no profile of {name!r} in Redis or {settings.data_dir / 'profiles'}")
            profiles.append(p)
    except AdaserveError as exc:
        raise cli_error(str(exc)) from None
    if not profiles:
        raise cli_error("no profiles stored yet (run `adaserve profile`)")
    out = Console()
    if as_json:
        out.print_json(json.dumps([p.model_dump() for p in profiles]))
    else:
        for p in profiles:
            out.print(tables(p))
    target = plot_path or settings.data_dir / "profiles" / f"{model or 'all'}.png"
    Console(stderr=True).print(f"plot written to {plot(profiles, target)}")


def _maybe_redis(settings: Settings) -> tuple[redis.Redis[bytes] | None, Keys | None]:
    if not settings.redis_url:
        return None, None
    from adaserve.broker import Keys, connect

    return connect(settings), Keys(settings.namespace)


def profiler(
    burst: bool = typer.Option(False, "--burst", help="Exit when the queue is empty."),
) -> None:
    """The rq worker of profiling jobs (needs ADASERVE_REDIS_URL); runs each job in a forked process."""
    from rich.console import Console

    from adaserve.broker import AdaserveError, Keys, load_connected_settings
    from adaserve.profiling.jobs import run_worker

    try:
        settings = load_connected_settings()
        Console(stderr=True).print(f"profiler serving rq queue {Keys(settings.namespace).rq_queue}")
        run_worker(settings, burst=burst)
    except AdaserveError as exc:
        raise cli_error(str(exc)) from None
