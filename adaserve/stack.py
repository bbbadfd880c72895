"""``adaserve up``: the whole pipeline on one machine, as child processes.

With no ``ADASERVE_REDIS_URL`` it starts the embedded server (AOF on, data under the data
directory); then a planner and N CPU workers (plus a GPU worker when a GPU is visible), each a
plain ``python -m adaserve ...`` process so that what runs here is what runs in a container.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import redis

from adaserve.broker import Settings, connect, load_settings
from adaserve.broker.errors import AdaserveError
from adaserve.broker.keys import Keys
from adaserve.broker.settings import settings_env
from adaserve.embedded import EmbeddedServer
from adaserve.workers.config import DEFAULT_SLOTS

log = logging.getLogger("adaserve.stack")


_S = TypeVar("_S", bound="Stack")
_T = TypeVar("_T")

class Stack:
    def __init__(self, settings: Settings, *, cpu_workers: int = 1, gpu_worker: bool | None = None,
                 policy: str = "orloj", worker_threads: int = 0, slots: int = DEFAULT_SLOTS, max_batch: int = 32,
                 log_dir: Path | None = None, split: tuple[str, ...] = (), modality: str = "optimized",
                 persist: bool = True, server_dir: Path | None = None, server_port: int | None = None,
                 planners: int = 1, fsync: str = "everysec") -> None:
        if cpu_workers < 0:
            raise ValueError("cpu_workers must be >= 0")
        if planners < 1:
            raise ValueError("planners must be >= 1")
        self.planners, self.fsync = planners, fsync
        self.settings = settings
        self.cpu_workers, self.policy, self.slots, self.max_batch = cpu_workers, policy, slots, max_batch
        self.worker_threads = worker_threads
        self.split = tuple(split)  # planner --split options, e.g. ("effnet-lite0=gpu:cpu",)
        self.modality = modality  # planner --modality: MOSEL's policy for models with modality subsets
        self.gpu_worker = gpu_worker
        self.persist = persist  # the embedded server's AOF (off only for benchmarks)
        self.server_dir = server_dir or settings.data_dir / "server"
        self.server_port = server_port  # the embedded server's; None: any free port
        self.log_dir = log_dir or settings.data_dir / "logs"
        self.server: EmbeddedServer | None = None
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._env: dict[str, str] = {}
        self._args: dict[str, list[str]] = {}
        self._sigterm: signal.Handlers | None = None

    @property
    def embedded(self) -> bool:
        return self.server is not None

    def start(self: _S) -> _S:
        if not self.settings.redis_url:
            self.server = EmbeddedServer(self.server_dir, port=self.server_port, persist=self.persist,
                                         fsync=self.fsync).start()
            # the children and the stack's own clients over the server's unix socket
            self.settings = load_settings(**{**self.settings.model_dump(), "redis_url": self.server.local_url})
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # every setting, not just where the server is: a stack made with other timings runs its
        # children with them
        env = {**os.environ, **settings_env(self.settings)}
        self._env = env
        self._spawn("planner", self._planner_args(), env)
        for i in range(1, self.planners):
            self._spawn(f"planner-{i}", self._planner_args(), env)
        worker = ["worker", "--pool", "cpu", "--slots", str(self.slots)]
        if self.worker_threads:
            worker += ["--threads", str(self.worker_threads)]
        for i in range(self.cpu_workers):
            self._spawn(f"worker-cpu-{i}", worker, env)
        if self.gpu_worker if self.gpu_worker is not None else _gpu_visible():
            self._spawn("worker-gpu-0", ["worker", "--pool", "gpu", "--slots", str(self.slots)], env)
        return self

    def _planner_args(self) -> list[str]:
        planner = ["planner", "--policy", self.policy, "--max-batch", str(self.max_batch)]
        for spec in self.split:
            planner += ["--split", spec]
        return [*planner, "--modality", self.modality]

    def restart_planner(self, policy: str, timeout_s: float = 15.0) -> None:
        """Replace the planner with one running ``policy``; the server and workers stay up."""
        for i, (name, proc) in enumerate(self.children):
            if name == "planner":
                _stop(proc, timeout_s)
                del self.children[i]
                break
        self.policy = policy
        self._spawn("planner", self._planner_args(), self._env)
        self.wait_planner(timeout_s=max(timeout_s, 30.0))

    def wait_planner(self, timeout_s: float = 30.0) -> None:
        """Block until the planner started last has stepped once (its first report is in the
        planners' hash under its default name, ``planner-<host>-<pid>``). A benchmark's warm-up
        sent at once after a restart waited in the stream while the new process imported, was
        read after its deadlines and taught the policy nothing."""
        name = f"planner-{socket.gethostname()}-{self.child('planner').pid}".encode()
        self._until(lambda r, keys: True if r.hexists(keys.planners, name) else None, timeout_s, 0.05,
                    f"the planner was not up after {timeout_s:.0f} s; see {self.log_dir / 'planner.log'}")

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        out = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "adaserve", *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._args[name] = args  # what ``respawn`` starts again
        self.children.append((name, proc))

    def child(self, name: str) -> subprocess.Popen[bytes]:
        for n, proc in self.children:
            if n == name:
                return proc
        raise KeyError(f"no child named {name!r}; children: {', '.join(n for n, _ in self.children)}")

    def respawn(self, name: str) -> subprocess.Popen[bytes]:
        """Start ``name`` again with its arguments, as a supervisor would after it died."""
        old = self.child(name)
        if old.poll() is None:
            raise AdaserveError(f"{name} is still running (pid {old.pid})")
        self.children = [(n, p) for n, p in self.children if n != name]
        self._spawn(name, self._args[name], self._env)
        return self.child(name)

    def wait_ready(self, timeout_s: float = 120.0) -> int:
        """Block until every worker has sent a heartbeat with its models loaded; returns the count."""
        want = sum(1 for n, _ in self.children if n.startswith("worker"))

        def loaded(r: redis.Redis[bytes], keys: Keys) -> int | None:
            ready = sum(1 for raw in r.hvals(keys.workers) if b"models" in raw and _has_models(raw))
            return ready if ready >= want else None

        return self._until(loaded, timeout_s, 0.1, f"workers not ready after {timeout_s:.0f} s; see logs in {self.log_dir}")

    def _until(self, probe: Callable[[redis.Redis[bytes], Keys], _T | None], timeout_s: float, every_s: float,
               failure: str) -> _T:
        """``probe``'s first answer that is not None, asked every ``every_s`` on a connection of its
        own while the children are checked; ``failure`` raised after ``timeout_s``."""
        r = connect(self.settings)
        keys = Keys(self.settings.namespace)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                self.check()
                got = probe(r, keys)
                if got is not None:
                    return got
                time.sleep(every_s)
        finally:
            r.close()
        raise AdaserveError(failure)

    def check(self) -> None:
        """Restart the embedded server if it died (the children wait the outage out and carry on
        from its AOF); raise when a child has died (its log says why)."""
        if self.server is not None and not self.server.alive():
            log.warning("the embedded server exited (code %s); restarting it from its data in %s",
                        self.server.returncode, self.server.data_dir)
            self.server.start()
        for name, proc in self.children:
            if proc.poll() is not None:
                raise AdaserveError(f"{name} exited with code {proc.returncode}; see {self.log_dir / (name + '.log')}")

    def stop(self, timeout_s: float = 15.0) -> None:
        for _, proc in self.children:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for _, proc in self.children:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.children.clear()
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self: _S) -> _S:
        self._sigterm = _exit_on_sigterm()
        try:
            return self.start()
        except BaseException:
            self.__exit__(None, None, None)  # a half-started stack: what did start is stopped
            raise

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        old, self._sigterm = self._sigterm, None
        if old is not None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the stop short
        try:
            self.stop()
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)


def _exit_on_sigterm() -> signal.Handlers | None:
    """Make SIGTERM unwind the main thread (``SystemExit``) while a stack is open; returns the
    handler to put back, or None when there is nothing to change (not the main thread, or a
    handler of the process's own, such as ``adaserve up``'s, is in place).

    Python's default for SIGTERM ends the process without unwinding, so a benchmark stopped by
    ``kill`` or a timeout left its server, planner and workers running, serving or loading the
    machine it shared with whatever ran next."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    return signal.SIG_DFL


def _stop(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _has_models(raw: bytes) -> bool:
    import msgpack

    try:
        return bool(msgpack.unpackb(raw, raw=False).get("models"))
    except Exception:
        return False


def _gpu_visible() -> bool:
    from adaserve.workers.runtime.base import gpu_present

    return gpu_present()
