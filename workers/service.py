"""The worker process: read batches of a pool, run them, publish results, keep heartbeating.

Three threads form a pipeline so the device never waits on the network: the reader (XREADGROUP
and decoding, plus reclaiming), the executor (the caller of ``run``; runtimes release the GIL),
and the publisher (results, the finaliser call). At most ``slots`` batches are in the pipeline.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import redis

from adaserve.broker.clock import ServerClock
from adaserve.broker.connection import connect
from adaserve.broker.errors import ConfigError, ModelLoadError, ModelNotFound
from adaserve.broker.keys import Keys
from adaserve.broker.outage import Outage, ride_out
from adaserve.broker.probe import probe
from adaserve.broker.settings import Limits, Settings, default_limits
from adaserve.broker.streams import ensure_group
from adaserve.workers.config import WorkerConfig
from adaserve.workers.execute import Executor
from adaserve.workers.gpu import GpuMonitor
from adaserve.workers.heartbeat import Heartbeat
from adaserve.workers.idle_reruns import IdleReruns
from adaserve.workers.pipeline import Reader, Work, publish_loop
from adaserve.workers.publish import Publisher
from adaserve.workers.reclaim import Reclaimer
from adaserve.workers.runners import Loader, RunnerCache
from adaserve.workers.slots import Slots

log = logging.getLogger(__name__)


class Worker:
    """One consumer of ``Keys(ns).batches(pool)``; ``run(stop)`` serves until ``stop`` is set.

    ``load`` and ``available`` default to the model runtimes; tests pass their own.
    """

    def __init__(
        self, settings: Settings, config: WorkerConfig | None = None, *, load: Loader | None = None,
        available: Callable[[Path], list[str]] | None = None, limits: Limits | None = None,
    ) -> None:
        self.settings = settings
        self.config = config or WorkerConfig()
        self.id = self.config.worker_id()
        self.pool = self.config.pool
        self.device = self.config.resolved_device
        self.stream = Keys(settings.namespace).batches(self.pool)
        self._load = load
        self._available = available
        self._limits = limits or default_limits()
        self.clock = ServerClock()
        self.slots = Slots(self.config.slots)
        self.ready = threading.Event()
        self._advertised: list[str] = []
        self._started = False
        self.runners: RunnerCache | None = None
        self._heartbeat: Heartbeat | None = None
        # one per worker, shared by its threads, so that an outage is told once
        self.outage = Outage(f"worker {self.id}", max_s=settings.max_outage_s, logger=log)

    def start(self, on_load: Callable[[str, int, int], None] | None = None, *,
              stop: threading.Event | None = None) -> None:
        """Connect, check the device, load the models and announce the worker (idempotent). A
        broker that is not there yet is waited for (until ``stop`` or ``max_outage_s``)."""
        if self._started:
            return
        if self.device == "gpu":
            _require_gpu()
        self._r = connect(self.settings)
        ride_out(self._join, self.outage, stop=stop)
        load = self._load
        if load is None:
            from adaserve.workers.runtime import load_runner

            load = load_runner
        memory_mb = self.config.memory_mb or self.settings.worker_memory_mb
        self.runners = RunnerCache(load, device=self.device, data_dir=self.settings.data_dir,
                                   threads=self.config.threads, io_binding=self.config.io_binding,
                                   memory_bytes=memory_mb * 2**20 if memory_mb else None)
        self._advertised = self._preload(on_load)
        gpu = GpuMonitor.open() if self.device == "gpu" else None
        self._heartbeat = Heartbeat(self.settings, worker=self.id, pool=self.pool, device=self.device,
                                    slots=self.slots, models=self.models, clock=self.clock, gpu=gpu,
                                    inputs=self.runners.inputs, outage=self.outage,
                                    memory_mb=memory_mb)
        ride_out(self._heartbeat.beat, self.outage, stop=stop)
        self._heartbeat.start()
        self._started = True
        log.info("worker %s serving pool %s on %s with %d slot(s); models: %s", self.id, self.pool,
                 self.device, self.slots.total, ", ".join(self._advertised) or "none yet")

    def _join(self) -> None:
        probe(self._r)  # XAUTOCLAIM and friends: refuse an unsuitable server before taking work
        ensure_group(self._r, self.stream, self.pool)
        self.clock.sync(self._r)

    def models(self) -> list[str]:
        loaded = self.runners.models() if self.runners is not None else []
        return sorted(set(self._advertised) | set(loaded))

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, then finish every batch already read and leave."""
        self.start(stop=stop)
        assert self.runners is not None and self._heartbeat is not None
        executor = Executor(self.runners, self.clock, max_output_elements=self.config.max_output_elements)
        reruns = IdleReruns(self._r, self.settings.namespace, budget=self.config.rerun_budget)
        publisher = Publisher(self._r, self.settings, worker=self.id, pool=self.pool, device=self.device,
                              clock=self.clock, limits=self._limits, outage=self.outage, stop=stop)
        reclaimer = Reclaimer(self._r, self.settings, pool=self.pool, worker=self.id)
        # SimpleQueue's put and get are C calls; Queue wraps each hand-off in a Python Condition
        # (a cross-thread round trip measured 25.5 µs of CPU with Queue, 11.6 with SimpleQueue)
        todo: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        done: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        reader = Reader(self._r, self.settings, pool=self.pool, worker=self.id, slots=self.slots,
                        limits=self._limits, reclaimer=reclaimer, clock=self.clock, todo=todo, done=done,
                        outage=self.outage)
        threads = [threading.Thread(target=reader.loop, args=(stop,), name=f"reader-{self.id}", daemon=True),
                   threading.Thread(target=publish_loop, args=(publisher, self.slots, done),
                                    name=f"publisher-{self.id}", daemon=True)]
        for t in threads:
            t.start()
        self.ready.set()
        drain = threading.Thread(target=self._announce_drain, args=(stop,), daemon=True)
        drain.start()
        try:
            while True:
                try:
                    # Never block for good: CPython runs a signal handler only between bytecodes,
                    # so a SIGTERM landing just as this thread enters the wait would otherwise
                    # sit unhandled until the next batch (seen: an idle worker ignoring SIGTERM).
                    work = todo.get(timeout=reruns.wait_s(0.25))
                except queue.Empty:
                    reruns.run_one(self.runners)
                    continue
                if work is None:
                    break
                if work.batch is not None and work.reject is None:
                    try:
                        work.outcome = executor.run(work.batch)
                    except Exception as exc:
                        log.exception("batch %s could not be executed", work.batch.id)
                        work.reject = ("runtime_error", f"{type(exc).__name__}: {exc}")
                    else:
                        reruns.offer(work.batch)
                done.put(work)
        finally:
            stop.set()
            done.put(None)
            for t in threads:
                t.join()
            drain.join()  # its beat must land before the goodbye, or it would re-register us
            self._heartbeat.stop(goodbye=True)
            self._r.close()
            log.info("worker %s stopped", self.id)
        if reader.gave_up is not None:
            raise reader.gave_up

    def _announce_drain(self, stop: threading.Event) -> None:
        """Tell planners at once that this worker takes no more batches (slots 0 while draining)."""
        stop.wait()
        if self._heartbeat is not None:
            self._heartbeat.draining = True
            try:
                self._heartbeat.beat()
            except redis.RedisError as exc:
                log.warning("could not announce draining: %s", exc)

    def _preload(self, on_load: Callable[[str, int, int], None] | None) -> list[str]:
        assert self.runners is not None
        asked = self.config.models
        if asked is None:
            try:
                models = list((self._available or _available)(self.settings.data_dir))
            except Exception as exc:
                log.warning("could not list the available models: %s", exc)
                models = []
        else:
            models = list(asked)
        loaded: list[str] = []
        for i, name in enumerate(models):
            if on_load is not None:
                on_load(name, i, len(models))
            if not self.config.preload:
                loaded.append(name)
                continue
            try:
                self.runners.get(name, "default")
                loaded.append(name)
            except (ModelNotFound, ModelLoadError) as exc:
                if asked is not None:
                    raise ConfigError(f"cannot serve model {name!r}: {exc}") from exc
                log.warning("skipping model %s: %s", name, exc)
        if on_load is not None:
            on_load("", len(models), len(models))
        return loaded


def _available(data_dir: Path) -> list[str]:
    from adaserve.workers.runtime import available_models

    return list(available_models(data_dir))


def _require_gpu() -> None:
    from adaserve.workers.runtime.base import check_cuda

    try:
        check_cuda()
    except Exception as exc:
        raise ConfigError(f"pool 'gpu' needs a CUDA-enabled onnxruntime and a visible GPU: {exc}") from None
