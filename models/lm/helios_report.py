"""Showing HELIOS profiles: one table per candidate, and a plot of every candidate side by side."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from adaserve.models.lm.helios_profile import BATCH_SIZES, DepthProfile, HeliosProfile


def table(p: HeliosProfile) -> Table:
    """Per depth: speed at each batch size, memory, load time, and per task perplexity, exit share
    at tau and Insight 1 (breaching tokens the whole model would have emitted too)."""
    t = Table(title=f"{p.name} ({p.device}, tau {p.tau}, {p.prompt_tokens}+{p.new_tokens} tokens, "
                    f"median of {p.repeats})")
    for col in ("depth", *(f"tok/s b{b}" for b in BATCH_SIZES), *(f"tok/cpu-s b{b}" for b in BATCH_SIZES),
                "ttft ms", "cpu ms/tok", "weights KiB",
                "KV B/tok", "RSS load KiB", "RSS b16 KiB", "load ms"):
        t.add_column(col, justify="right")
    tasks = list(p.depths[0].tasks) if p.depths else []
    for task in tasks:
        t.add_column(f"{task} ppl / exit≤K / breach / unchanged", justify="right")
    for d in p.depths:
        cells = [str(d.depth), *(f"{d.tokens_per_s[str(b)]:,.0f}" for b in BATCH_SIZES),
                 *(f"{d.tokens_per_cpu_s.get(str(b), float('nan')):,.0f}" for b in BATCH_SIZES),
                 f"{d.ttft_s * 1e3:.2f}", f"{d.cpu_s_per_token * 1e3:.2f}", kib(d.weight_bytes),
                 f"{d.kv_bytes_per_token:,}", kib(d.rss_weights_bytes), kib(d.rss_batch16_bytes),
                 f"{d.load_s * 1e3:.1f}"]
        for task in tasks:
            f = d.tasks[task]
            same = "-" if f.unchanged is None else f"{f.unchanged:.3f}"
            cells.append(f"{f.perplexity:.3f} / {f.exit_share:.3f} / {f.breach_share:.3f} / {same}")
        t.add_row(*cells)
    e = p.early_exit
    if e is not None:
        exits = ", ".join(f"{task} mean exit {x:.2f}" for task, x in e.mean_exit.items())
        t.add_row(f"early-exit ({e.depth})", *(f"{e.tokens_per_s[str(b)]:,.0f}" for b in BATCH_SIZES),
                  *(f"{e.tokens_per_cpu_s[str(b)]:,.0f}" for b in BATCH_SIZES), f"{e.ttft_s * 1e3:.2f}",
                  f"{e.cpu_s_per_token * 1e3:.2f}", "", "", "", "", "", exits)
    return t


def kib(b: int | None) -> str:
    return "" if b is None else f"{b / 1024:,.0f}"


def _speed(d: DepthProfile, batch: str) -> float:
    """Tokens per CPU second when measured (robust on a shared host), else per wall second."""
    return d.tokens_per_cpu_s.get(batch) or d.tokens_per_s[batch]


def plot(profiles: list[HeliosProfile], path: Path) -> Path:
    """Perplexity per depth on each task, and tokens/s per depth at batch 1 and 16."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(profiles[0].depths[0].tasks) if profiles and profiles[0].depths else []
    fig, axes = plt.subplots(1, len(tasks) + 1, figsize=(4.2 * (len(tasks) + 1), 3.6))
    for p in profiles:
        ks = p.depth_values
        for ax, task in zip(axes, tasks):
            ax.plot(ks, [d.tasks[task].perplexity for d in p.depths], marker="o", label=p.name)
        line, = axes[-1].plot(ks, [_speed(d, "16") for d in p.depths], marker="o", label=f"{p.name} b16")
        axes[-1].plot(ks, [_speed(d, "1") for d in p.depths], marker="x", ls="--", color=line.get_color(),
                      label=f"{p.name} b1")
    for ax, task in zip(axes, tasks):
        ax.set(title=f"held-out {task}", xlabel="depth (layers loaded)", ylabel="perplexity per character")
        ax.legend(fontsize=7)
    axes[-1].set(title="generation cost (CPU, 1 thread)", xlabel="depth", ylabel="tokens per CPU second",
                 yscale="log")
    axes[-1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
