"""Rendering profiles: rich tables for the terminal and a PNG of the trade-offs (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.table import Table

from adaserve.broker.profiles import Profile


def tables(p: Profile) -> Group:
    """Latency per (variant, device) over batch sizes; quality; histograms; parts."""
    sizes = sorted({pt.batch_size for pt in p.latency})
    lat = Table(title=f"{p.model}: p50 latency (ms) per batch size", title_justify="left")
    lat.add_column("variant")
    lat.add_column("device")
    for b in sizes:
        lat.add_column(str(b), justify="right")
    for variant, device in _pairs(p):
        row = [p.latency_ms(variant, device, b) for b in sizes]
        lat.add_row(variant, device, *("-" if v is None else f"{v:.2f}" for v in row))
    parts: list[Table] = [lat]
    if p.quality:
        q = Table(title=f"{p.model}: quality on validation data", title_justify="left")
        for col in ("variant", "metric", "value", "n"):
            q.add_column(col, justify="right" if col in ("value", "n") else "left")
        for pt in p.quality:
            q.add_row(pt.variant, pt.metric, f"{pt.value:.4f}", str(pt.n))
        parts.append(q)
    for h in p.exec_hist:
        t = Table(title=f"{p.model}/{h.variant} on {h.device}: per-request execution time",
                  title_justify="left")
        t.add_column("ms from", justify="right")
        t.add_column("to", justify="right")
        t.add_column("requests", justify="right")
        for lo, hi, c in zip(h.edges_ms, h.edges_ms[1:], h.counts):
            t.add_row(f"{lo:.3f}", f"{hi:.3f}", str(c))
        if h.exits:
            t.caption = "exits taken: " + ", ".join(f"{e}: {f:.0%}" for e, f in h.exits.items())
        parts.append(t)
    if p.parts:
        t = Table(title=f"{p.model}: parts of the split model", title_justify="left")
        for col in ("part", "device", "batch", "p50 ms", "hands on (bytes)"):
            t.add_column(col, justify="left" if col in ("part", "device") else "right")
        for part in sorted(p.parts, key=lambda x: (x.variant, x.device, x.batch_size)):
            t.add_row(part.variant, part.device, str(part.batch_size), f"{part.p50_ms:.2f}", f"{part.out_bytes:,}")
        parts.append(t)
    return Group(*parts)


def _pairs(p: Profile) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for pt in p.latency:
        seen.setdefault((pt.variant, pt.device), None)
    return list(seen)


def plot(profiles: list[Profile], path: Path) -> Path:
    """Two panels per model: latency vs batch size per variant, and quality vs batch-1 cost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(profiles), 2, figsize=(11, 4 * len(profiles)), squeeze=False)
    for (ax_lat, ax_q), p in zip(axes, profiles):
        for variant, device in _pairs(p):
            pts = sorted((pt for pt in p.latency if pt.variant == variant and pt.device == device),
                         key=lambda x: x.batch_size)
            ax_lat.plot([x.batch_size for x in pts], [x.p50_ms for x in pts], marker="o",
                        label=f"{variant} ({device})")
        ax_lat.set(title=f"{p.model}: latency vs batch size", xlabel="batch size", ylabel="p50 latency (ms)")
        ax_lat.set_xscale("log", base=2)
        sizes = sorted({pt.batch_size for pt in p.latency})
        ax_lat.set_xticks(sizes, [str(b) for b in sizes])
        ax_lat.minorticks_off()
        if p.latency:
            ax_lat.legend(fontsize="small")
        for q in p.quality:
            costs = [(pt.device, pt.p50_ms) for pt in p.latency
                     if pt.variant == q.variant and pt.batch_size == 1]
            for device, cost in costs:
                ax_q.scatter(cost, q.value)
                ax_q.annotate(f"{q.variant} ({device})", (cost, q.value), fontsize="small")
        metric = p.quality[0].metric if p.quality else "quality"
        ax_q.set(title=f"{p.model}: {metric} vs cost", xlabel="p50 latency at batch size 1 (ms)",
                 ylabel=metric + (" (lower is better)" if metric == "perplexity" else ""))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
