"""``adaserve bench placement``: the command over ``bench/placement.py`` (table, JSON, plot)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

DEFAULT_PROFILE = Path("docs/gpu-h100.json")
COLORS = {"gpu-only": "tab:green", "cpu-only": "tab:gray", "static-split": "tab:orange", "heft": "tab:blue"}


def placement(
    profile: Path = typer.Option(DEFAULT_PROFILE, help="The measured GPU and CPU profile (a `bench gpu --json` report)."),
    seeds: int = typer.Option(3, min=1, max=20, help="Seeds (jitter) per maximum-rate search; medians reported."),
    points: int = typer.Option(12, min=3, max=40, help="Arrival rates on the sweep (0.1x to 1.3x the GPU's capacity)."),
    seconds: float = typer.Option(6.0, min=0.2, max=60.0, help="Simulated seconds of arrivals per run (a deeper "
                                                               "backlog takes longer to settle: shorter runs under-read "
                                                               "HEFT)."),
    plot: Path | None = typer.Option(None, help="Where the plot goes (default <data_dir>/bench/placement.png)."),
    live: bool = typer.Option(False, "--live/--no-live", help="Also run HEFT through the real pipeline at rising rates: "
                                                              "pools gpu and cpu on a GPU host; on a CPU host two CPU "
                                                              "pools standing for them (the path, not GPU figures)."),
    live_rates: str = typer.Option("5,20,60", help="Photos per second of the live section, comma-separated."),
    live_seconds: float = typer.Option(4.0, min=0.5, max=120.0, help="Seconds of load per live rate."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """StarONNX placement: p99 and sustained rate per policy over an arrival-rate sweep, HEFT's offload and
    prediction error, the maximum rate per policy and heft_vs_gpu_only (simulator on measured profiles)."""
    from rich.console import Console
    from rich.progress import Progress

    from adaserve.bench.placement import report
    from adaserve.bench.server import bench_settings
    from adaserve.broker import load_settings
    from adaserve.broker.errors import ConfigError

    if not profile.is_file():
        raise ConfigError(f"profile {profile} not found: run from the repository root or pass --profile "
                          "(a `adaserve bench gpu --json` report)")
    try:
        rates = tuple(float(x) for x in live_rates.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--live-rates {live_rates!r}: comma-separated numbers expected") from None
    if live and (not rates or min(rates) <= 0):
        raise ConfigError("--live-rates: positive rates expected")
    console = Console(stderr=True)
    with bench_settings() as settings, Progress(console=console, transient=True, disable=as_json) as bar:
        out = report(profile, settings, seeds=seeds, points=points, seconds=seconds, progress=bar)
        if live:
            from adaserve.bench.placement_live import live as run_live
            from adaserve.workers.runtime import gpu_unavailable

            out["live"] = run_live(settings, bar, rates=rates, seconds=live_seconds, profile=profile,
                                   gpu=gpu_unavailable() is None)
        else:
            out["live"] = {"skipped": "not asked for (--live)"}
    out["pipeline_vs_native"] = _native()
    path = plot or load_settings().data_dir / "bench" / "placement.png"
    out["plot"] = str(draw(out, path))
    if as_json:
        print(json.dumps(out, default=float))
    else:
        _print(Console(), out)


def _native() -> dict[str, Any]:
    """Fig. 3's comparison (``pipeline_vs_native``) on one GPU without splitting; on a host without
    one the pipeline's processes share the cores with the model, so the figure would say nothing
    about the GPU target: ``adaserve bench native`` gives the CPU figures on request."""
    from adaserve.bench.native import pipeline_vs_native
    from adaserve.workers.runtime import gpu_unavailable

    why = gpu_unavailable()
    if why is not None:
        return {"skipped": f"no GPU ({why}); `adaserve bench native --json` measures the CPU host"}
    return pipeline_vs_native(device="gpu").model_dump()


def draw(out: dict[str, Any], path: Path) -> Path:
    """Fig. 4 of the paper: p99 latency against the arrival rate per policy (a dot where the rate is
    sustained), then HEFT's offloaded share of GPU time and the batch size it formed."""
    from adaserve.bench.figures import panels, save

    fig, axes = panels(3, cols=3, size=(4.6, 3.6))
    lat, off, size = axes.flat[0], axes.flat[1], axes.flat[2]
    for policy, rows in out["curves"].items():
        xs = [r["rate"] for r in rows if r.get("p99_ms") is not None]
        ys = [r["p99_ms"] for r in rows if r.get("p99_ms") is not None]
        lat.plot(xs, ys, "-", color=COLORS.get(policy), label=f"{policy} (max {out['max_rate'][policy]:.0f}/s)")
        ok = [(r["rate"], r["p99_ms"]) for r in rows if r.get("sustained") and r.get("p99_ms") is not None]
        if ok:
            lat.plot(*zip(*ok), "o", color=COLORS.get(policy), ms=3)
        lat.axvline(out["max_rate"][policy], color=COLORS.get(policy), ls=":", lw=0.8)
    lat.set_yscale("log")
    lat.set(xlabel="arrival rate (requests/s)", ylabel="p99 latency (ms)",
            title=f"{out['model']}: heft / gpu-only = {out['heft_vs_gpu_only']:.3f}")
    lat.legend(fontsize=7)
    heft = [r for r in out["curves"]["heft"] if r.get("p99_ms") is not None]
    off.plot([r["rate"] for r in heft], [100 * r["offload"] for r in heft], "o-", label="GPU time offloaded")
    off.plot([r["rate"] for r in heft], [100 * r["split_share"] for r in heft], "s--", label="batches split")
    off.axhspan(5, 15, color="tab:green", alpha=0.1, label="paper's band 5-15%")
    off.set(xlabel="arrival rate (requests/s)", ylabel="%", title="heft: what moved to the CPU")
    off.legend(fontsize=7)
    for policy in ("gpu-only", "heft"):
        rows = [r for r in out["curves"][policy] if r.get("p99_ms") is not None]
        size.plot([r["rate"] for r in rows], [r["mean_batch"] for r in rows], "o-", color=COLORS[policy], label=policy)
    size.set(xlabel="arrival rate (requests/s)", ylabel="mean batch size", title="batch size for the rate (Fig. 2b)")
    size.legend(fontsize=7)
    return save(fig, axes, 3, path)


def _print(console: Any, out: dict[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=f"placement, {out['model']} ({out['where']}, {out['profile']})")
    t.add_column("rate/s", justify="right")
    for p in out["curves"]:
        t.add_column(f"{p} p99 ms", justify="right")
    for i, rate in enumerate(out["rates"]):
        cells = []
        for rows in out["curves"].values():
            r = rows[i]
            cells.append("-" if r.get("p99_ms") is None else f"{r['p99_ms']:.1f}{'' if r['sustained'] else ' x'}")
        t.add_row(f"{rate:.0f}", *cells)
    console.print(t)
    console.print("max rate: " + ", ".join(f"{p} {v:.0f}/s" for p, v in out["max_rate"].items()))
    console.print(f"heft_vs_gpu_only {out['heft_vs_gpu_only']:.3f}; GPU time offloaded at heft's max rate "
                  f"{100 * (out['offload_at_max_median'] or 0):.1f}%; prediction error median "
                  f"{out['prediction_error']['median_abs_ms']:.3f} ms")
    b = Table(title="per batch: what the GPU, the CPU and the transport cost (ms)")
    for col in ("batch", "gpu_whole_ms", "gpu_part1_ms", "gpu_saved_ms", "cpu_part2_ms", "handover_ms", "input_f32_ms",
                "max_split_share", "bound_heft_vs_gpu_only"):
        b.add_column(col.replace("_ms", ""), justify="right")
    for r in out["per_batch"]:
        b.add_row(str(r["batch"]), *(f"{r[c]:.3f}" for c in ("gpu_whole_ms", "gpu_part1_ms", "gpu_saved_ms",
                                                               "cpu_part2_ms", "handover_ms", "input_f32_ms",
                                                               "max_split_share", "bound_heft_vs_gpu_only")))
    console.print(b)
    live = out.get("live", {})
    for row in live.get("rates", []):
        console.print(f"live {row['rate']:g}/s: p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
                      f"{row['completed']}/{row['requests']} completed, placements {row['placements']}")
    if live.get("where"):
        console.print(f"live: {live['where']}")
    console.print(f"plot: {out['plot']}")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("placement")(placement)
