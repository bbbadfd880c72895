"""GPU/CPU workers: read plan-tagged batches of a pool, run them, publish results and telemetry.

``Worker(settings, WorkerConfig(pool="cpu")).run(stop_event)`` serves in-process; the
``adaserve worker`` command runs the same class. Model runtimes live in ``adaserve.workers.runtime``.
"""

from adaserve.workers.config import WorkerConfig
from adaserve.workers.execute import BatchOutcome, Executor, ItemOutcome, WireRow
from adaserve.workers.gpu import GpuMonitor
from adaserve.workers.heartbeat import Heartbeat
from adaserve.workers.publish import Publisher
from adaserve.workers.reclaim import Claimed, Reclaimer
from adaserve.workers.runners import Loader, RunnerCache
from adaserve.workers.service import Worker

__all__ = [
    "BatchOutcome", "Claimed", "Executor", "GpuMonitor", "Heartbeat", "ItemOutcome", "Loader",
    "Publisher", "Reclaimer", "RunnerCache", "WireRow",
    "Worker", "WorkerConfig",
]
