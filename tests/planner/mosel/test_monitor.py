"""The monitor thread: one task at a time, results in order, failures logged, clean stop."""

from __future__ import annotations

import threading

from adaserve.planner.mosel.monitor import Monitor
from adaserve.planner.mosel.tasks import InlineTasks


def test_one_task_at_a_time_and_results_in_order() -> None:
    m = Monitor()
    gate = threading.Event()
    try:
        assert m.submit(lambda: (gate.wait(5), "first")[1])
        assert m.busy and not m.submit(lambda: "refused")
        gate.set()
        assert m.wait_idle()
        assert m.submit(lambda: "second") and m.wait_idle()
        assert m.drain() == ["first", "second"] and m.drain() == []
    finally:
        m.close()
    assert not m.submit(lambda: "after close")


def test_a_failing_task_does_not_stop_the_monitor() -> None:
    m = Monitor()
    try:
        assert m.submit(lambda: 1 / 0) and m.wait_idle()
        assert m.submit(lambda: "still here") and m.wait_idle()
        assert m.drain() == ["still here"]
    finally:
        m.close()


def test_inline_tasks_run_at_submission_and_survive_a_failure() -> None:
    m = InlineTasks()
    assert m.inline and not Monitor().inline
    assert m.submit(lambda: 7) and m.submit(lambda: 1 / 0) and m.drain() == [7] and m.drain() == []
