"""The human forms of telemetry: event lines as ``adaserve tail`` prints them, dead letter tables."""

from __future__ import annotations

import io
import re

from rich.console import Console

from adaserve.broker.events import (
    BatchDispatched,
    JobAccepted,
    JobExpired,
    JobRejected,
    PlannerReplanned,
    WorkerHeartbeat,
)
from adaserve.telemetry.dead import DeadLetter
from adaserve.telemetry.reader import Received
from adaserve.telemetry.render import event_line, number, print_dead, print_stats
from adaserve.telemetry.stats import Counts, PoolStats, Stats, WorkerStats


def shown(ev: object) -> str:
    """The line as the terminal shows it: markup rendered, no colour."""
    out = io.StringIO()
    Console(file=out, highlight=False, soft_wrap=True, color_system=None).print(event_line(Received("1-0", ev)))
    return out.getvalue().strip()


def test_accuracies_keep_their_digits() -> None:
    line = shown(PlannerReplanned(ts=0.0, job_id="j", before="audio+image:6", after="audio:4,image:2",
                                  reason="cheaper", model="av-digits", before_accuracy=0.96,
                                  after_accuracy=0.8466666666666667))
    assert "before_accuracy=0.96 " in line and line.endswith("after_accuracy=0.847")
    expired = shown(PlannerReplanned(ts=0.0, job_id="j", before="audio+image:6", after="expired",
                                     reason="expire", before_accuracy=0.95, after_accuracy=None))
    assert "before_accuracy=0.95" in expired and "after_accuracy" not in expired


def test_milliseconds_keep_one_decimal_and_small_values_three_digits() -> None:
    line = shown(BatchDispatched(ts=0.0, batch_id="b", pool="p", model="m", size=4, predicted_ms=0.0123456))
    assert "predicted_ms=0.0123" in line
    assert "deadline_ms=1234.6" in shown(JobAccepted(ts=0.0, job_id="j", app="a", model="m", requests=1,
                                                     deadline_ms=1234.56))
    assert [number(v) for v in (0.0, 5.0, 3.456, 9.996, 12.0, 0.96, -0.25, 1.5e-5)] == [
        "0.0", "5.0", "3.46", "10.0", "12.0", "0.96", "-0.25", "1.5e-05"]
    assert [number(v) for v in (float("nan"), float("inf"))] == ["nan", "inf"]


def test_lists_and_text_are_shown_not_read_as_markup() -> None:
    line = shown(JobExpired(ts=0.0, job_id="j", app="a", request_ids=["r1", "r2", "r3", "r4", "r5"]))
    assert "request_ids=[r1,r2,r3,r4,+1]" in line
    line = shown(JobRejected(ts=0.0, job_id="j", reason="schema", detail="inputs [audio] [/bold] missing"))
    assert "detail=inputs [audio] [/bold] missing" in line


def test_a_dead_letter_s_text_is_shown_as_sent() -> None:
    out = io.StringIO()
    letter = DeadLetter(id="1-0", ts=0, reason="schema", detail="field [/x] is [bold]bad[/bold]", source="jobs",
                        entry="1-0", raw_bytes=3)
    print_dead([letter], 1, Console(file=out, width=200, color_system=None))
    assert "field [/x] is [bold]bad[/bold]" in out.getvalue()


def test_a_heartbeat_line_is_short() -> None:
    inputs = {f"model-{i}": {"audio": {"shape": [1, 8000], "dtype": "float32"}} for i in range(6)}
    beat = WorkerHeartbeat(ts=0.0, worker="cpu-host-1234", pool="cpu", slots=4, busy=1,
                           models=[f"model-{i}" for i in range(6)], inputs=inputs, device="gpu",
                           gpu={"util_pct": 87.0, "power_w": 312.5, "memory_used_mb": 1234.0})
    line = shown(beat)
    assert len(line) < 160 and "inputs" not in line and "float32" not in line
    assert "worker=cpu-host-1234 pool=cpu device=gpu busy=1/4 models=[model-0,model-1,model-2,model-3,+2]" in line
    assert line.endswith("util_pct=87.0 power_w=312.5")


def big_stats() -> Stats:
    c = Counts(jobs=123456, submitted=1234567, completed=1200000, expired=23456, rejected=11111, failed=99,
               on_time=1100000, slo_violations=134567, finish_rate=0.891, p50_ms=1234.5, p99_ms=98765.4,
               throughput_rps=15523.4)
    pools = [PoolStats(pool="gpu-h100-pool", model="ee-audio-long-name", variant="depth2-int8", batches=99999,
                       requests=1234567, mean_batch=31.9, exec_p50_ms=1234.5, exec_p99_ms=5678.9, p50_ms=2345.6,
                       p99_ms=98765.4, throughput_rps=15523.4, workers=16, devices=["gpu"])]
    workers = [WorkerStats(worker=f"worker-{i}-on-a-long-host-name.example", pool="gpu-h100-pool", device="gpu",
                           batches=99999, requests=1234567, throughput_rps=15523.4, exec_p50_ms=1234.5,
                           slots=64, busy=63, util_pct=100.0, power_w=699.9) for i in range(2)]
    return Stats(span_s=7.9, window_s=60.0, events=4567890, total=c,
                 apps={"classifier-app": c, "another-app-with-a-long-name": c}, pools=pools, workers=workers,
                 reasons={"expired": 23456})


def test_stats_fit_80_columns_without_cutting_a_figure() -> None:
    console = Console(record=True, width=80, color_system=None)
    print_stats(big_stats(), console)
    text = console.export_text()
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in text
    for figure in ("123456", "1234567", "1200000", "23456", "11111", "0.891", "134567", "1234.5", "98765.4",
                   "15523.4", "99999", "31.9", "5678.9", "2345.6", "63/64", "100", "700"):
        assert re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d.])", text), figure
    firsts = "".join(line.split()[0] for line in lines if line.strip())
    for name in ("classifier-app", "another-app-with-a-long-name", "all", "gpu-h100-pool",
                 "worker-0-on-a-long-host-name.example", "worker-1-on-a-long-host-name.example"):
        assert name in firsts, name
    assert "last 60 s" in text and "rates over 7.9 s of load" in text
