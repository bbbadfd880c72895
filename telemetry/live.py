"""``adaserve top``'s loop: the window's history first, then new events, the screen redrawn each
interval. The shell around the pure ``telemetry.top``: the clock, Redis and the terminal live here."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live

from adaserve.broker.connection import connect
from adaserve.broker.settings import Settings
from adaserve.telemetry.reader import TelemetryReader
from adaserve.telemetry.render_top import screen
from adaserve.telemetry.top import Window


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _passed(due: float) -> Callable[[], bool]:
    return lambda: time.monotonic() >= due


def run_top(settings: Settings, *, interval_s: float = 1.0, window_s: float = 10.0, once: bool = False,
            json_out: bool = False, console: Console | None = None, frames: int | None = None) -> None:
    """Draw the dashboard every ``interval_s`` until Ctrl-C (or ``frames`` refreshes); ``once``:
    print one frame and return."""
    console = console or Console()
    reader = TelemetryReader(connect(settings, block_ms=500), settings)
    # The window is cut in the server's clock (entry ids); asking it once and keeping the offset
    # lets the screen go on refreshing while an outage is ridden out inside ``follow``.
    offset_ms = reader.server_ms() - time.time() * 1000

    def now_ms() -> int:
        return int(time.time() * 1000 + offset_ms)

    win = Window(window_s)
    after = reader.latest_id()
    for got in reader.history(since_ms=now_ms() - int(window_s * 1000)):
        if _id(got.id) > _id(after):
            break  # newer than the cursor: ``follow`` reads it
        win.add(got.ms, got.event)
    if once:
        frame = win.view(now_ms())
        if json_out:
            console.file.write(frame.model_dump_json() + "\n")
        else:
            console.print(screen(frame, settings.namespace))
        return
    block_ms = int(min(interval_s, 0.5) * 1000)
    with Live(screen(win.view(now_ms()), settings.namespace), console=console, auto_refresh=False) as live:
        while frames is None or frames > 0:
            frames = None if frames is None else frames - 1
            due = time.monotonic() + interval_s
            for got in reader.follow(after=after, block_ms=block_ms, stop=_passed(due)):
                win.add(got.ms, got.event)
                after = got.id
                if time.monotonic() >= due:
                    break
            live.update(screen(win.view(now_ms()), settings.namespace), refresh=True)
