import numpy as np
import pytest

from adaserve.broker.events import EVENT_ADAPTER, OrlojGrouped
from adaserve.planner.core import Pending, Scheduler
from adaserve.planner.orloj import AppGroups, BatchLatencyFit, ExecDistributions, OrlojScheduler, group_apps
from adaserve.planner.sim.engine import simulate


def _make() -> OrlojScheduler:
    prior = np.random.default_rng(0).uniform(0.004, 0.04, 400)
    return OrlojScheduler(distributions=ExecDistributions(prior_samples=prior),
                          latency=BatchLatencyFit(0.002, 0.25), sizes=tuple(range(1, 17)))


def _batch_s(k: int, longest: float) -> float:
    return 0.002 + 0.25 * k * longest


def _workload(means_s: dict[str, float], rate: float, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    names = list(means_s)
    apps = [names[i] for i in rng.integers(len(names), size=n)]
    exec_s = np.asarray([means_s[a] * rng.uniform(0.9, 1.1) for a in apps])
    return arrivals, exec_s, apps


def test_apps_are_grouped_by_cost_within_the_ratio() -> None:
    assert group_apps({"a": 1.0, "b": 1.5, "c": 4.0, "d": 13.0}, 3.0) == [("a", "b"), ("c",), ("d",)]
    assert group_apps({"x": 2.0, "y": 5.9}, 3.0) == [("x", "y")]
    assert group_apps({}, 3.0) == []


def test_is_a_scheduler_and_checks_its_settings() -> None:
    assert isinstance(AppGroups(_make), Scheduler)
    with pytest.raises(ValueError):
        AppGroups(_make, ratio=1.0)
    with pytest.raises(ValueError):
        AppGroups(_make, min_batches=0)


@pytest.mark.parametrize("means", [{"a": 0.02}, {"a": 0.020, "b": 0.026}])
def test_apps_that_cost_alike_get_the_plain_orlojs_decisions(means: dict[str, float]) -> None:
    arrivals, exec_s, apps = _workload(means, 120.0, 1500)
    plain = simulate(_make(), arrivals, exec_s, apps, 0.15, batch_s=_batch_s)
    groups = AppGroups(_make, model="m")
    grouped = simulate(groups, arrivals, exec_s, apps, 0.15, batch_s=_batch_s)
    assert groups.groups == [] and groups.drain_events() == []
    assert grouped.met_bits == plain.met_bits and grouped.batches == plain.batches


def test_apps_of_very_different_costs_are_batched_apart_and_every_request_ends() -> None:
    arrivals, exec_s, apps = _workload({"short": 0.004, "long": 0.032}, 150.0, 3000)
    groups = AppGroups(_make, model="lm")
    res = simulate(groups, arrivals, exec_s, apps, 0.3, batch_s=_batch_s)
    assert res.met + res.late + res.expired == res.requests == 3000
    assert sorted(groups.groups) == [("long",), ("short",)]
    events = groups.drain_events()
    assert [name for name, _ in events] == ["orloj.grouped"] and groups.drain_events() == []
    ev = EVENT_ADAPTER.validate_python({"ts": 1.0, "event": "orloj.grouped", **events[0][1]})
    assert isinstance(ev, OrlojGrouped) and ev.model == "lm" and sorted(ev.groups) == ["long", "short"]
    assert ev.costs["long"] > 3.0 * ev.costs["short"]
    # from now on a batch holds one group's requests, and the most urgent group's goes first
    now = float(arrivals[-1]) + 1.0
    for i in range(8):
        groups.add(Pending(f"s{i}", "0", "short", "m", now, now + 0.5, seq=i), now)
        groups.add(Pending(f"l{i}", "0", "long", "m", now, now + 0.4, seq=100 + i), now)
    first = groups.next_batch(now, 32)
    assert first.batch and {p.app for p in first.batch} == {"long"}
    second = groups.next_batch(now, 32)
    assert second.batch and {p.app for p in second.batch} == {"short"}
    assert len(groups) == 16 - len(first.batch) - len(second.batch)


def test_the_split_serves_a_cheap_app_beside_a_dear_one_better() -> None:
    arrivals, exec_s, apps = _workload({"short": 0.004, "long": 0.032}, 150.0, 3000)
    plain = simulate(_make(), arrivals, exec_s, apps, 0.3, batch_s=_batch_s)
    grouped = simulate(AppGroups(_make), arrivals, exec_s, apps, 0.3, batch_s=_batch_s)
    assert grouped.met > plain.met


def test_apps_past_the_first_sixty_four_are_not_measured() -> None:
    from adaserve.planner.core import Feedback
    from adaserve.planner.orloj.groups import MAX_APPS

    groups = AppGroups(_make, min_batches=1)
    for i in range(100):  # app names are the producers': a hundred of them must not grow the planner
        for _ in range(3):
            groups.observe(Feedback("m", 4, 0.01 * (1 + i % 2), (f"app{i}",) * 4, (), "cpu"))
    assert len(groups.costs()) == MAX_APPS
