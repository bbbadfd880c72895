"""End to end on a GPU: a ``gpu`` pool worker serves real jobs through the CUDA provider and its
heartbeats carry NVML figures. Skipped (with the reason) where no GPU is usable, such as CI."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from adaserve.broker import connect, load_settings
from adaserve.broker.events import WorkerHeartbeat
from adaserve.models.datasets import sample_inputs
from adaserve.producers import Client, make_job
from adaserve.stack import Stack
from adaserve.telemetry.reader import TelemetryReader
from adaserve.workers.runtime import gpu_unavailable

NO_GPU = gpu_unavailable()

pytestmark = [pytest.mark.slow, pytest.mark.skipif(NO_GPU is not None, reason=f"needs a GPU: {NO_GPU}")]


def test_gpu_worker_serves_held_out_jobs_and_reports_nvml(redis_url: str, tmp_path: Path) -> None:
    settings = load_settings(redis_url=redis_url, namespace="gpu" + uuid.uuid4().hex[:8], data_dir=tmp_path,
                             heartbeat_s=0.2, worker_ttl_s=2.0)
    inputs, labels = sample_inputs("ee-audio", 64, seed=1)
    with Stack(settings, cpu_workers=0, gpu_worker=True, log_dir=tmp_path / "logs") as stack:
        stack.wait_ready(120)
        with Client(stack.settings) as c:
            jobs = [c.submit(make_job("ee-audio", list(inputs[i:i + 16]), 10_000.0)).result(60) for i in range(0, 64, 16)]
    results = [res for job in jobs for res in job.results]
    assert [r.status for r in results] == ["completed"] * 64
    assert {r.plan.placement.pool for r in results if r.plan and r.plan.placement} == {"gpu"}
    assert float(np.mean([r.prediction for r in results] == labels)) >= 0.9
    beats = [g.event for g in TelemetryReader(connect(settings), settings).history()
             if isinstance(g.event, WorkerHeartbeat) and g.event.pool == "gpu"]
    assert beats and beats[-1].device == "gpu"
    assert beats[-1].gpu is not None and beats[-1].gpu["memory_total_mb"] > 1000
