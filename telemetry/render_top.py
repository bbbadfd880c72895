"""The screen of ``adaserve top``: the dashboard's rows as tables that fit 80 columns."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from adaserve.telemetry.render import fixed, narrow_table
from adaserve.telemetry.top import Dashboard


def _mix(counts: dict[str, int], top: int = 3) -> str:
    """``default 80%, small 20%``: the largest shares, the rest summed up."""
    total = sum(counts.values())
    if not total:
        return "-"
    items = list(counts.items())
    parts = [f"{k} {100 * v / total:.0f}%" for k, v in items[:top]]
    if len(items) > top:
        parts.append(f"+{len(items) - top} more {100 * sum(v for _, v in items[top:]) / total:.0f}%")
    return ", ".join(parts)


def screen(d: Dashboard, namespace: str = "") -> Group:
    """Every model, pool and worker row; long names fold, figures are shown whole."""
    at = datetime.fromtimestamp(d.now_ms / 1000).strftime("%H:%M:%S")
    ns = f"{namespace} · " if namespace else ""
    head = Text.from_markup(f"[bold]adaserve top[/] · {escape(ns)}{at} · last {d.window_s:g} s, "
                            f"rates over {d.span_s:.1f} s · {d.events} events")
    parts: list[Table | Text] = [head]
    if not d.models and not d.workers:
        parts.append(Text("no load and no worker in the window", style="dim"))
    if d.models:
        t = narrow_table("models", "model", "queued", "running", "in/s", "done/s", "finish", "SLO\nviol.",
                         "p50 ms", "p99 ms", text=("model",))
        for m in d.models:
            t.add_row(escape(m.model), str(m.queued), str(m.running), fixed(m.arrival_rps), fixed(m.done_rps),
                      fixed(m.finish_rate, 3), str(m.slo_violations), fixed(m.p50_ms), fixed(m.p99_ms))
        parts.append(t)
        t = narrow_table("plan mix (completed requests)", "model", "variants", "exits", "placements",
                         text=("model", "variants", "exits", "placements"))
        for m in d.models:
            t.add_row(escape(m.model), escape(_mix(m.variants)), escape(_mix(m.exits)), escape(_mix(m.placements)))
        parts.append(t)
    if d.pools:
        t = narrow_table("pools", "pool", "workers", "busy/\nslots", "batches/s", "req/s", "mean\nbatch",
                         "exec\np50 ms", text=("pool",))
        for p in d.pools:
            t.add_row(escape(p.pool), str(p.workers), f"{p.busy}/{p.slots}", fixed(p.batches_per_s), fixed(p.rps),
                      fixed(p.mean_batch), fixed(p.exec_p50_ms))
        parts.append(t)
    if d.workers:
        t = narrow_table("workers", "worker", "pool", "device", "busy/\nslots", "batches\n/s", "req/s", "GPU\n%",
                         "power\nW", "seen\ns ago", text=("worker", "pool", "device"))
        for w in d.workers:
            t.add_row(escape(w.worker), escape(w.pool), escape(w.device), f"{w.busy}/{w.slots}",
                      fixed(w.batches_per_s), fixed(w.rps), fixed(w.util_pct, 0), fixed(w.power_w, 0), fixed(w.seen_s))
        parts.append(t)
    return Group(*parts)
