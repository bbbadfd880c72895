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


@models_app.command("profile-nodes")
def profile_nodes_cmd(
    name: Annotated[str, typer.Argument(help="A splittable model (effnet-lite0, ee-lm-s-split).")],
    batch: Annotated[int, typer.Option(min=1, max=256, help="Batch size of the profiled runs.")] = 8,
    runs: Annotated[int, typer.Option(min=1, max=1000, help="Profiled runs (the median per unit is kept).")] = 20,
    device: Annotated[str, typer.Option(help="cpu or gpu (onnxruntime's CUDA provider).")] = "cpu",
    record: Annotated[bool, typer.Option("--record", help="Overwrite the times the build reads (in the source tree).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the node_times.json document.")] = False,
) -> None:
    """Per-unit times from onnxruntime's profiler and the cut the split rule picks on them."""
    import tempfile

    from adaserve.models.chain import crossing_bytes, export
    from adaserve.models.node_times import SOURCES, chain_of, profile_units, source_path
    from adaserve.models.node_times import record as make_record

    if name not in SOURCES:
        raise typer.BadParameter(f"{name!r} is not splittable (splittable: {', '.join(SOURCES)})", param_hint="NAME")
    if device not in ("cpu", "gpu"):
        raise typer.BadParameter("cpu or gpu", param_hint="--device")
    import torch

    net, names, feed, in_name, out_name = chain_of(name)
    x = feed(batch)
    crossing = crossing_bytes(net, torch.from_numpy(x[:2]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "units.onnx"
        export(net, torch.from_numpy(x[:2]), path, in_name, out_name)
        prof = profile_units(path, {in_name: x}, len(names), runs=runs, device=device)
    doc = make_record(name, names, prof, crossing, batch, device)
    if record:
        source_path(name).write_text(json.dumps(doc, indent=1) + "\n")
    if as_json:
        typer.echo(json.dumps(doc))
        return
    s = doc["split"]
    typer.echo(f"{name} on {doc['provider']} (batch {batch}, {doc['runs']} runs): cut after {s['after']} "
               f"(part 2 = {s['tail_share']:.1%} of the time, {s['crossing_bytes']} bytes per sample cross, "
               f"{'in' if s['in_band'] else 'outside'} the 5-15 % band)")


def register(app: typer.Typer) -> None:
    """Add this package's commands (and sub-command groups) to the top-level app."""
    app.add_typer(models_app, name="models")
