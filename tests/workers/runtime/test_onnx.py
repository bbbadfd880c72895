from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaserve.broker.errors import InvalidMessage
from adaserve.models.datasets import load_fsdd
from adaserve.models.manifest import InputSpec
from adaserve.models.registry import load_info
from adaserve.workers.runtime import load_runner
from adaserve.workers.runtime.onnx import EarlyExitRunner, check_inputs, default_threads, softmax

SPECS = {"audio": InputSpec(shape=(1, 4), dtype="float32"),
         "image": InputSpec(shape=(2,), dtype="float32")}


def test_softmax_rows_sum_to_one() -> None:
    p = softmax(np.array([[1.0, 2.0, 3.0], [1000.0, 0.0, -1000.0]], dtype=np.float32))
    assert np.allclose(p.sum(axis=1), 1.0) and p[1, 0] == pytest.approx(1.0)


def test_check_inputs_casts_and_ignores_extra_modalities() -> None:
    out = check_inputs(SPECS, {"audio": np.zeros((3, 1, 4)), "image": np.ones((3, 2)),
                               "text": np.zeros(3)})
    assert set(out) == {"audio", "image"} and out["audio"].dtype == np.float32


@pytest.mark.parametrize("inputs,match", [
    ({"audio": np.zeros((3, 1, 4))}, "missing"),
    ({"audio": np.zeros((3, 4)), "image": np.zeros((3, 2))}, "shape"),
    ({"audio": np.zeros((3, 1, 4)), "image": np.zeros((2, 2))}, "batch"),
    ({"audio": np.zeros((0, 1, 4)), "image": np.zeros((0, 2))}, "batch"),
])
def test_check_inputs_errors(inputs: dict[str, np.ndarray], match: str) -> None:
    with pytest.raises(InvalidMessage, match=match) as exc:
        check_inputs(SPECS, inputs)
    assert exc.value.reason == "schema"


def test_default_threads_is_the_affinity() -> None:
    assert 1 <= default_threads()


def test_whole_runner_outputs(tmp_path: Path) -> None:
    runner = load_runner("fsdd-cnn", "default", "cpu", tmp_path, threads=1)
    x = load_fsdd("test").audio[:5]
    out = runner.run({"audio": x})
    assert out.outputs["probs"].shape == (5, 10)
    assert np.array_equal(out.predictions, out.outputs["logits"].argmax(axis=1))
    assert ((out.confidences > 0.1) & (out.confidences <= 1.0)).all()
    assert out.exits is None
    assert out.request_exec_s.shape == (5,) and (out.request_exec_s > 0).all()
    # Batching does not change a request's answer.
    single = runner.run({"audio": x[2:3]})
    assert np.allclose(single.outputs["logits"][0], out.outputs["logits"][2], atol=1e-5)


def early_exit(threshold: float | None, variant: str = "default") -> EarlyExitRunner:
    model_dir, info = load_info("ee-audio", Path("/nonexistent-data-dir"))
    return EarlyExitRunner(model_dir, info, info.variant(variant), "cpu", 1, threshold=threshold)


def test_early_exit_runner_reports_exit_confidence_and_time() -> None:
    runner = early_exit(None)
    out = runner.run({"audio": load_fsdd("test").audio[:64]})
    assert set(out.exits.tolist()) <= {1, 2, 3}
    assert out.confidences.shape == (64,) and out.request_exec_s.shape == (64,)
    assert (out.confidences[out.exits < 3] >= runner.threshold).all()
    # Times are cumulative per stage: a later exit always finishes later within a batch.
    for k in (1, 2):
        if (out.exits == k).any() and (out.exits > k).any():
            assert out.request_exec_s[out.exits == k].max() < out.request_exec_s[out.exits > k].min()


@pytest.mark.parametrize("threshold,expected", [(0.0, 1), (1.01, 3)])
def test_threshold_bounds(threshold: float, expected: int) -> None:
    runner = early_exit(threshold)
    out = runner.run({"audio": load_fsdd("test").audio[:8]})
    assert out.exits.tolist() == [expected] * 8
    assert len(runner.rows_per_stage) == expected


def test_fixed_exit_variant_stops_there() -> None:
    runner = early_exit(None, "exit1")
    out = runner.run({"audio": load_fsdd("test").audio[:8]})
    assert out.exits.tolist() == [1] * 8 and runner.rows_per_stage == [8]
