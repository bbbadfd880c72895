"""The scheduler interface: required methods abstract, optional capabilities declared with defaults."""

from __future__ import annotations

import pytest

from adaserve.planner.core import Decision, Feedback, Pending, Scheduler
from adaserve.planner.mosel.scheduler import MoselScheduler
from adaserve.planner.policies import POLICIES, make_scheduler


class Minimal(Scheduler):
    name = "minimal"

    def __init__(self) -> None:
        self.items: list[Pending] = []

    def add(self, item: Pending, now: float) -> None:
        self.items.append(item)

    def next_batch(self, now: float, max_size: int) -> Decision:
        batch, self.items = self.items[:max_size], self.items[max_size:]
        return Decision(batch=batch)

    def expire(self, now: float) -> list[Pending]:
        return []

    def observe(self, feedback: Feedback) -> None:
        pass

    def earliest_deadline(self) -> float | None:
        return min((p.deadline for p in self.items), default=None)

    def __len__(self) -> int:
        return len(self.items)


def test_a_policy_without_the_optional_capabilities_gets_the_defaults() -> None:
    s = Minimal()
    s.check_job(object())  # type: ignore[arg-type]  # admits anything
    s.add_sample("app", 0.01)
    s.close()
    assert s.drain_events() == [] and not s.takes_samples


def test_a_policy_must_answer_the_required_questions() -> None:
    class Incomplete(Scheduler):
        name = "incomplete"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_declares_itself_a_scheduler(policy: str) -> None:
    sched = make_scheduler(policy, model="fsdd-cnn")
    assert isinstance(sched, Scheduler)
    assert sched.takes_samples == (policy == "orloj")  # only ORLOJ learns from requests re-run alone


def test_mosel_overrides_the_capabilities_it_has() -> None:
    for hook in ("check_job", "drain_events", "close"):
        assert getattr(MoselScheduler, hook) is not getattr(Scheduler, hook)
