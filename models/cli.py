"""``adaserve models build`` and ``adaserve models list``; also hooks in the profiler's commands.

torch and the builders are imported inside the commands so that ``adaserve --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

models_app = typer.Typer(help="Build and list the model zoo.", no_args_is_help=True)


def _data_dir() -> Path:
    """The data directory from the settings loader, so that a bad ``ADASERVE_*`` variable is one
    line on stderr (exit code 2) rather than pydantic's traceback."""
    from adaserve.broker.errors import ConfigError
    from adaserve.broker.settings import load_settings
    from adaserve.process import cli_error

    try:
        return load_settings().data_dir
    except ConfigError as exc:
        raise cli_error(exc) from None


@models_app.command("build")
def build_cmd(
    only: Annotated[list[str] | None, typer.Option("--only", help="Model to build (repeatable).")] = None,
    tiny: Annotated[bool, typer.Option("--tiny", help="Few epochs on a data subset (CI).")] = False,
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Write <out>/<name>/ instead of the data dir "
                                                     "(e.g. models/zoo to refresh the shipped copies).")] = None,
) -> None:
    """Train and export models (all of them unless --only), with a manifest each."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from adaserve.broker.errors import ModelNotFound
    from adaserve.models.registry import build_model, built_dir, model_names

    console = Console(stderr=True)
    names = only or model_names()
    unknown = [n for n in names if n not in model_names()]
    if unknown:
        raise typer.BadParameter(f"unknown model(s) {unknown}; known: {model_names()}",
                                 param_hint="--only")
    data_dir = _data_dir()
    failed: list[str] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        overall = progress.add_task("models", total=len(names))
        for name in names:
            target = (out / name) if out else built_dir(name, data_dir)
            try:
                info = build_model(name, target, tiny=tiny, seed=seed, progress=progress)
            except ModelNotFound as exc:
                console.print(f"[red]{name}: {exc}")
                failed.append(name)
            else:
                figures = ", ".join(f"{v.name} {v.metric}={v.quality:.4f}" for v in info.variants
                                    if v.quality is not None)
                console.print(f"[green]{name}[/] -> {target} in "
                              f"{info.train.get('build_seconds', 0):.1f} s: {figures}")
            progress.advance(overall)
    if failed:
        raise typer.Exit(1)


def variant_rows(data_dir: Path) -> list[dict[str, Any]]:
    """One dict per variant of every resolvable model, as ``models list --json`` lists them under ``variants``."""
    from adaserve.models.registry import list_models, zoo_dir

    rows = []
    for model_dir, info in list_models(data_dir):
        for v in info.variants:
            rows.append({
                "name": info.name, "variant": v.name, "family": info.family, "kind": v.kind,
                "default": v.name == info.default_variant,
                "artifacts": [str(model_dir / a) for a in v.artifacts],
                "inputs": {k: {"shape": list(s.shape), "dtype": s.dtype} for k, s in v.inputs.items()},
                "metric": v.metric, "quality": v.quality, "extra": v.extra,
                "origin": "shipped" if model_dir.parent == zoo_dir() else "built",
                "tiny": bool(info.train.get("tiny", False)),
            })
    return rows


@models_app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help='One JSON object: {"variants": [...]}.')] = False,
) -> None:
    """Every built or shipped model variant with its kind, artifacts and quality."""
    rows = variant_rows(_data_dir())
    if as_json:
        typer.echo(json.dumps({"variants": rows}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("model", "variant", "family", "kind", "metric", "quality", "origin")
    for row in rows:
        quality = "" if row["quality"] is None else f"{row['quality']:.4f}"
        name = row["variant"] + (" *" if row["default"] else "")
        table.add_row(row["name"], name, row["family"], row["kind"], row["metric"] or "",
                      quality, row["origin"] + (" (tiny)" if row["tiny"] else ""))
    Console().print(table)


LM_CANDIDATES = ("ee-lm-xs", "ee-lm-s", "ee-lm-code")


@models_app.command("helios-show")
def helios_show_cmd(
    names: Annotated[list[str] | None, typer.Argument(help="Models (default: every lm candidate).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help='One JSON object: {"profiles": [...]}.')] = False,
    plot: Annotated[Path | None, typer.Option(help="Also write a PNG of every profile side by side.")] = None,
) -> None:
    """The HELIOS profile of each lm candidate: speed, memory and quality per depth and task."""
    from rich.console import Console

    from adaserve.broker.errors import ModelNotFound
    from adaserve.models.lm import helios_report
    from adaserve.models.lm.helios_profile import load_helios_profile
    from adaserve.process import cli_error

    try:
        profiles = [load_helios_profile(n, _data_dir()) for n in names or LM_CANDIDATES]
    except ModelNotFound as exc:
        raise cli_error(exc) from None
    if plot is not None:
        helios_report.plot(profiles, plot)
    if as_json:
        typer.echo(json.dumps({"profiles": [p.model_dump(mode="json") for p in profiles]}))
        return
    console = Console(width=240)
    for p in profiles:
        console.print(helios_report.table(p))


def register(app: typer.Typer) -> None:
    """Add this package's commands (and sub-command groups) to the top-level app."""
    app.add_typer(models_app, name="models")
