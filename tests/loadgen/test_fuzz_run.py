"""Hostile entries at a real planner and a real worker (fsdd-cnn), valid jobs in between: both
processes live on, every valid job completes, and every hostile entry is accounted for."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaserve.broker import connect, load_limits, load_settings
from adaserve.loadgen.fuzz import KINDS, Fuzzer
from adaserve.loadgen.fuzz_run import FuzzRun
from adaserve.models.datasets import sample_inputs
from adaserve.stack import Stack

pytestmark = pytest.mark.slow
MODEL = "fsdd-cnn"
LIMIT = 256 * 1024  # small enough that the entries beyond the byte limit stay cheap


@pytest.fixture
def stack(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    monkeypatch.setenv("ADASERVE_LIMIT_MAX_MESSAGE_BYTES", str(LIMIT))  # the children read it too
    settings = load_settings(redis_url=redis_url, namespace="fz" + uuid.uuid4().hex[:8], data_dir=tmp_path)
    s = Stack(settings, cpu_workers=1, gpu_worker=False, worker_threads=1, log_dir=tmp_path / "logs")
    with s:
        s.wait_ready(120)
        yield s
    r = connect(settings)
    keys = list(r.scan_iter(match="{" + settings.namespace + "}:*"))
    if keys:
        r.delete(*keys)
    r.close()


def test_hostile_entries_are_all_rejected_while_valid_jobs_complete(stack: Stack) -> None:
    inputs, _ = sample_inputs(MODEL, 64, seed=7)
    fuzzer = Fuzzer(5, model=MODEL, inputs={"audio": ((1, 32, 32), "float32")}, reply_to="fuzz-reply",
                    limits=load_limits())
    run = FuzzRun(stack.settings, fuzzer, model=MODEL, inputs=inputs, valid_every=100, stall_s=15.0,
                  alive=stack.check)
    report = run.run(5000, baseline_jobs=5)
    stack.check()  # the planner and the worker are still running
    assert all(proc.poll() is None for _, proc in stack.children)
    assert not report.stalled and report.unaccounted == 0 and report.wrong == 0, report.kinds
    assert sum(k["sent"] for k in report.kinds.values()) == 5000
    assert all(k["dead_lettered"] == k["sent"] for k in report.kinds.values())
    assert all(k["results"] == k["owed_results"] for k in report.kinds.values())
    assert sum(k["rejected"] for k in report.kinds.values()) > 2000
    assert len(report.kinds) >= len(KINDS) - 3  # the rarest kinds may not come up in 5,000
    assert report.kinds["non_finite"]["reasons"] == {"non_finite": report.kinds["non_finite"]["sent"]}
    assert report.valid_before["finish_rate"] == 1.0
    assert report.valid_during["requests"] == 4 * 50 and report.valid_during["finish_rate"] == 1.0
