"""What one worker process is asked to do (the ``adaserve worker`` options)."""

from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass

from adaserve.broker.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")

# Batches a worker holds at once. Two (one running, one decoded) were not enough for a small model:
# a slot freed by a 2 ms batch waits for the planner to hear of it, decide and send the next
# (5-12 ms of its loop on a busy two-core host, more when it falls behind), so the worker idled
# with work queued at the planner (docs/orloj.md, "Eighth session"). A deeper hold costs little
# since the worker ends unrun the requests that wait out their deadline in it: eight finished more
# than four in 11 of 12 overloaded pairs (docs/orloj.md, "Ninth session"). A worker of long batches
# (a language model) is sent fewer than its slots by the planner (``planner.pools.slot_limit``).
DEFAULT_SLOTS = 8
# Share of a worker's time for re-running served requests alone while it idles (``idle_reruns``).
DEFAULT_RERUN_BUDGET = 0.02


@dataclass(frozen=True)
class WorkerConfig:
    """``pool`` names the batch stream and consumer group; ``device`` defaults from it.

    ``slots`` is how many batches the worker holds at once (read and not yet finished): enough
    that the device keeps running while the planner hears of a finished batch and sends the next
    (``DEFAULT_SLOTS``); more commit requests to this worker earlier than the planner needs to.
    ``models`` limits preloading and what the heartbeat advertises (``None``: every built model);
    a batch for another available model is still served after a lazy load. ``io_binding``: ONNX
    sessions on the GPU run through IO binding (see ``runtime.bound`` for why it is off by default).
    """

    pool: str = "cpu"
    slots: int = DEFAULT_SLOTS
    models: tuple[str, ...] | None = None
    threads: int | None = None
    name: str | None = None
    device: str | None = None
    max_output_elements: int = 1024
    preload: bool = True
    io_binding: bool = False
    memory_mb: int | None = None  # budget for weights + KV cache, advertised to planners
    # share of the worker's time for re-running served requests alone while idle (ORLOJ's
    # per-application distributions, ``idle_reruns``); 0 turns them off
    rerun_budget: float = DEFAULT_RERUN_BUDGET

    def __post_init__(self) -> None:
        if not _NAME.match(self.pool):
            raise ConfigError(f"pool {self.pool!r} must be 1-128 characters of [A-Za-z0-9_.:-]")
        if self.slots < 1:
            raise ConfigError(f"slots must be at least 1, not {self.slots}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads must be at least 1, not {self.threads}")
        if self.name is not None and not _NAME.match(self.name):
            raise ConfigError(f"worker name {self.name!r} must be 1-128 characters of [A-Za-z0-9_.:-]")
        if self.resolved_device not in ("cpu", "gpu"):
            raise ConfigError(f"device must be 'cpu' or 'gpu', not {self.resolved_device!r}")
        if self.memory_mb is not None and self.memory_mb < 1:
            raise ConfigError(f"memory_mb must be at least 1, not {self.memory_mb}")
        if not 0.0 <= self.rerun_budget <= 0.5:
            raise ConfigError(f"rerun_budget must lie in 0..0.5 (a share of the worker's time), not {self.rerun_budget}")
        if self.max_output_elements < 0:
            raise ConfigError("max_output_elements must not be negative")

    @property
    def resolved_device(self) -> str:
        if self.device is not None:
            return self.device
        return "gpu" if self.pool.startswith("gpu") else "cpu"

    def worker_id(self) -> str:
        """The consumer name: given, or unique per process so a restart never inherits a PEL."""
        if self.name:
            return self.name
        host = re.sub(r"[^A-Za-z0-9_.\-]", "-", socket.gethostname())[:40] or "host"
        return f"{self.pool}-{host}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
