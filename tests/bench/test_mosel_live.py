"""The live MOSEL bench's parts: the job mix, the figures from results, CPU accounting, what the
telemetry says about batch times, and the matrix solved into the planner's cache."""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pytest
import redis

from adaserve.bench.mosel_live import (
    LiveConfig,
    LiveJob,
    cpu_seconds,
    cpu_used,
    end_state,
    ensure_matrix,
    figures,
    paired,
    pipeline_policy,
    plan_jobs,
    spread,
    stages,
    telemetry,
)
from adaserve.broker import Keys, Settings
from adaserve.broker.codec import encode
from adaserve.broker.events import BatchFinished, PlannerReplanned
from adaserve.broker.messages import Plan, Result, Timings
from adaserve.broker.profiles import Profile
from adaserve.broker.streams import publish
from adaserve.planner.mosel.costs import SubsetCosts
from adaserve.planner.mosel.matrix import StrategyMatrix, matrix_path
from adaserve.planner.mosel.store import SHIPPED_DIR, ProfileSource, cached_matrix
from adaserve.producers.results import JobResult


def test_the_job_mix_is_reproducible_and_within_bounds() -> None:
    cfg = LiveConfig(seconds=4.0)
    a = plan_jobs(cfg, 50.0, (0.67, 0.96), 512, None)
    assert a == plan_jobs(cfg, 50.0, (0.67, 0.96), 512, None) and len(a) == 200
    assert all(1 <= j.size <= 32 and len(j.picks) == j.size and 0.67 <= j.floor <= 0.96 for j in a)
    assert a[0].offset_s == 0.0 and all(x.offset_s <= y.offset_s for x, y in itertools.pairwise(a))
    assert 10 < np.mean([j.size for j in a]) < 22


def test_deadlines_follow_the_all_modality_latency_above_the_least_deadline() -> None:
    cfg = LiveConfig(seconds=2.0, deadline_ms=100.0)
    jobs = plan_jobs(cfg, 50.0, (0.7, 0.97), 512, None, alone_ms=lambda n: 1.5 * n)
    assert jobs == plan_jobs(cfg, 50.0, (0.7, 0.97), 512, None, alone_ms=lambda n: 1.5 * n)
    for j in jobs:  # slo_mult (10) x 1.5 ms per request, never under 100 ms
        assert j.deadline_ms == max(100.0, 15.0 * j.size)
    assert any(j.deadline_ms > 100.0 for j in jobs) and any(j.deadline_ms == 100.0 for j in jobs)
    assert all(j.deadline_ms == 0.0 for j in plan_jobs(cfg, 50.0, (0.7, 0.97), 512, None))


def _result(jid: str, k: int, variant: str, acc: float | None, pred: int, total_ms: float,
            dispatched_ms: float | None = None) -> Result:
    return Result(job_id=jid, request_id=str(k), status="completed", prediction=pred, job_accuracy=acc,
                  plan=Plan(variant=variant, modalities=tuple(variant.split("+"))),
                  timings=Timings(submitted_ms=0.0, dispatched_ms=dispatched_ms, finished_ms=total_ms,
                                  total_ms=total_ms))


def _job(jid: str, results: list[Result]) -> JobResult:
    return JobResult(jid, "default", "av-digits", "", 100.0, 0.0, tuple(results))


def test_figures_count_floor_violations_subsets_and_measured_accuracy() -> None:
    labels = np.array([1, 2, 3, 4])
    by_id = {"ok": LiveJob(0.0, 2, 0.8, (0, 1)), "low": LiveJob(0.0, 2, 0.9, (2, 3))}
    results = [
        _job("ok", [_result("ok", 0, "audio+image", 0.85, 1, 10.0, 4.0), _result("ok", 1, "image", 0.85, 2, 12.0, 3.0)]),
        _job("low", [_result("low", 0, "image", 0.67, 0, 150.0), _result("low", 1, "image", 0.67, 4, 150.0)]),
    ]
    f = figures(results, by_id, labels, span_s=2.0)
    assert f["floor_violations"] == 1 and f["deadline_met"] == 1 and f["slo_violation_ratio"] == 0.5
    assert f["requests_by_subset"] == {"audio+image": 1, "image": 3}
    assert f["measured_accuracy"] == 0.75 and f["jobs_measured_below_floor"] == 1
    assert f["throughput_jobs_s"] == 0.5 and f["accuracy"]["min"] == 0.67
    assert f["dispatch_wait_ms"] == {"p50": 3.0, "p95": 3.0}  # "low" was never dispatched
    assert f["end_states"] == {"met": 1, "late": 1, "no_result": 0}


def _ended(jid: str, reasons: list[str]) -> JobResult:
    return _job(jid, [Result(job_id=jid, request_id=str(k), status="expired" if "deadline" in why else "rejected",
                             reason=why, timings=Timings(submitted_ms=0.0, finished_ms=1.0, total_ms=1.0))
                      for k, why in enumerate(reasons)])


def test_end_states_tell_expiry_from_refusal() -> None:
    assert end_state(_ended("a", ["deadline: cannot finish in time"])) == "expired"
    assert end_state(_ended("b", ["overloaded: 130 requests queued"])) == "refused"
    assert end_state(_ended("c", ["accuracy_floor: no mix"])) == "other"
    by_id = {k: LiveJob(0.0, 1, 0.8, (0,)) for k in "abcd"}
    f = figures([_ended("a", ["deadline: x"]), _ended("b", ["overloaded: y"])], by_id, np.array([0]), 1.0)
    assert f["end_states"] == {"expired": 1, "refused": 1, "no_result": 2}


def test_spread_gathers_each_point_over_repeats() -> None:
    def point(rate: float, v: float, jct: float | None) -> dict[str, object]:
        return {"offered_jobs_s": rate, "slo_violation_ratio": v, "throughput_jobs_s": 10 * v,
                "jct_ms": {"p50": jct}}

    reps = [{"none": [point(20.0, 0.3, 5.0), point(40.0, 0.5, 7.0)]},
            {"none": [point(20.0, 0.1, None), point(40.0, 0.6, 9.0)]}]
    got = spread(reps)  # type: ignore[arg-type]
    assert got["none"]["20"] == {"slo_violation_ratio": [0.1, 0.3], "throughput_jobs_s": [1.0, 3.0],
                                 "jct_p50_ms": [5.0]}
    assert got["none"]["40"]["slo_violation_ratio"] == [0.5, 0.6]


def test_cpu_seconds_read_a_process_and_none_for_a_gone_one() -> None:
    me = cpu_seconds(os.getpid())
    assert me is not None and me > 0
    t = time.process_time()
    while time.process_time() - t < 0.05:
        pass
    assert (cpu_seconds(os.getpid()) or 0.0) > me
    assert cpu_seconds(2**22 + 12345) is None  # above Linux's pid_max: never a process


def test_cpu_used_per_request_and_cores() -> None:
    got = cpu_used({"worker": 1.0, "planner": 2.0, "gone": 0.0}, {"worker": 3.0, "planner": 2.5}, 1000, 4.0)
    assert got["ms_per_request"] == {"worker": 2.0, "planner": 0.5}
    assert got["cores"] == {"worker": 0.5, "planner": 0.125}
    assert got["total_ms_per_request"] == 2.5


def test_telemetry_sets_live_batch_times_against_the_profile(settings: Settings, r: redis.Redis[bytes]) -> None:
    costs = SubsetCosts.from_profile(Profile.from_json((SHIPPED_DIR / "av-video.json").read_bytes()))
    stream = Keys(settings.namespace).telemetry
    since = time.time() * 1000.0 - 1000.0
    for variant, size, ms in (("audio+video", 16, 30.0), ("audio+video", 8, 10.0), ("audio", 16, 1.0)):
        publish(r, stream, encode(BatchFinished(ts=since, batch_id="b", pool="cpu", worker="w", model="av-video",
                                                variant=variant, size=size, exec_ms=ms, items=[])))
    publish(r, stream, encode(PlannerReplanned(ts=since, job_id="j", model="av-video", before="audio:1",
                                               after="expired", reason="expire")))
    got = telemetry(settings, since, costs)
    assert got["replanned_events"] == 1
    av = got["batches_by_subset"]["audio+video"]
    assert av["batches"] == 2 and av["requests"] == 24 and av["exec_ms"] == 40.0
    profiled = costs.run_ms(costs.subsets.index("audio+video"), 16) + costs.run_ms(costs.subsets.index("audio+video"), 8)
    assert av["exec_over_profile"] == pytest.approx(40.0 / profiled)
    assert got["batches_by_subset"]["audio"]["requests"] == 16


@pytest.mark.slow
def test_the_matrix_is_solved_into_the_planners_cache_once(settings: Settings) -> None:
    profile = Profile.from_json((SHIPPED_DIR / "av-video.json").read_bytes())
    src = ProfileSource(profile, "test", None)
    cache = settings.data_dir / "mosel"
    assert cached_matrix(src, cache, max_size=32, step=0.01) is None
    ensure_matrix(settings, profile)
    m = cached_matrix(src, cache, max_size=32, step=0.01)
    assert m is not None and m.entries == StrategyMatrix.load(matrix_path(SHIPPED_DIR / "av-video.json")).entries
    stamp = {p: p.stat().st_mtime_ns for p in cache.iterdir()}
    ensure_matrix(settings, profile)  # found: not solved again
    assert {p: p.stat().st_mtime_ns for p in cache.iterdir()} == stamp


def test_paired_counts_cells_ahead_of_the_baseline_and_the_sign_test() -> None:
    def point(rate: float, v: float, thr: float) -> dict[str, object]:
        return {"offered_jobs_s": rate, "slo_violation_ratio": v, "throughput_jobs_s": thr}

    reps = [{"none": [point(20, 0.5, 10.0), point(40, 0.8, 8.0)], "aggressive": [point(20, 0.2, 15.0), point(40, 0.6, 8.0)],
             "optimized": [point(20, 0.6, 9.0), point(40, 0.7, 9.0)]},
            {"none": [point(20, 0.4, 10.0), point(40, 0.9, 4.0)], "aggressive": [point(20, 0.3, 12.0), point(40, 0.5, 6.0)],
             "optimized": [point(20, 0.3, 11.0)]}]
    got = paired(reps)  # type: ignore[arg-type]
    assert set(got) == {"aggressive", "optimized"}
    a = got["aggressive"]
    assert a["cells"] == 4 and a["fewer_violations"] == 4 and a["more_throughput"] == 3
    assert a["sign_test_p"] == 1 / 16 and a["median_violation_diff"] == pytest.approx(-0.25)
    assert a["throughput_ratios"] == [1.0, 1.2, 1.5, 1.5]
    o = got["optimized"]  # its second repeat lacks the 40 jobs/s point: three cells
    assert o["cells"] == 3 and o["fewer_violations"] == 2 and o["sign_test_p"] == 0.5


def test_a_shared_label_names_the_policy_with_the_old_correction() -> None:
    assert pipeline_policy("optimized") == ("optimized", "subset")
    assert pipeline_policy("optimized-shared") == ("optimized", "shared")


def test_stages_split_a_job_into_wait_run_and_return() -> None:
    def res(k: int, dispatched: float, finished: float) -> Result:
        return Result(job_id="j", request_id=str(k), status="completed",
                      timings=Timings(submitted_ms=0.0, dispatched_ms=dispatched, finished_ms=finished,
                                      total_ms=finished))

    late = JobResult("j", "default", "av-video", "", 50.0, 0.0, (res(0, 10.0, 40.0), res(1, 12.0, 60.0)))
    got = stages([late])
    assert got["completed"]["jobs"] == 1 and got["late"]["jobs"] == 1
    assert got["late"]["wait_p50"] == 10.0 and got["late"]["run_p50"] == 50.0
    assert got["late"]["deadline_p50"] == 50.0
