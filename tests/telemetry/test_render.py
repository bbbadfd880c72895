"""The human forms of telemetry: event lines as ``adaserve tail`` prints them, dead letter tables."""

from __future__ import annotations

import io

from rich.console import Console

from adaserve.broker.events import BatchDispatched, JobAccepted, JobExpired, JobRejected, PlannerReplanned
from adaserve.telemetry.dead import DeadLetter
from adaserve.telemetry.reader import Received
from adaserve.telemetry.render import event_line, number, print_dead


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
