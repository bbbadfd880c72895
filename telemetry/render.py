"""Human forms of telemetry: one line per event, and rich tables for stats and dead letters."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from adaserve.telemetry.dead import DeadLetter
from adaserve.telemetry.reader import Received
from adaserve.telemetry.stats import Counts, Stats

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


def _n(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _row(name: str, c: Counts) -> list[str]:
    return [name, str(c.jobs), str(c.submitted), str(c.completed), str(c.expired), str(c.rejected),
            str(c.failed), f"{c.finish_rate:.3f}", str(c.slo_violations), _n(c.p50_ms), _n(c.p99_ms),
            _n(c.throughput_rps)]


def print_stats(stats: Stats, console: Console | None = None) -> None:
    console = console or Console()
    scope = f"run {stats.run}" if stats.run else f"last {stats.span_s:.0f} s"
    t = Table(title=f"adaserve stats: {scope} ({stats.events} events)")
    for col in ("app", "jobs", "submitted", "completed", "expired", "rejected", "failed", "finish rate",
                "SLO violations", "p50 ms", "p99 ms", "req/s"):
        t.add_column(col, justify="left" if col == "app" else "right")
    for app, c in stats.apps.items():
        t.add_row(*_row(app, c))
    t.add_row(*_row("[bold]all[/]", stats.total), end_section=True)
    console.print(t)
    if stats.pools:
        p = Table(title="per pool and model")
        for col in ("pool", "model", "variant", "batches", "requests", "mean batch", "exec p50 ms",
                    "exec p99 ms", "p50 ms", "p99 ms", "req/s", "workers", "devices"):
            p.add_column(col, justify="left" if col in ("pool", "model", "variant", "devices") else "right")
        for s in stats.pools:
            p.add_row(s.pool, s.model, s.variant, str(s.batches), str(s.requests), _n(s.mean_batch),
                      _n(s.exec_p50_ms), _n(s.exec_p99_ms), _n(s.p50_ms), _n(s.p99_ms), _n(s.throughput_rps),
                      str(s.workers), ",".join(s.devices))
        console.print(p)
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
