"""``adaserve bench gpu``: every served variant on the CPU, on the GPU, and on the GPU through IO binding.

Per (model, variant, batch size): p50 ms of a runner call on each device (a worker's whole
``run``: input checks, the session, softmax), the GPU's speed-up over the CPU, IO binding's over
plain ``session.run``, the largest difference of the GPU's output from the CPU's, and the GPU's
energy per request. On a host without a usable GPU only the CPU column is filled and ``gpu_reason``
says why, so the command runs anywhere. With ``--json``, one JSON object on the last stdout line;
the plot goes to ``<data_dir>/bench/gpu.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

DEFAULT_MODELS = "fsdd-cnn,av-digits,ee-audio,effnet-lite0,ee-lm-s"


def _targets(models: list[str], data_dir: Path, progress: Any) -> list[tuple[str, str]]:
    """The variants to measure: every one, except the fixed exits of an early-exit model (its
    ``default`` runs them as traffic does) and the middle depths of a language model."""
    from adaserve.bench.serving_split import MODEL as EFFNET
    from adaserve.bench.serving_split import ensure_built
    from adaserve.broker.errors import ModelNotFound
    from adaserve.models.registry import load_info

    say = progress.console.print
    out: list[tuple[str, str]] = []
    for m in models:
        if m == EFFNET and (reason := ensure_built(data_dir, progress, say)):
            say(f"skipping {m}: {reason}")
            continue
        try:
            info = load_info(m, data_dir)[1]
        except ModelNotFound as exc:
            say(f"skipping {m}: {exc}")
            continue
        depths = [v.name for v in info.variants if v.kind == "lm-exit" and not v.extra.get("early_exit")]
        ends = (depths[0], depths[-1]) if depths else ()
        out += [(m, v.name) for v in info.variants
                if (v.kind != "exit" or v.name == "default") and (v.kind != "lm-exit" or v.name in ends)]
    return out


def gpu(
    models: str = typer.Option(DEFAULT_MODELS, help="Comma-separated models; effnet-lite0 is built when missing."),
    batches: str = typer.Option("1,8,32", help="Comma-separated batch sizes."),
    repeats: int = typer.Option(30, min=3, max=10_000, help="Timed calls per runner and batch size."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (last stdout line)."),
) -> None:
    """CPU vs GPU vs GPU with IO binding, per variant and batch size."""
    from rich.console import Console
    from rich.progress import Progress

    from adaserve.bench.devices import energy_counter, host_figures, load_target, measure, validation_for
    from adaserve.broker import load_settings
    from adaserve.broker.errors import AdaserveError
    from adaserve.workers.runtime import gpu_unavailable

    console = Console(stderr=True)
    try:
        sizes = sorted({int(b) for b in batches.split(",") if b.strip()})
    except ValueError:
        raise typer.BadParameter(f"batch sizes must be integers, got {batches!r}", param_hint="--batches") from None
    if not sizes or sizes[0] < 1 or sizes[-1] > 256:
        raise typer.BadParameter(f"batch sizes must lie in 1..256, got {batches!r}", param_hint="--batches")
    reason = gpu_unavailable()
    energy = energy_counter() if reason is None else None
    rows: list[dict[str, Any]] = []
    try:
        settings = load_settings()
        with Progress(console=console, transient=as_json) as bar:
            targets = _targets([m.strip() for m in models.split(",") if m.strip()], settings.data_dir, bar)
            task = bar.add_task("variants", total=len(targets) * len(sizes))
            for model, variant in targets:
                target = load_target(model, variant, settings.data_dir, reason is None)
                val = validation_for(target, sizes[-1], settings.data_dir)
                for b in sizes:
                    bar.update(task, description=f"{model}/{variant} batch {b}")
                    rows.append(measure(target, val.batch(b), repeats, energy))
                    bar.advance(task)
    except AdaserveError as exc:
        console.print(f"[red]adaserve bench gpu: {exc}[/red]")
        raise typer.Exit(2) from None
    report = {"bench": "gpu", "gpu_reason": reason, "repeats": repeats, "host": host_figures(reason is None),
              "rows": rows}
    plot = settings.data_dir / "bench" / "gpu.png"
    report["plot"] = str(_plot(rows, plot)) if rows else None
    if as_json:
        typer.echo(json.dumps(report))
    else:
        _print(Console(), report)


def _print(console: Any, report: dict[str, Any]) -> None:
    from rich.table import Table

    if report["gpu_reason"]:
        console.print(f"no GPU figures: {report['gpu_reason']}")
    t = Table(title=f"p50 ms per call ({report['repeats']} calls each)")
    for col in ("model/variant", "batch", "cpu", "gpu", "gpu+iobind", "gpu speed-up", "iobind gain", "max |diff|",
                "mJ/request", "W"):
        t.add_column(col, justify="left" if col == "model/variant" else "right")

    def f(v: Any, spec: str = ".3f") -> str:
        return "-" if v is None else format(v, spec)

    for r in report["rows"]:
        t.add_row(f"{r['model']}/{r['variant']}", str(r["batch"]), f(r["cpu_p50_ms"]), f(r["gpu_p50_ms"]),
                  f(r["gpu_bound_p50_ms"]), f(r["gpu_speedup"], ".2f"), f(r["bound_speedup"], ".2f"),
                  f(r["max_abs_diff"], ".1e"), f(r["gpu_mj_per_request"], ".2f"), f(r["gpu_watts"], ".0f"))
    console.print(t)
    if report["plot"]:
        console.print(f"plot: {report['plot']}")


def _plot(rows: list[dict[str, Any]], path: Path) -> Path:
    from adaserve.bench.figures import panels, save

    names = sorted({(r["model"], r["variant"]) for r in rows})
    fig, axes = panels(len(names), size=(3.6, 3.0))
    for ax, (model, variant) in zip(axes.flat, names):
        mine = sorted((r for r in rows if (r["model"], r["variant"]) == (model, variant)), key=lambda r: r["batch"])
        for key, label in (("cpu_p50_ms", "cpu"), ("gpu_p50_ms", "gpu"), ("gpu_bound_p50_ms", "gpu + IO binding")):
            pts = [(r["batch"], r[key]) for r in mine if r[key] is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=label)
        ax.set_title(f"{model}/{variant}", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel("p50 ms per call")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    return save(fig, axes, len(names), path)


def register(bench_app: typer.Typer) -> None:
    """Add the `gpu` benchmark to `adaserve bench`."""
    bench_app.command("gpu")(gpu)
