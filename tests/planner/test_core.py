"""The scheduler interface: required methods abstract, optional capabilities declared with defaults."""

from __future__ import annotations

import gc
import weakref

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


def test_add_many_by_default_adds_each_in_order() -> None:
    s = Minimal()
    items = [Pending("j", str(r), "app", "m", 0.0, 1.0) for r in range(3)]
    s.add_many(items, 0.0)
    assert s.items == items


@pytest.mark.parametrize("policy", POLICIES)
def test_a_job_added_in_one_call_is_scheduled_as_added_one_by_one(policy: str) -> None:
    one, each = make_scheduler(policy, model="fsdd-cnn"), make_scheduler(policy, model="fsdd-cnn")
    for j in range(6):
        items = [Pending(f"j{j}", str(r), "app", "fsdd-cnn", 0.01 * j, 0.01 * j + 0.5, seq=4 * j + r) for r in range(4)]
        one.add_many(items, 0.01 * j)
        for item in items:
            each.add(item, 0.01 * j)
    assert len(one) == len(each) == 24
    for _ in range(4):
        a, b = one.next_batch(0.06, 8), each.next_batch(0.06, 8)
        assert [p.key for p in a.batch] == [p.key for p in b.batch] and a.predicted_s == b.predicted_s


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


class _Body:
    """A request's payload that can be watched for its release (``Pending`` itself has slots)."""


@pytest.mark.parametrize("policy", POLICIES)
def test_a_policy_keeps_no_request_it_has_let_go(policy: str) -> None:
    # Live, a payload holds its job's tensors: a policy that keeps requests it batched (ORLOJ's
    # heap of when runs leave a size did, for as long as their deadline) holds every job of that
    # time in memory and gives the collector a growing heap to walk.
    sched = make_scheduler(policy, model="fsdd-cnn")
    watched = []
    for j in range(300):
        items = [Pending(f"j{j}", str(r), "app", "fsdd-cnn", 0.001 * j, 0.001 * j + 60.0, payload=_Body(),
                         seq=4 * j + r) for r in range(4)]
        watched += [weakref.ref(p.payload) for p in items]
        sched.add_many(items, 0.001 * j)
        del items
        while len(sched) >= 8:
            decision = sched.next_batch(0.001 * j, 8)
            assert decision.batch
            del decision
    for _ in range(1_000):
        if not len(sched):
            break
        decision = sched.next_batch(0.5, 8)
        assert decision.batch or decision.expired
        del decision
    assert not len(sched)
    gc.collect()
    assert sum(ref() is not None for ref in watched) == 0
