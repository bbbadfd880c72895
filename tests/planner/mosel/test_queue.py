from __future__ import annotations

from adaserve.broker.events import PlannerReplanned
from adaserve.planner.mosel import Change, QueuedJob, SubsetCosts


def test_deadline_order_breaks_ties_by_arrival_then_id() -> None:
    a = QueuedJob("b", 1, 0.7, 1.0, 5.0)
    b = QueuedJob("a", 1, 0.7, 1.0, 5.0)
    c = QueuedJob("c", 1, 0.7, 0.5, 5.0)
    d = QueuedJob("d", 1, 0.7, 9.0, 4.0)
    assert [j.job_id for j in sorted([a, b, c, d], key=lambda j: j.order)] == ["d", "c", "a", "b"]


def test_change_is_a_planner_replanned_event(costs: SubsetCosts) -> None:
    before, after = costs.strategy((0, 3, 0)), costs.strategy((0, 1, 2))
    ev = PlannerReplanned(ts=1.0, **Change("j1", before, after, "cheaper").event_fields())
    assert (ev.before, ev.after, ev.reason) == ("audio+image:3", "audio+image:1,image:2", "cheaper")
    gone = Change("j1", before, None, "expire").event_fields()
    assert gone["after"] == "expired"
