import numpy as np
import pytest

from adaserve.planner.core import Decision, Feedback, Pending
from adaserve.planner.policies import make_scheduler
from adaserve.planner.sim.engine import simulate


def _batch_s(k: int, longest: float) -> float:
    return 0.01 + 0.5 * k * longest


def _inputs(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    return np.sort(rng.uniform(0, 20, n)), rng.uniform(0.02, 0.06, n), [f"a{i % 2}" for i in range(n)]


@pytest.mark.parametrize("policy", ["orloj", "fifo", "clipper", "nexus", "clockwork", "edf"])
def test_every_request_ends_once_and_runs_repeat(policy: str) -> None:
    times, exec_s, apps = _inputs()
    runs = [simulate(make_scheduler(policy, model="m"), times, exec_s, apps, 0.3, batch_s=_batch_s) for _ in range(2)]
    assert runs[0] == runs[1]
    r = runs[0]
    assert r.met + r.late + r.expired == r.requests == 400
    assert 0.0 < r.finish_rate <= 1.0 and r.batches > 0 and 0 < r.utilisation <= 1.0


def test_more_workers_finish_more() -> None:
    times, exec_s, apps = _inputs(800)
    times = times / 4  # four times the rate
    one = simulate(make_scheduler("orloj", model="m"), times, exec_s, apps, 0.2, batch_s=_batch_s)
    two = simulate(make_scheduler("orloj", model="m"), times, exec_s, apps, 0.2, batch_s=_batch_s, workers=2)
    assert two.finish_rate > one.finish_rate


def test_batches_run_for_the_max_of_batch_model() -> None:
    seen: list[Feedback] = []

    class Recorder:
        name = "rec"

        def __init__(self) -> None:
            self.q: list[Pending] = []

        def __len__(self) -> int:
            return len(self.q)

        def add(self, item: Pending, now: float) -> None:
            self.q.append(item)

        def next_batch(self, now: float, max_size: int) -> Decision:
            out, self.q = self.q[:max_size], self.q[max_size:]
            return Decision(batch=out)

        def expire(self, now: float) -> list[Pending]:
            return []

        def observe(self, feedback: Feedback) -> None:
            seen.append(feedback)

        def earliest_deadline(self) -> float | None:
            return None

    times = np.array([0.0, 0.0, 0.0])
    res = simulate(Recorder(), times, np.array([0.02, 0.08, 0.04]), ["a", "b", "a"], 1.0, batch_s=_batch_s, max_batch=3)
    assert res.batches == 1 and res.met == 3
    assert seen[0].exec_s == pytest.approx(0.01 + 0.5 * 3 * 0.08)
    assert seen[0].request_exec_s == (0.02, 0.08, 0.04) and seen[0].apps == ("a", "b", "a")


def test_a_policy_that_holds_requests_forever_is_caught() -> None:
    class Hoarder:
        name = "hoard"

        def __len__(self) -> int:
            return 1

        def add(self, item: Pending, now: float) -> None:
            pass

        def next_batch(self, now: float, max_size: int) -> Decision:
            return Decision()

        def expire(self, now: float) -> list[Pending]:
            return []

        def observe(self, feedback: Feedback) -> None:
            pass

        def earliest_deadline(self) -> float | None:
            return None

    with pytest.raises(RuntimeError):
        simulate(Hoarder(), np.array([0.0]), np.array([0.01]), ["a"], 1.0, batch_s=_batch_s)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError):
        simulate(make_scheduler("fifo", model="m"), np.array([0.0]), np.array([]), [], 1.0, batch_s=_batch_s)
    with pytest.raises(ValueError):
        simulate(make_scheduler("fifo", model="m"), np.array([0.0]), np.array([0.1]), ["a"], 0.0, batch_s=_batch_s)
