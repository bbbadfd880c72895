"""The load generator end to end against a stand-in planner on the real server."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import ConfigError, Settings
from adaserve.loadgen.load import load_options, run_load, schedule


def labelled(model: str, n: int, seed: int) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """Inputs whose first value is a class; the labels disagree with it for every 4th input."""
    rng = np.random.default_rng(seed)
    classes = rng.integers(0, 10, size=n)
    inputs = []
    for c in classes:
        a = rng.standard_normal((40, 32)).astype(np.float32)
        a[0, 0] = c
        inputs.append({"audio": a})
    labels = classes.copy()
    labels[::4] = (labels[::4] + 1) % 10
    return inputs, labels


def test_accounting_accuracy_and_latency(settings: Settings, r, standin) -> None:
    standin()
    opts = load_options(rate=100, duration_s=0.3, requests_per_job=2, pattern="constant", grace_s=5, run="r-1")
    s = run_load(settings, opts, inputs=labelled, progress=False)
    assert s.jobs == 30 and s.submitted == 60
    assert s.completed == 60 and s.expired == s.rejected == s.failed == s.unfinished == 0
    assert s.submitted == s.completed + s.expired + s.rejected + s.failed + s.unfinished
    # 60 requests cycle through 60 inputs; every 4th label is wrong: 15 of 60
    assert s.accuracy == pytest.approx(45 / 60)
    assert s.p50_ms is not None and s.p99_ms is not None and 0 <= s.p50_ms <= s.p99_ms
    assert s.throughput_rps > 0 and s.run == "r-1"
    assert 0 < s.finish_rate <= 1


@pytest.mark.parametrize("budget", [0, 50_000, 1 << 30])
def test_jobs_prepared_before_the_run_or_built_when_due_are_the_same_run(settings: Settings, r, standin,
                                                                         monkeypatch, budget: int) -> None:
    from adaserve.loadgen import load
    from adaserve.producers import Client

    prepared: list[str] = []
    real = Client.prepare

    def counted(self: Client, jobs: list) -> list:
        out = real(self, jobs)
        prepared.extend(p.job_id for p in out)
        return out

    monkeypatch.setattr(Client, "prepare", counted)
    monkeypatch.setattr(load, "PREPARE_BYTES", budget)
    standin()
    opts = load_options(rate=100, duration_s=0.3, requests_per_job=2, pattern="constant", grace_s=5)
    s = run_load(settings, opts, inputs=labelled, progress=False)
    # a job encodes to about 10.3 kB: none, the first five, or all 30 prepared ahead; the rest built when due
    assert len(prepared) == {0: 0, 50_000: 5, 1 << 30: 30}[budget]
    assert (s.submitted, s.completed, s.accuracy) == (60, 60, pytest.approx(45 / 60))


def test_requests_without_result_are_unfinished_and_others_counted(settings: Settings, r, standin) -> None:
    def respond(job, req):
        v = int(next(iter(req.inputs.values())).to_numpy()[0, 0])
        return ("silent", None) if v == 0 else ("expired", None) if v == 1 else ("completed", v)

    standin(respond)
    opts = load_options(rate=200, duration_s=0.1, pattern="constant", grace_s=0.3)
    s = run_load(settings, opts, inputs=labelled, progress=False)
    inputs, _ = labelled(opts.model, 20, 0)
    firsts = [int(x["audio"][0, 0]) for x in inputs]
    assert s.submitted == 20
    assert s.unfinished == firsts.count(0) and s.expired == firsts.count(1)
    assert s.completed == 20 - firsts.count(0) - firsts.count(1)
    assert s.reasons == ({"expired": firsts.count(1)} if firsts.count(1) else {})


def test_the_steady_window_holds_the_jobs_due_in_it(settings: Settings, r, standin) -> None:
    # a stand-in that answers the first 10 jobs' requests only: the window from 0.1 s (jobs 11-30
    # of a constant 100 jobs/s) finished none of its requests
    answered: set[str] = set()

    def respond(job, req):
        if job.id in answered or len(answered) < 10:
            answered.add(job.id)
            return ("completed", 0)
        return ("silent", None)

    standin(respond)
    opts = load_options(rate=100, duration_s=0.3, requests_per_job=2, pattern="constant", grace_s=0.5)
    s = run_load(settings, opts, inputs=labelled, progress=False, steady_from_s=0.1)
    assert s.finish_rate == pytest.approx(20 / 60)
    assert s.steady_finish_rate == 0.0
    assert run_load(settings, opts, inputs=labelled, progress=False).steady_finish_rate is None


def test_schedule_follows_the_pattern() -> None:
    assert len(schedule(load_options(rate=10, duration_s=2, pattern="constant"))) == 20
    a = schedule(load_options(rate=50, duration_s=20, pattern="trace", trace="code"))
    assert len(a) == 1000 and np.all(np.diff(a) >= 0)


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="pattern"):
        load_options(pattern="bursty")
    with pytest.raises(ConfigError, match="rate"):
        load_options(rate=0)
    with pytest.raises(ConfigError, match="generation requests are sent as rows"):
        load_options(model="ee-lm-xs", form="columns")


@pytest.mark.parametrize(("form", "columnar"), [("auto", True), ("columns", True), ("rows", False)])
def test_forward_jobs_go_in_columns_unless_asked_for_rows(settings: Settings, r, standin, form: str,
                                                          columnar: bool) -> None:
    from adaserve.broker import Keys
    from adaserve.broker.codec import unpack
    from adaserve.broker.jobform import is_columnar

    standin()
    opts = load_options(rate=100, duration_s=0.05, requests_per_job=3, pattern="constant", grace_s=5, form=form)
    s = run_load(settings, opts, inputs=labelled, progress=False)
    sent = [unpack(fields[b"m"]) for _, fields in r.xrange(Keys(settings.namespace).jobs)]
    assert sent and all(is_columnar(b) == columnar for b in sent)
    assert (s.submitted, s.completed, s.accuracy) == (15, 15, pytest.approx(11 / 15))
    assert load_options(model="ee-lm-xs").columns is False and load_options(model="ee-lm-xs", form="rows").columns is False


def test_language_models_get_generation_requests_by_default() -> None:
    assert load_options(model="ee-lm-xs").request_kind == "generate"
    assert load_options(model="fsdd-cnn").request_kind == "forward"
    assert load_options(model="ee-lm-s", kind="forward").generation() is None
    assert load_options(model="ee-lm-s", max_new_tokens=8, temperature=0.5).generation() == \
        {"max_new_tokens": 8, "temperature": 0.5}
    with pytest.raises(ConfigError, match="kind"):
        load_options(kind="chat")

