"""The load summary from synthetic results (pure)."""

from __future__ import annotations

import pytest

from adaserve.broker.messages import Result, Timings
from adaserve.loadgen.summary import LoadSummary, nothing_completed, summarize
from adaserve.producers.results import JobResult


def res(job: str, rid: str, status: str, total: float, pred: int | None = None, reason: str = "") -> Result:
    return Result(job_id=job, request_id=rid, status=status, prediction=pred, reason=reason,
                  timings=Timings(submitted_ms=0, finished_ms=total, total_ms=total))


def job(job_id: str, *results: Result, deadline: float = 100) -> JobResult:
    return JobResult(job_id=job_id, app="a", model="m", run="r", deadline_ms=deadline, submitted_ms=0,
                     results=tuple(results))


def test_summary_counts_rates_and_accuracy() -> None:
    results = [
        job("j1", res("j1", "0", "completed", 10, 3), res("j1", "1", "completed", 150, 4)),  # one late
        job("j2", res("j2", "0", "expired", 100, reason="deadline"), res("j2", "1", "completed", 20, 5)),
        job("j3", res("j3", "0", "rejected", 1, reason="unknown_model")),
    ]
    labels = {("j1", "0"): 3, ("j1", "1"): 0, ("j2", "1"): 5}
    s = summarize(results, run="r", model="m", pattern="constant", jobs=4, submitted=7, duration_s=2.0,
                  elapsed_s=4.0, deadline_ms=100, labels=labels)
    assert (s.submitted, s.completed, s.expired, s.rejected, s.failed, s.unfinished) == (7, 3, 1, 1, 0, 2)
    assert s.finish_rate == pytest.approx(2 / 7)  # j1/0 and j2/1 within 100 ms
    assert s.accuracy == pytest.approx(2 / 3)
    assert s.p50_ms == 20 and s.p99_ms == pytest.approx(20 + 0.98 * 130)
    assert s.throughput_rps == pytest.approx(3 / 4.0) and s.offered_jobs_per_s == 2.0
    assert s.reasons == {"deadline": 1, "unknown_model": 1}


def test_the_steady_window_counts_only_the_jobs_submitted_in_it() -> None:
    early = job("e", res("e", "0", "completed", 10), res("e", "1", "completed", 10))
    later = job("l", res("l", "0", "completed", 10), res("l", "1", "completed", 150))
    kw = dict(run="r", model="m", pattern="constant", jobs=3, submitted=6, duration_s=3.0, elapsed_s=3.0,
              deadline_ms=100)
    # 4 requests were due in the window: the later job's 2 plus those of a job with no result
    s = summarize([early, later], steady=({"l", "lost"}, 4), **kw)  # type: ignore[arg-type]
    assert s.finish_rate == pytest.approx(3 / 6)
    assert s.steady_finish_rate == pytest.approx(1 / 4)
    assert summarize([early, later], **kw).steady_finish_rate is None  # type: ignore[arg-type]


def test_summary_of_nothing() -> None:
    s = summarize([], run="r", model="m", pattern="poisson", jobs=0, submitted=0, duration_s=1.0,
                  elapsed_s=0.0, deadline_ms=100)
    assert s.finish_rate == 0 and s.p50_ms is None and s.accuracy is None and s.throughput_rps == 0


def test_job_result_conveniences() -> None:
    j = job("j", res("j", "0", "completed", 10, 1), res("j", "1", "completed", 90, 2))
    assert j.ok and j.deadline_met and j.latency_ms == 90 and j.on_time == 2 and j.predictions == [1, 2]
    late = job("j", res("j", "0", "completed", 10, 1), res("j", "1", "completed", 90, 2), deadline=50)
    assert late.ok and not late.deadline_met and late.on_time == 1


def test_generated_tokens_are_counted_for_generation_runs() -> None:
    import numpy as np

    from adaserve.broker import Tensor

    def gen(rid: str, n: int) -> Result:
        return res("j", rid, "completed", 10).model_copy(
            update={"outputs": {"tokens": Tensor.from_numpy(np.zeros(n, np.int64))}})

    s = summarize([job("j", gen("0", 16), gen("1", 4))], run="r", model="lm", pattern="constant", jobs=1,
                  submitted=2, duration_s=1.0, elapsed_s=2.0, deadline_ms=100, generation=True)
    assert s.generated_tokens == 20 and s.tokens_per_s == pytest.approx(10.0)
    plain = summarize([job("j", res("j", "0", "completed", 10, 3))], run="r", model="m", pattern="constant",
                      jobs=1, submitted=1, duration_s=1.0, elapsed_s=1.0, deadline_ms=100)
    assert plain.generated_tokens is None and plain.tokens_per_s is None


def test_a_forward_run_is_summarised_from_the_maps_without_building_results() -> None:
    maps = [res("j", rid, st, total, pred, reason).model_dump(mode="python")
            for rid, st, total, pred, reason in (("0", "completed", 10, 3, ""), ("1", "completed", 150, 4, ""),
                                                 ("2", "expired", 100, None, "deadline"))]
    lazy = JobResult(job_id="j", app="a", model="m", run="r", deadline_ms=100, submitted_ms=0, maps=maps)
    kw = dict(run="r", model="m", pattern="constant", jobs=1, submitted=3, duration_s=1.0, elapsed_s=1.0,
              deadline_ms=100, labels={("j", "0"): 3, ("j", "1"): 0})
    s = summarize([lazy], **kw)  # type: ignore[arg-type]
    assert lazy._results is None  # the ~60 µs a request of validating Result objects was not paid
    eager = summarize([job("j", *(Result.model_validate(m) for m in maps))], **kw)  # type: ignore[arg-type]
    assert s == eager
    assert (s.completed, s.expired, s.finish_rate, s.accuracy, s.reasons) == (2, 1, 1 / 3, 0.5, {"deadline": 1})
    assert [o.request_id for o in lazy.outcomes] == ["0", "1", "2"]


def _summary(*results: Result) -> LoadSummary:
    return summarize([job("j", *results)], run="r", model="effnet-lite0", pattern="poisson", jobs=1,
                     submitted=len(results), duration_s=1.0, elapsed_s=1.0, deadline_ms=100, labels=None)


def test_a_run_that_completed_nothing_says_why_and_what_to_do() -> None:
    unknown = res("j", "r0", "rejected", 1, reason="unknown_model: no live worker serves model 'effnet-lite0'")
    assert "adaserve models build --only effnet-lite0" in str(nothing_completed(_summary(unknown, unknown)))
    late = res("j", "r0", "expired", 1, reason="deadline")
    assert "1 ended with: deadline" in str(nothing_completed(_summary(late)))
    assert nothing_completed(_summary(res("j", "r0", "completed", 1, pred=1), late)) is None
