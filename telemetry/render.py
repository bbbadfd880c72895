"""Human forms of telemetry: one line per event, and rich tables for stats and dead letters."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from adaserve.broker.events import WorkerHeartbeat
from adaserve.telemetry.dead import DeadLetter
from adaserve.telemetry.reader import Received
from adaserve.telemetry.stats import Stats

_SKIP = {"v", "type", "ts", "event", "items"}
_COLOUR = {"job": "cyan", "batch": "magenta", "worker": "green", "planner": "yellow", "model": "yellow"}


def clock(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S.%f")[:-3]


def number(v: float) -> str:
    """Three significant digits below 10, one decimal from there on.

    Events mix milliseconds (one decimal is plenty) with fractions such as accuracies and
    confidences, which one decimal would round into each other (0.96 and 0.95 both ``1.0``)."""
    if v != 0 and abs(v) < 10:  # NaN and infinities fail this and print as ``nan``, ``inf``
        out = f"{v:.3g}"
        return out if "." in out or "e" in out else out + ".0"  # 5.0 stays ``5.0``, not ``5``
    return f"{v:.1f}"


def _short(v: Any) -> str:
    if isinstance(v, float):
        return number(v)
    if isinstance(v, list):
        return "[" + ",".join(map(str, v[:4])) + (f",+{len(v) - 4}" if len(v) > 4 else "") + "]"
    return str(v)


def event_line(got: Received) -> str:
    """``HH:MM:SS.mmm event key=value ...`` (rich markup), batch items summarised."""
    ev = got.event
    if isinstance(ev, WorkerHeartbeat):
        return heartbeat_line(ev)
    body = ev.model_dump()
    # Values are escaped: a list (``[r1,r2]``) or a producer's text would otherwise be read as
    # rich markup, vanish, or stop ``tail`` with a MarkupError.
    parts = [escape(f"{k}={_short(v)}") for k, v in body.items()
             if k not in _SKIP and v not in (None, "", [], {})]
    items = body.get("items")
    if items:
        ok = sum(it["status"] == "completed" for it in items)
        worst = max(it["total_ms"] for it in items)
        parts.append(f"items={len(items)} completed={ok} max_total_ms={worst:.1f}")
    colour = _COLOUR.get(ev.event.split(".", 1)[0], "white")
    return f"[dim]{clock(ev.ts)}[/] [{colour}]{ev.event:<18}[/] " + " ".join(parts)


def event_json(got: Received) -> str:
    return json.dumps({"id": got.id, **got.event.model_dump(mode="json")}, separators=(",", ":"))


def heartbeat_line(ev: WorkerHeartbeat) -> str:
    """A worker's heartbeat in a few words: its input specs (hundreds of characters) are left out."""
    gpu = ev.gpu or {}
    parts = [f"worker={ev.worker}", f"pool={ev.pool}", f"device={ev.device}", f"busy={ev.busy}/{ev.slots}",
             f"models={_short(ev.models)}"]
    parts += [f"{k}={number(gpu[k])}" for k in ("util_pct", "power_w") if k in gpu]
    return f"[dim]{clock(ev.ts)}[/] [green]{ev.event:<18}[/] " + escape(" ".join(parts))


def fixed(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def narrow_table(title: str, *columns: str, text: tuple[str, ...] = ()) -> Table:
    """A table for an 80-column terminal: no outer border, one space between columns. Columns
    named in ``text`` fold long words and give up width first; the others hold figures, which
    never wrap, so a number is shown whole or the text beside it folds (never ``58…``)."""
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
              collapse_padding=True, show_edge=False)
    for col in columns:
        if col in text:
            t.add_column(col, justify="left", overflow="fold")
        else:
            t.add_column(col, justify="right", no_wrap=True, min_width=max(map(len, col.split("\n"))))
    return t


def print_stats(stats: Stats, console: Console | None = None) -> None:
    console = console or Console()
    if stats.run:
        scope = f"run {stats.run}"
    else:
        scope = f"last {stats.window_s or stats.span_s:g} s"
    console.print(f"[bold]adaserve stats[/]: {escape(scope)}, {stats.events} events, "
                  f"rates over {stats.span_s:.1f} s of load")
    rows = [*stats.apps.items(), ("all", stats.total)]
    t = narrow_table("requests per app", "app", "jobs", "requests", "completed", "expired", "rejected", "failed",
                     text=("app",))
    for i, (app, c) in enumerate(rows):
        t.add_row(escape(app), str(c.jobs), str(c.submitted), str(c.completed), str(c.expired),
                  str(c.rejected), str(c.failed), end_section=i == len(rows) - 2)
    console.print(t)
    t = narrow_table("latency per app", "app", "finish\nrate", "SLO\nviolations", "p50 ms", "p99 ms", "req/s",
                     text=("app",))
    for i, (app, c) in enumerate(rows):
        t.add_row(escape(app), f"{c.finish_rate:.3f}", str(c.slo_violations), fixed(c.p50_ms), fixed(c.p99_ms),
                  fixed(c.throughput_rps), end_section=i == len(rows) - 2)
    console.print(t)
    if stats.pools:
        names = [(escape(p.pool), escape(p.model if p.variant == "default" else f"{p.model} {p.variant}"))
                 for p in stats.pools]
        t = narrow_table("per pool and model", "pool", "model", "batches", "requests", "mean\nbatch", "req/s",
                         "workers", text=("pool", "model"))
        for (pool, model), p in zip(names, stats.pools, strict=True):
            t.add_row(pool, model, str(p.batches), str(p.requests), fixed(p.mean_batch), fixed(p.throughput_rps),
                      str(p.workers))
        console.print(t)
        t = narrow_table("latency per pool and model", "pool", "model", "exec\np50 ms", "exec\np99 ms", "p50 ms",
                         "p99 ms", text=("pool", "model"))
        for (pool, model), p in zip(names, stats.pools, strict=True):
            t.add_row(pool, model, fixed(p.exec_p50_ms), fixed(p.exec_p99_ms), fixed(p.p50_ms), fixed(p.p99_ms))
        console.print(t)
    if stats.workers:
        t = narrow_table("per worker", "worker", "pool", "batches", "requests", "req/s", "exec\np50 ms",
                         "busy/\nslots", "GPU\n%", "power\nW", text=("worker", "pool"))
        for w in stats.workers:
            slots = "-" if w.slots is None else f"{w.busy}/{w.slots}"
            t.add_row(escape(w.worker), escape(w.pool), str(w.batches), str(w.requests), fixed(w.throughput_rps),
                      fixed(w.exec_p50_ms), slots, fixed(w.util_pct, 0), fixed(w.power_w, 0))
        console.print(t)
    if stats.reasons:
        console.print("not completed: " + ", ".join(f"{k}={v}" for k, v in sorted(stats.reasons.items())))


def print_dead(letters: list[DeadLetter], total: int, console: Console | None = None) -> None:
    t = Table(title=f"dead letters: {len(letters)} most recent of {total}")
    for col in ("time", "reason", "source", "entry", "bytes", "job", "detail"):
        t.add_column(col, justify="right" if col == "bytes" else "left", overflow="fold")
    for d in letters:
        # Dead letters hold whatever a producer sent: their text is shown, never read as markup.
        t.add_row(clock(d.ts) if d.ts else "-", escape(d.reason), escape(d.source), escape(d.entry),
                  str(d.raw_bytes), escape(d.job_id or "-"), escape(d.detail[:200]))
    (console or Console()).print(t)
