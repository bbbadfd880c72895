"""`adaserve bench helios`: HELIOS against static selection on a drifting prompt stream.

Measures the candidates on the real models (``helios_trace``), then replays the same stream of
prompts arriving at three loads through every policy in the simulator (``helios_sim``), with the
planner's own HELIOS controller: ``helios``, its two ablations (``helios-no-switching``,
``helios-no-partial``), ``static-<model>`` (whole model, per-token early exit at tau, batch size
one: the EE-LLM baseline) and ``fixed-<model>-d<k>`` (cut at exit k, lockstep batches). Medians of
``--seeds`` runs (different arrivals), min and max beside them. One JSON object with ``--json``;
a plot like the paper's Fig. 13.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import typer

DEFAULT_PLOT = Path("docs/helios.png")
# Load per cell: a Poisson arrival rate as a multiple of the reference capacity (the most accurate
# model served whole in memory-sized batches), or None: a closed loop with one prompt in flight,
# the next sent when the last one is answered. That is the paper's own setup (Sec. 4.3: each
# prompt's output is generated "before serving the next prompt"; Sec. 5.1: batch size 1; Table 3:
# throughput is tokens generated per second), the lightest load at which tokens/s still measures
# speed: under an open-loop rate every policy that keeps up delivers the offered rate, so a light
# open-loop cell compares nothing but who falls behind (docs/helios.md, "Loads").
LOADS: dict[str, float | None] = {"light": None, "near_saturation": 0.9, "overload": 3.0}
IN_FLIGHT = 1  # prompts outstanding in the closed-loop cell
OBJECTIVE_OF = {"perplexity": "accuracy", "energy": "energy", "ttft": "latency"}


def _policies(cands: list[Any]) -> list[str]:
    out = ["helios", "helios-no-switching", "helios-no-partial"]
    out += [f"static-{c.name}" for c in cands]
    out += [f"fixed-{c.name}-d{d}" for c in cands for d in c.depths]
    return out


def _params(policy: str, base: Any) -> Any:
    from dataclasses import replace

    if policy == "helios-no-switching":
        return replace(base, switching=False)
    if policy == "helios-no-partial":
        return replace(base, partial=False)
    return base


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure: the median over seeds, with min and max for the numeric ones."""
    out: dict[str, Any] = {"policy": runs[0]["policy"]}
    for k, v in runs[0].items():
        if k == "policy":
            continue
        if isinstance(v, (int, float)) and all(isinstance(r[k], (int, float)) for r in runs):
            vals = [float(r[k]) for r in runs]
            out[k] = statistics.median(vals)
            out[f"{k}_range"] = [min(vals), max(vals)]
        else:
            out[k] = v
    return out


def _best(rows: dict[str, dict[str, Any]], prefix: str, metric: str = "tokens_per_s",
          lower: bool = False) -> tuple[str, dict[str, Any]]:
    """The best ``prefix*`` policy on ``metric`` among those whose perplexity is within 5% of the
    most accurate of them."""
    group = {p: r for p, r in rows.items() if p.startswith(prefix)}
    known = [r["perplexity"] for r in group.values() if r["perplexity"] is not None]
    best_ppl = min(known) if known else None
    ok = {p: r for p, r in group.items()
          if best_ppl is None or (r["perplexity"] is not None and r["perplexity"] <= best_ppl * 1.05)}
    pick = (min if lower else max)(ok, key=lambda p: ok[p][metric])
    return pick, ok[pick]


def run_bench(data_dir: Path, *, models: tuple[str, ...], prompts: int, new: int, length: int, memory_mb: float,
              max_batch: int, seeds: int, repeats: int, progress: Any = None, family: str = "lm",
              live_rates: tuple[float, ...] = (), tau: float | None = None, live_prompts: int = 0,
              measured_dir: Path | None = None, save_measured: Path | None = None) -> dict[str, Any]:
    """``measured_dir``: replay the traces and costs saved there (``helios_saved``) instead of
    measuring; ``save_measured``: save what this run measured there."""
    from dataclasses import asdict

    from adaserve.bench.helios_sim import candidate, simulate
    from adaserve.bench.helios_trace import costs, drifting_stream, trace
    from adaserve.planner.helios import HeliosParams
    from adaserve.planner.helios.decide import batch_for_memory
    from adaserve.planner.helios.store import load_candidate, manifests

    base = HeliosParams() if tau is None else HeliosParams(tau=tau)
    stream = drifting_stream(prompts, length)
    texts = [p for _, p in stream]
    tasks = [t for t, _ in stream]
    shipped = manifests(data_dir)
    from adaserve.bench.helios_trace import Costs, Trace

    traces: dict[str, Trace] = {}
    measured: dict[str, Costs] = {}
    cands = []
    if measured_dir is not None:
        from adaserve.bench.helios_saved import load as load_measured

        traces, measured, saved_tasks = load_measured(measured_dir)
        if saved_tasks != tasks or set(traces) != set(models):
            raise ValueError(f"{measured_dir} holds another stream or other models ({sorted(traces)}): "
                             "replay it with the --prompts, --length and --models it was measured with")
        traces = {m: traces[m] for m in models}
    task = progress.add_task("measuring the candidates", total=len(models)) if progress else None
    for m in models:
        if measured_dir is None:
            traces[m] = trace(m, data_dir, texts, new, base.tau)
            measured[m] = costs(m, data_dir, texts, new, repeats, tasks=tasks, tau=base.tau)
        cands.append(candidate(measured[m], load_candidate(*shipped[m]), new=new))
        if progress:
            progress.advance(task)
    if save_measured is not None:
        from adaserve.bench.helios_saved import save as keep_measured

        keep_measured(save_measured, traces, measured, tasks)
    # Loads relative to the most accurate model served whole in memory-sized batches.
    ref = min(cands, key=lambda c: c.at(c.max_depth).mean_perplexity())
    ref_fig = ref.at(ref.max_depth)
    ref_b = batch_for_memory(ref_fig, memory_mb, measured[ref.name].block_size, max_batch)
    from adaserve.bench.helios_sim import _at

    c = measured[ref.name]
    capacity = ref_b / (_at(c.prefill_s[ref.max_depth], ref_b) + (new - 1) * _at(c.step_s[ref.max_depth], ref_b))
    policies = _policies(cands)
    out_loads: dict[str, Any] = {}
    task = progress.add_task("replaying", total=sum(seeds if f is not None else 1 for f in LOADS.values())) \
        if progress else None
    for load, factor in LOADS.items():
        rate = None if factor is None else factor * capacity
        in_flight = IN_FLIGHT if factor is None else None
        per_policy: dict[str, list[dict[str, Any]]] = {}
        # a closed loop has no random arrivals: one run (the same costs and order give the same run)
        for seed in range(seeds if rate is not None else 1):
            rng = np.random.default_rng(seed)
            arrivals = (np.cumsum(rng.exponential(1.0 / rate, size=len(texts))) if rate is not None
                        else np.zeros(len(texts)))
            for p in policies:
                r = simulate(p, arrivals, traces, measured, cands, new=new, memory_mb=memory_mb, max_batch=max_batch,
                             params=_params(p, base), tasks=tasks, in_flight=in_flight)
                per_policy.setdefault(p, []).append(r.figures())
            for objective in OBJECTIVE_OF.values():
                r = simulate("helios", arrivals, traces, measured, cands, new=new, memory_mb=memory_mb,
                             max_batch=max_batch, objective=objective, params=base, tasks=tasks, in_flight=in_flight)
                f = r.figures()
                name = f"helios[{objective}]"
                f["policy"] = name
                per_policy.setdefault(name, []).append(f)
            if progress:
                progress.advance(task)
        rows = {p: _median(rs) for p, rs in per_policy.items()}
        best_static, bs = _best(rows, "static-")
        best_fixed, bf = _best(rows, "fixed-")
        h = rows["helios"]
        ratios = {
            "throughput_vs_best_static": h["tokens_per_s"] / bs["tokens_per_s"],
            "throughput_vs_best_fixed": h["tokens_per_s"] / bf["tokens_per_s"],
            "perplexity_vs_best_static": rows["helios[accuracy]"]["perplexity"]
            / _best(rows, "static-", "perplexity", lower=True)[1]["perplexity"],
            "energy_vs_best_static": rows["helios[energy]"]["cpu_s_per_token"]
            / _best(rows, "static-", "cpu_s_per_token", lower=True)[1]["cpu_s_per_token"],
            "ttft_vs_best_static": rows["helios[latency]"]["ttft_p50_s"]
            / _best(rows, "static-", "ttft_p50_s", lower=True)[1]["ttft_p50_s"],
            # the fixed cut that is at least as accurate as helios over the whole stream (None: none is)
            "throughput_vs_fixed_as_accurate": _as_accurate(rows, h),
            # what the throughput ratios were bought with: helios's perplexity over the compared policy's
            "helios_perplexity_vs_compared_static": h["perplexity"] / bs["perplexity"],
            "helios_perplexity_vs_compared_fixed": h["perplexity"] / bf["perplexity"],
        }
        out_loads[load] = {"arrival_rate_prompts_per_s": rate, "in_flight": in_flight,
                           "best_static": best_static, "best_fixed": best_fixed,
                           **ratios, "policies": rows}
    live: dict[str, Any] = {}
    if live_rates:
        from adaserve.bench.helios_live import run_live

        names = ["helios", *(f"fixed-{c.name}-d{c.max_depth}" for c in cands), *(f"static-{c.name}" for c in cands)]
        step = max(1, len(texts) // max(live_prompts or len(texts), 1))
        live_texts = texts[::step]  # every step-th prompt: the same drift, fewer prompts
        # the light cell is the closed loop; the rates go to the open-loop cells in order
        open_loop = [k for k, f in LOADS.items() if f is not None]
        cells: list[tuple[str, float | None]] = [("light", None), *zip(open_loop, live_rates)]
        task = progress.add_task("live pipeline", total=len(names) * len(cells)) if progress else None
        for load, live_rate in cells:
            cell: dict[str, Any] = {"rate_prompts_per_s": live_rate,
                                    "in_flight": IN_FLIGHT if live_rate is None else None}
            for p in names:
                cell[p] = run_live(p, family, live_texts, new=new, rate=live_rate, seed=0, data_dir=data_dir,
                                   models=models, params=base, memory_mb=memory_mb,
                                   in_flight=IN_FLIGHT if live_rate is None else None)
                if progress:
                    progress.advance(task)
            # the best whole model and the best static policy by tokens/s among those whose
            # perplexity (live, from the results) is within 5% of the most accurate, as in the sim
            for prefix, key in (("fixed-", "fixed_whole"), ("static-", "static")):
                best, row = _best({p: cell[p] for p in names if p.startswith(prefix)}, prefix)
                cell[f"best_{key}"] = best
                cell[f"throughput_vs_best_{key}"] = cell["helios"]["tokens_per_s"] / row["tokens_per_s"]
                cell[f"helios_perplexity_vs_best_{key}"] = _ratio(cell["helios"]["perplexity"], row["perplexity"])
            live[load] = cell
    segments, whole = _segments(traces, tasks)
    return {"models": list(models), "prompts": len(texts), "new_tokens": new, "prompt_chars": length,
            "memory_mb": memory_mb, "max_batch": max_batch, "seeds": seeds, "tau": base.tau,
            "capacity_reference": {"policy": f"fixed-{ref.name}-d{ref.max_depth}", "batch": ref_b,
                                   "prompts_per_s": capacity},
            "params": asdict(base), "segments": segments, **whole,
            "loads": out_loads, "live": live,
            "costs": {m: {"prefill_s": c.prefill_s, "step_s": c.step_s, "load_s": c.load_s,
                          "weight_bytes": c.weight_bytes, "early_exit_s": c.early_exit_s,
                          "early_exit_ttft_s": c.early_exit_ttft_s} for m, c in measured.items()}}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _as_accurate(rows: dict[str, dict[str, Any]], h: dict[str, Any]) -> float | None:
    fixed = [r for p, r in rows.items() if p.startswith("fixed-") and r["perplexity"] <= h["perplexity"]]
    return h["tokens_per_s"] / max(r["tokens_per_s"] for r in fixed) if fixed else None


def _gmean(x: Any) -> float:
    return float(np.exp(np.log(x).mean()))


def _segments(traces: dict[str, Any], tasks: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Which model is most accurate on each segment of the stream and on the whole of it: whole
    models, and at each depth two or more candidates share (the same work per token for models
    of one width: the comparison at comparable cost). ``selection_matters`` lists the (segment,
    depth) cells where the best over the whole stream is not the best on that segment."""
    models = list(traces)
    depths = sorted({d for t in traces.values() for d in t.exits})
    shared = [d for d in depths if sum(d in traces[m].exits for m in models) >= 2]

    def table(idx: list[int]) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
        per = {m: _gmean(traces[m].ppl[idx, -1]) for m in models}
        by_depth = {m: {d: _gmean(traces[m].ppl[idx, traces[m].exits.index(d)]) for d in traces[m].exits}
                    for m in models}
        return per, by_depth

    def best_at(by_depth: dict[str, dict[int, float]]) -> dict[int, str]:
        return {d: min((m for m in models if d in by_depth[m]), key=lambda m: by_depth[m][d]) for d in shared}

    everything = list(range(len(tasks)))
    whole, whole_depth = table(everything)
    stream_best = best_at(whole_depth)
    out, matters = {}, []
    for t in dict.fromkeys(tasks):
        idx = [i for i, x in enumerate(tasks) if x == t]
        per, by_depth = table(idx)
        best = best_at(by_depth)
        out[t] = {"prompts": len(idx), "perplexity_whole_model": per, "best": min(per, key=lambda m: per[m]),
                  "perplexity_by_depth": by_depth, "best_at_depth": best}
        matters += [{"segment": t, "depth": d, "best_here": best[d], "best_whole_stream": stream_best[d]}
                    for d in shared if best[d] != stream_best[d]]
    return out, {"perplexity_whole_stream": whole, "best_whole_stream": min(whole, key=lambda m: whole[m]),
                 "perplexity_whole_stream_by_depth": whole_depth, "best_whole_stream_at_depth": stream_best,
                 "selection_matters": matters}


def plot(report: dict[str, Any], path: Path) -> Path:
    """Like the paper's Fig. 13: (a) tokens/s of every policy relative to the best static one, per
    load; (b) the exits the tokens took (model@depth) under HELIOS and each static model."""
    from adaserve.bench.figures import panels, save

    loads = list(report["loads"])
    fig, axes = panels(len(loads) + 1, cols=len(loads) + 1, size=(4.6, 3.6))
    for ax, load in zip(axes.flat, loads):
        cell = report["loads"][load]
        rows = cell["policies"]
        base = rows[cell["best_static"]]["tokens_per_s"]
        names = [p for p in rows if not p.startswith("helios[")]
        vals = [rows[p]["tokens_per_s"] / base for p in names]
        colours = ["C3" if p.startswith("helios") else "C0" if p.startswith("static") else "C7" for p in names]
        ax.barh(range(len(names)), vals, color=colours)
        ax.set_yticks(range(len(names)), names, fontsize=6)
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_xlabel(f"tokens/s / {cell['best_static']}")
        ax.set_title(f"{load}: helios {cell['throughput_vs_best_static']:.2f}x static, "
                     f"{cell['throughput_vs_best_fixed']:.2f}x fixed", fontsize=8)
    ax = list(axes.flat)[len(loads)]
    cell = report["loads"]["near_saturation" if "near_saturation" in report["loads"] else loads[0]]["policies"]
    shown = ["helios"] + [p for p in cell if p.startswith("static-")]
    keys = sorted({k for p in shown for k in cell[p]["exits"]})
    left = np.zeros(len(shown))
    for i, k in enumerate(keys):
        tot = [sum(cell[p]["exits"].values()) or 1 for p in shown]
        v = np.array([cell[p]["exits"].get(k, 0) / t for p, t in zip(shown, tot)])
        ax.barh(range(len(shown)), v, left=left, label=k, color=f"C{i % 10}")
        left += v
    ax.set_yticks(range(len(shown)), shown, fontsize=7)
    ax.set_xlabel("share of tokens by exit (model@depth)")
    ax.legend(fontsize=6)
    return save(fig, axes, len(loads) + 1, path)


def register(bench_app: typer.Typer) -> None:
    """Add the `helios` benchmark to `adaserve bench`."""

    @bench_app.command("helios")
    def helios_cmd(
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
        models: str = typer.Option("", help="Candidates (comma-separated); default: every model of --family."),
        live_prompts: int = typer.Option(0, min=0, help="Prompts of the stream sent live per policy (0: all; "
                                                       "fewer: every k-th, the drift kept)."),
        tau: float = typer.Option(0.4, min=0.01, max=0.99, help="Confidence threshold of the exits (see docs/helios.md)."),
        family: str = typer.Option("lm", help="The family whose candidates compete (a manifest's 'family')."),
        prompts: int = typer.Option(600, min=20, help="Prompts in the drifting stream (half each task)."),
        new: int = typer.Option(16, min=2, max=32, help="Tokens generated per prompt."),
        length: int = typer.Option(32, min=4, max=32, help="Characters per prompt."),
        memory_mb: float = typer.Option(8.0, min=1.0, help="The worker's memory budget (MB) that bounds batches."),
        max_batch: int = typer.Option(32, min=1, max=1024, help="The planner's largest batch."),
        seeds: int = typer.Option(3, min=1, help="Runs per load (different arrivals); medians reported."),
        repeats: int = typer.Option(5, min=1, help="Timings per measured cost (median)."),
        plot_path: Path = typer.Option(DEFAULT_PLOT, "--plot", help="Where to write the PNG."),
        measured: Path = typer.Option(None, "--measured", help="Replay the traces and costs saved in this "
                                      "directory (by --save-measured) instead of measuring the models."),
        save_measured: Path = typer.Option(None, "--save-measured", help="Save the traces and costs this run "
                                           "measures in this directory (to replay decisions on them)."),
        live_rates: str = typer.Option("60,120", help="Prompts/s offered to the live pipeline at the near-saturation "
                                                      "and overload runs; the light run is a closed loop with one "
                                                      "prompt in flight (empty: no live runs)."),
    ) -> None:
        """HELIOS vs static-<model>, fixed-<model>-d<k> and two ablations at three loads (simulated
        from real per-token measurements)."""
        from rich.progress import Progress

        from adaserve.broker.settings import load_settings
        from adaserve.planner.helios import load_repository

        settings = load_settings()
        names = tuple(m for m in models.split(",") if m) or tuple(
            c.name for c in load_repository(settings.data_dir).candidates(family))
        if len(names) < 2:
            raise typer.BadParameter(f"family {family!r} has fewer than two candidates: {names}")
        with Progress(transient=True, disable=json_out) as progress:
            report = run_bench(settings.data_dir, models=names, prompts=prompts, new=new, length=length,
                               memory_mb=memory_mb, max_batch=max_batch, seeds=seeds, repeats=repeats,
                               progress=progress, family=family, tau=tau,
                               live_prompts=live_prompts, measured_dir=measured, save_measured=save_measured,
                               live_rates=tuple(float(x) for x in live_rates.split(",") if x.strip()))
        report["plot"] = str(plot(report, plot_path))
        if json_out:
            typer.echo(json.dumps(report, default=float))
            return
        for load, cell in report["loads"].items():
            typer.echo(f"{load}: helios {cell['policies']['helios']['tokens_per_s']:.0f} tok/s; "
                       f"vs best static ({cell['best_static']}) {cell['throughput_vs_best_static']:.2f}x, "
                       f"vs best fixed ({cell['best_fixed']}) {cell['throughput_vs_best_fixed']:.2f}x")
        for seg, cell in report["segments"].items():
            typer.echo(f"segment {seg} ({cell['prompts']} prompts): most accurate whole model {cell['best']}; at equal "
                       "depth " + ", ".join(f"d{d}: {m}" for d, m in cell["best_at_depth"].items()))
        typer.echo(f"whole stream: most accurate whole model {report['best_whole_stream']}; at equal depth "
                   + ", ".join(f"d{d}: {m}" for d, m in report["best_whole_stream_at_depth"].items())
                   + f"; not the best on every segment: {bool(report['selection_matters'])}")
        typer.echo(f"plot: {report['plot']}")
