import pytest

from adaserve.broker.errors import ConfigError
from adaserve.planner.core import Pending, Scheduler
from adaserve.planner.orloj import OrlojScheduler
from adaserve.planner.policies import POLICIES, make_scheduler
from adaserve.planner.sim.experiment import workload_profile
from adaserve.planner.sim.workloads import paper_workload


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_builds_with_and_without_a_profile(policy: str) -> None:
    w = paper_workload("two-modal")
    for profile in (None, workload_profile(w, "m")):
        s = make_scheduler(policy, model="m", profile=profile)
        assert isinstance(s, Scheduler) and s.name == policy
        s.add(Pending("j", "r", "a", "m", 0.0, 10.0), 0.0)
        d = s.next_batch(0.0, 8)
        assert [p.job_id for p in d.batch] == ["j"]


def test_profile_seeds_orloj() -> None:
    w = paper_workload("static")
    s = make_scheduler("orloj", model="m", profile=workload_profile(w, "m"))
    assert s.dists.snapshot.mean() == pytest.approx(0.070, abs=0.002)  # type: ignore[attr-defined]
    assert s.fit.c1 == pytest.approx(0.25, abs=0.01)  # type: ignore[attr-defined]


def test_options_reach_the_policy() -> None:
    assert make_scheduler("fifo", model="m", batch=3).batch == 3  # type: ignore[attr-defined]
    assert make_scheduler("orloj", model="m", sizes=(1, 4)).sizes == (1, 4)  # type: ignore[attr-defined]
    assert make_scheduler("clockwork", model="m", action_window_s=None).window is None  # type: ignore[attr-defined]


def test_bad_requests_raise_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown policy"):
        make_scheduler("lottery", model="m")
    with pytest.raises(ConfigError, match="bad options"):
        make_scheduler("fifo", model="m", nonsense=1)
    with pytest.raises(ConfigError, match="bad options"):
        make_scheduler("fifo", model="m", batch=0)
    with pytest.raises(ConfigError, match="not 'other'"):
        make_scheduler("orloj", model="other", profile=workload_profile(paper_workload("static"), "m"))


def test_live_orloj_sizes_reach_the_planners_max_batch() -> None:
    from adaserve.planner.config import default_factory
    from adaserve.planner.policies import orloj_sizes, serving_options

    assert orloj_sizes(32) == (*tuple(range(1, 17)), 20, 24, 28, 32)
    assert orloj_sizes(8) == tuple(range(1, 9))
    assert orloj_sizes(30)[-2:] == (28, 30)
    sched = default_factory("orloj", max_batch=24)("m", None)
    assert sched.first.sizes[-1] == 24 and sched.first.min_refresh_s == 1.0  # type: ignore[attr-defined]
    assert isinstance(default_factory("orloj", app_ratio=0)("m", None), OrlojScheduler)
    assert serving_options("edf", 32) == {}
    with pytest.raises(ConfigError):
        orloj_sizes(0)
