"""Runners cached per (model, variant), loaded once; failed loads are remembered for a while.

With a memory budget (``--memory-mb``), loading a runner evicts the least recently used others
until the weights held fit (HELIOS: a worker moved to another depth or model does not keep the old
one's layers); a batch still running on an evicted runner holds its own reference and finishes.

A batch naming a model that is not built must not make every following batch pay a disk search,
and a corrupt artifact must not be re-parsed for every batch, hence the negative cache. What a
runner can do (generate, hand on to a next part, its input specs) is read once, when it is
loaded: the executor looks it up in the cached ``Loaded`` instead of asking the runner per batch.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from adaserve.broker.errors import ModelLoadError, ModelNotFound
from adaserve.workers.inputs import Spec, pixel_inputs, specs_of
from adaserve.workers.runtime.base import GenerativeRunner, Runner, SplitPart

log = logging.getLogger(__name__)

Loader = Callable[..., Runner]  # (model, variant, device, data_dir[, threads=]) -> Runner


@dataclass(frozen=True, slots=True)
class Loaded:
    """A loaded runner and its capabilities."""

    runner: Runner
    specs: dict[str, Spec] | None  # per-request specs as the executor checks them; None: unchecked
    generator: GenerativeRunner | None  # the runner itself when it generates tokens from prompts
    next: str | None  # the part that runs next, when the runner is a non-last part of a split model
    pixels: frozenset[str] = frozenset()  # inputs also taken as uint8 pixels (normalised by the runner)

    @classmethod
    def of(cls, runner: Runner) -> Loaded:
        return cls(runner, specs_of(runner), runner if isinstance(runner, GenerativeRunner) else None,
                   runner.next if isinstance(runner, SplitPart) else None, pixel_inputs(runner))


class RunnerCache:
    def __init__(
        self, load: Loader, *, device: str, data_dir: Path, threads: int | None = None,
        retry_s: float = 30.0, io_binding: bool = False, memory_bytes: int | None = None,
    ) -> None:
        self._budget = memory_bytes
        self._used: dict[tuple[str, str], float] = {}  # last use, kept only under a budget
        self._load = load
        self._device = device
        self._data_dir = data_dir
        self._retry_s = retry_s
        self._kwargs: dict[str, object] = {}
        if threads is not None:
            if _accepts(load, "threads"):
                self._kwargs["threads"] = threads
            else:
                log.warning("this runtime does not take a thread count; --threads %d ignored", threads)
        if io_binding:
            if _accepts(load, "io_binding"):
                self._kwargs["io_binding"] = True
            else:
                log.warning("this runtime has no IO binding; --io-binding ignored")
        self._runners: dict[tuple[str, str], Loaded] = {}
        self._failed: dict[tuple[str, str], tuple[float, ModelNotFound | ModelLoadError]] = {}
        self._lock = threading.Lock()

    def get(self, model: str, variant: str = "default") -> Runner:
        """The runner for ``model``/``variant``; raises ``ModelNotFound`` or ``ModelLoadError``."""
        return self.loaded(model, variant).runner

    def is_loaded(self, model: str, variant: str = "default") -> bool:
        return (model, variant) in self._runners

    def loaded(self, model: str, variant: str = "default") -> Loaded:
        """The runner for ``model``/``variant`` with its capabilities; raises like ``get``."""
        key = (model, variant)
        entry = self._runners.get(key)
        if entry is not None:
            if self._budget is not None:
                self._used[key] = time.monotonic()
            return entry
        with self._lock:  # one load per key even if the heartbeat asks at the same time
            entry = self._runners.get(key)
            if entry is not None:
                return entry
            failed = self._failed.get(key)
            if failed is not None and time.monotonic() - failed[0] < self._retry_s:
                raise failed[1]
            try:
                runner = self._load(model, variant, self._device, self._data_dir, **self._kwargs)
                if not isinstance(runner, Runner):  # its capabilities would be guesses
                    raise TypeError(f"the loader returned a {type(runner).__name__}, not a Runner")
                entry = Loaded.of(runner)
            except ModelNotFound as exc:
                err: ModelNotFound | ModelLoadError = exc
            except Exception as exc:
                err = ModelLoadError(f"{model}/{variant}: {type(exc).__name__}: {exc}")
            else:
                self._runners[key] = entry
                # The runner knows the variant "default" stands for; cache it under that name too.
                self._runners.setdefault((model, runner.variant), entry)
                self._failed.pop(key, None)
                if self._budget is not None:
                    self._used[key] = self._used[(model, runner.variant)] = time.monotonic()
                    self._evict(keep=entry)
                return entry
            self._failed[key] = (time.monotonic(), err)
            raise err

    def held_bytes(self) -> int:
        """Weight bytes of the runners held (each once, whatever its aliases); runners that do not
        say (``weight_bytes``) count 0."""
        runners = {id(e.runner): e.runner for e in self._snapshot().values()}
        return sum(int(getattr(r, "weight_bytes", 0)) for r in runners.values())

    def _evict(self, keep: Loaded) -> None:
        assert self._budget is not None
        while self.held_bytes() > self._budget:
            victims = [k for k, e in self._runners.items() if e is not keep]
            if not victims:
                return  # the one just loaded alone exceeds the budget: it is served anyway
            oldest = min(victims, key=lambda k: self._used.get(k, 0.0))
            gone = self._runners[oldest].runner
            for k in [k for k, e in self._runners.items() if e.runner is gone]:
                del self._runners[k]
                self._used.pop(k, None)
            log.info("evicted %s/%s to stay within the memory budget", oldest[0], oldest[1])

    def models(self) -> list[str]:
        return sorted({m for m, _ in self._snapshot()})

    def inputs(self) -> dict[str, dict[str, dict[str, object]]]:
        """model -> input name -> {"shape", "dtype", ...} per request, from the loaded runners'
        specs, for the heartbeat: planners reject requests that do not fit before they share a
        batch. A dimension <= 0 takes any size (up to ``max_length``, when given)."""
        out: dict[str, dict[str, dict[str, object]]] = {}
        for (model, _), entry in sorted(self._snapshot().items()):
            # A runner may add limits of its own to a spec (a language model's context, say).
            extra = entry.runner.input_limits
            for name, (shape, dtype) in (entry.specs or {}).items():
                pixels = {"pixels": "uint8"} if name in entry.pixels else {}
                out.setdefault(model, {}).setdefault(name, {"shape": list(shape), "dtype": dtype, **pixels,
                                                            **extra.get(name, {})})
        return out

    def variants(self) -> list[tuple[str, str]]:
        return sorted(self._snapshot())

    def _snapshot(self) -> dict[tuple[str, str], Loaded]:
        # The heartbeat thread reads while the executor may be loading: a C-level copy is atomic
        # under the GIL, and taking the lock would stall heartbeats for as long as a load lasts.
        return dict(self._runners)


def _accepts(fn: Callable[..., object], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
