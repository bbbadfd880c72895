from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.progress import Progress

from adaserve.models.datasets import load_fsdd
from adaserve.models.ee_audio import dynamic_exits
from adaserve.models.manifest import read_manifest
from adaserve.models.registry import build_model, zoo_dir
from adaserve.workers.runtime import load_runner

NO_DATA = Path("/nonexistent-data-dir")


def test_dynamic_exits_take_the_first_confident_exit() -> None:
    sure, unsure = [10.0, 0.0, 0.0], [0.0, 0.0, 0.1]
    logits = [np.array([sure, unsure, unsure]), np.array([unsure, [0, 9.0, 0], unsure]),
              np.array([unsure, unsure, [0, 0, 5.0]])]
    exits, preds = dynamic_exits([x.astype(np.float32) for x in logits], 0.9)
    assert exits.tolist() == [1, 2, 3]
    assert preds.tolist() == [0, 1, 2]


def test_shipped_manifest_and_accuracy_per_exit() -> None:
    info = read_manifest(zoo_dir() / "ee-audio")
    assert info.train["tiny"] is False
    names = [v.name for v in info.variants]
    assert names == ["default", "exit1", "exit2", "exit3"]
    assert all(v.kind == "exit" for v in info.variants)
    default = info.variant("default")
    assert 0.0 < default.extra["threshold"] < 1.0 and default.extra["exits"] == 3
    assert sum(default.extra["exit_fractions"]) == pytest.approx(1.0)
    test = load_fsdd("test")
    for v in info.variants:
        out = load_runner("ee-audio", v.name, "cpu", NO_DATA, threads=1).run({"audio": test.audio})
        assert float(np.mean(out.predictions == test.labels)) == pytest.approx(v.quality, abs=1e-6)
    quality = {v.name: v.quality for v in info.variants}
    assert quality["exit3"] >= 0.9 and quality["default"] >= 0.9
    assert quality["exit1"] < quality["exit3"]


def test_early_exits_really_skip_later_stages() -> None:
    runner = load_runner("ee-audio", "default", "cpu", NO_DATA, threads=1)
    out = runner.run({"audio": load_fsdd("test").audio})
    counts = np.bincount(out.exits, minlength=4)
    assert counts[1] > 0 and counts[1] + counts[2] > 0
    # Stage k ran only on the rows that had not left before it.
    assert runner.rows_per_stage == [300, 300 - counts[1], counts[3]][:len(runner.rows_per_stage)]


def test_median_time_with_early_exits_is_below_the_full_model() -> None:
    """Measured, not simulated: one request at a time, the two variants interleaved."""
    dynamic = load_runner("ee-audio", "default", "cpu", NO_DATA, threads=1)
    full = load_runner("ee-audio", "exit3", "cpu", NO_DATA, threads=1)
    audio = load_fsdd("test").audio
    for r in (dynamic, full):  # warm-up
        r.run({"audio": audio[:1]})
    t_dyn, t_full, exits = [], [], []
    for i in range(len(audio)):
        d = dynamic.run({"audio": audio[i:i + 1]})
        f = full.run({"audio": audio[i:i + 1]})
        t_dyn.append(d.request_exec_s[0])
        t_full.append(f.request_exec_s[0])
        exits.append(int(d.exits[0]))
    assert np.median(t_dyn) < np.median(t_full)
    t_dyn_a, exits_a = np.array(t_dyn), np.array(exits)
    assert np.median(t_dyn_a[exits_a == 1]) < np.median(t_dyn_a[exits_a >= 2])


def test_tiny_build(tmp_path: Path) -> None:
    with Progress(disable=True) as progress:
        info = build_model("ee-audio", tmp_path / "models" / "ee-audio", tiny=True, seed=0,
                           progress=progress)
    assert info.train["tiny"] is True
    assert sorted(info.hashes) == ["stage1.onnx", "stage2.onnx", "stage3.onnx"]
    out = load_runner("ee-audio", "exit2", "cpu", tmp_path, threads=1).run(
        {"audio": load_fsdd("test").audio[:4]})
    assert out.exits.tolist() == [2, 2, 2, 2]
