"""A worker killed while it holds a batch: another worker takes the batch over, nothing is lost
and no request gets two results. Real processes (``python -m adaserve worker``), real model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

from adaserve.broker import Keys, Settings

MODEL = "fsdd-cnn"
pytestmark = pytest.mark.slow


def _real_model(settings: Settings) -> None:
    try:
        from adaserve.workers.runtime import available_models

        if MODEL not in available_models(settings.data_dir):
            pytest.skip(f"{MODEL} is not built")
    except NotImplementedError:
        pytest.skip("the model runtimes are not there yet")


def _env(settings: Settings, name: str) -> dict[str, str]:
    env = dict(os.environ)
    sep = "&" if "?" in settings.redis_url else "?"
    # BLOCK 2 s keeps an idle worker inside XREADGROUP nearly all the time, so a batch sent while
    # it is stopped is still delivered to it by the server, as to a worker that died mid-batch.
    # Named connections let the test find this worker's blocked read among the server's clients.
    env.update(ADASERVE_REDIS_URL=f"{settings.redis_url}{sep}client_name={name}", ADASERVE_NAMESPACE=settings.namespace,
               ADASERVE_DATA_DIR=str(settings.data_dir), ADASERVE_HEARTBEAT_S="0.2",
               ADASERVE_BLOCK_MS="2000", ADASERVE_RECLAIM_IDLE_MS="500")
    return env


class Procs:
    def __init__(self, settings: Settings, r: object) -> None:
        self.settings, self.r = settings, r
        self.keys = Keys(settings.namespace)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-m", "adaserve", "worker", "--pool", "cpu", "--name", name,
                              "--models", MODEL, "--threads", "1"],
                             env=_env(self.settings, name), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs[name] = p
        end = time.monotonic() + 90
        while self.r.hget(self.keys.workers, name) is None:  # type: ignore[attr-defined]
            if p.poll() is not None:
                pytest.fail(f"worker {name} exited: {p.stderr.read().decode()}")  # type: ignore[union-attr]
            assert time.monotonic() < end, f"worker {name} never sent a heartbeat"
            time.sleep(0.05)
        return p

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait(10)


@pytest.fixture
def procs(settings: Settings, r: object) -> Iterator[Procs]:
    ps = Procs(settings, r)
    yield ps
    ps.stop_all()


def _held_by(feeder, consumer: str) -> list[str]:
    rows = feeder.r.xpending_range(feeder.keys.batches("cpu"), "cpu", min="-", max="+", count=100,
                                   consumername=consumer)
    return [r["message_id"].decode() for r in rows]


def _blocked_reads(feeder, name: str) -> int:
    """Connections of worker ``name`` waiting inside a blocking XREADGROUP."""
    return sum(1 for c in feeder.r.client_list()
               if c.get("name") == name and c.get("cmd") == "xreadgroup" and "b" in c.get("flags", ""))


def _backlog(feeder) -> int:
    """Batches not yet finished: pending in the group plus not yet delivered."""
    (g,) = feeder.r.xinfo_groups(feeder.keys.batches("cpu"))
    return int(g["pending"]) + int(g["lag"] or 0)


def test_sigkilled_worker_batch_is_reclaimed(settings: Settings, feeder, procs: Procs) -> None:
    from adaserve.models.datasets import sample_inputs

    _real_model(settings)
    rows, labels = sample_inputs(MODEL, 40, seed=0)
    a = procs.start("w-a")
    sent: list[tuple[object, np.ndarray]] = []
    held: list[str] = []
    held_job = ""
    for attempt in range(5):  # a stop that lands between two reads misses; then try again
        assert feeder.wait_for(lambda: _blocked_reads(feeder, "w-a") > 0)
        os.kill(a.pid, signal.SIGSTOP)
        chunk = slice(attempt * 4, attempt * 4 + 4)
        batch, _ = feeder.batch(model=MODEL, rows=rows[chunk])
        feeder.send(batch)
        sent.append((batch, labels[chunk]))
        assert feeder.wait_for(lambda: bool(_held_by(feeder, "w-a")), timeout=1.0) or attempt < 4
        held = _held_by(feeder, "w-a")
        if held:
            held_job = batch.items[0].job_id
            break
        os.kill(a.pid, signal.SIGCONT)
        assert feeder.wait_for(lambda: _backlog(feeder) == 0)
    a.kill()  # SIGKILL while it holds the batch: no goodbye, no ack
    a.wait(10)
    procs.start("w-b")
    for k in range(20, 40, 5):
        batch, _ = feeder.batch(model=MODEL, rows=rows[k:k + 5])
        feeder.send(batch)
        sent.append((batch, labels[k:k + 5]))
    total = sum(len(b.items) for b, _ in sent)
    results = feeder.results(total, timeout=60)
    assert feeder.wait_for(lambda: _backlog(feeder) == 0)

    keys = {(r.job_id, r.request_id) for r in results}
    assert len(results) == total and len(keys) == total  # nothing lost, nothing doubled
    assert all(r.status == "completed" for r in results)
    assert held_job, "w-a never held a batch"
    assert {r.worker for r in results if r.job_id == held_job} == {"w-b"}
    truth = {(b.items[i].job_id, b.items[i].request_id): int(y[i]) for b, y in sent for i in range(len(b.items))}
    accuracy = np.mean([r.prediction == truth[(r.job_id, r.request_id)] for r in results])
    assert accuracy >= 0.8

    b = procs.procs["w-b"]
    b.send_signal(signal.SIGTERM)
    assert b.wait(30) == 0
