"""``adaserve top``'s loop on a real server: events published while it runs reach the screen."""

from __future__ import annotations

import io
import threading
import time

from rich.console import Console

from adaserve.broker import Keys, Settings
from adaserve.broker.codec import encode
from adaserve.broker.events import JobAccepted, WorkerHeartbeat
from adaserve.telemetry.live import run_top


def test_new_events_reach_the_screen(settings: Settings, r) -> None:
    stream = Keys(settings.namespace).telemetry
    r.xadd(stream, {b"m": encode(WorkerHeartbeat(ts=time.time() * 1000, worker="before-w", pool="cpu", slots=1))})
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    loop = threading.Thread(target=run_top, args=(settings,),
                            kwargs={"interval_s": 0.2, "window_s": 30.0, "console": console, "frames": 20})
    loop.start()
    time.sleep(1.0)  # past the history read: what follows is read by following
    for j in range(7):
        r.xadd(stream, {b"m": encode(JobAccepted(ts=time.time() * 1000, job_id=f"j{j}", app="a", model="late-model",
                                                 requests=1, deadline_ms=100))})
    r.xadd(stream, {b"m": encode(WorkerHeartbeat(ts=time.time() * 1000, worker="after-w", pool="gpu", slots=3,
                                                 busy=2))})
    loop.join(timeout=30)
    assert not loop.is_alive()
    text = out.getvalue()
    last = text[text.rindex("adaserve top"):]  # the final frame
    assert "late-model" in last and "before-w" in last and "after-w" in last and "2/3" in last
    row = next(line for line in last.splitlines() if line.startswith("late-model"))
    assert row.split()[1] == "7"  # queued: accepted, none ended or running
