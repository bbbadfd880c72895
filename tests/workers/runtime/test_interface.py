"""The runner interface is declared: every runtime is a Runner, capabilities are subclasses with
documented defaults, and the worker decides them once, when a runner is loaded."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from adaserve.broker.errors import ModelLoadError
from adaserve.workers import RunnerCache
from adaserve.workers.runners import Loaded
from adaserve.workers.runtime import GenerativeRunner, Runner, RunOutput, SplitPart, load_runner
from adaserve.workers.runtime.loader import EXTERNAL_RUNNERS
from adaserve.workers.runtime.onnx import EarlyExitRunner, OnnxRunner


class Plain(Runner):
    model, variant, device, inputs = "m", "v", "cpu", ("x",)

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        return RunOutput({})


class LooksGenerative(Plain):
    """Has every attribute a generator has, and a ``next``, but declares neither capability."""

    block_size, vocab_size, pad_id, max_new_tokens = 8, 4, -1, 2
    next = "part2"


def _kind(kind: str) -> type:
    module, name = EXTERNAL_RUNNERS[kind]
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def test_every_runner_the_loader_returns_is_a_runner() -> None:
    for cls in (OnnxRunner, EarlyExitRunner, _kind("part"), _kind("lm-exit")):
        assert issubclass(cls, Runner), cls
    assert issubclass(_kind("lm-exit"), GenerativeRunner) and issubclass(_kind("part"), SplitPart)
    for cls in (OnnxRunner, EarlyExitRunner):
        assert not issubclass(cls, (GenerativeRunner, SplitPart)), cls
    assert set(EXTERNAL_RUNNERS) == {"lm-exit", "part"}  # a new kind needs its line above


def test_a_loaded_classifier_declares_its_specs_and_no_optional_capability(tmp_path: Path) -> None:
    runner = load_runner("fsdd-cnn", "default", "cpu", tmp_path, threads=1)
    assert isinstance(runner, Runner) and not isinstance(runner, (GenerativeRunner, SplitPart))
    loaded = Loaded.of(runner)
    assert loaded.specs is not None and set(loaded.specs) == set(runner.inputs)
    assert (loaded.generator, loaded.next, runner.input_limits) == (None, None, {})


def test_the_run_method_is_required() -> None:
    class NoRun(Runner):
        model, variant, device, inputs = "m", "v", "cpu", ("x",)

    with pytest.raises(TypeError, match="abstract"):
        NoRun()  # type: ignore[abstract]


def test_a_runner_without_optional_capabilities_gets_the_defaults() -> None:
    runner = Plain()
    assert runner.specs is None and runner.input_limits == {}
    loaded = Loaded.of(runner)
    assert (loaded.specs, loaded.generator, loaded.next) == (None, None, None)


def test_capabilities_come_from_the_declared_class_not_from_attributes() -> None:
    loaded = Loaded.of(LooksGenerative())
    assert loaded.generator is None and loaded.next is None


def test_a_declared_part_hands_on_to_its_next() -> None:
    class Part(Plain, SplitPart):
        next = "part2"

    class Last(Plain, SplitPart):
        next = None

    assert Loaded.of(Part()).next == "part2" and not Part().is_last
    assert Loaded.of(Last()).next is None and Last().is_last


def test_the_cache_refuses_an_object_that_is_not_a_runner() -> None:
    class DuckTyped:
        model, variant, device, inputs = "m", "v", "cpu", ("x",)

        def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
            return RunOutput({})

    cache = RunnerCache(lambda *a: DuckTyped(), device="cpu", data_dir=Path("."))  # type: ignore[arg-type,return-value]
    with pytest.raises(ModelLoadError, match="not a Runner"):
        cache.get("m")


def test_the_cache_decides_capabilities_once_per_load() -> None:
    loads: list[str] = []

    def load(model: str, variant: str, device: str, data_dir: Path) -> Runner:
        loads.append(variant)
        return LooksGenerative()

    cache = RunnerCache(load, device="cpu", data_dir=Path("."))
    first = cache.loaded("m", "default")
    assert cache.loaded("m", "default") is first and cache.loaded("m", "v") is first  # "v": its own name
    assert cache.get("m") is first.runner and loads == ["default"]
