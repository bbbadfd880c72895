"""IO binding's buffer reuse, exercised on the CPU provider (the same calls as on CUDA)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaserve.models.datasets import load_fsdd
from adaserve.models.registry import load_info
from adaserve.workers.runtime import bound
from adaserve.workers.runtime.bound import BoundSession, runner_of
from adaserve.workers.runtime.onnx import make_session


def _session(tmp_path: Path):
    model_dir, info = load_info("fsdd-cnn", tmp_path)
    return make_session(model_dir / info.variant("default").artifacts[0], "cpu", threads=1)


def test_refilled_buffers_give_each_batch_its_own_answer(tmp_path: Path) -> None:
    sess = _session(tmp_path)
    bs = BoundSession(sess, device_type="cpu")
    x = load_fsdd("test").audio[:16]
    a, b = x[:8], x[8:]
    got_a = bs.run(["logits"], {"audio": a})[0]
    got_b = bs.run(["logits"], {"audio": b})[0]  # same shape: the buffer of ``a`` is refilled
    assert bs.buffers == 1
    assert np.allclose(got_a, sess.run(["logits"], {"audio": a})[0], atol=1e-6)
    assert np.allclose(got_b, sess.run(["logits"], {"audio": b})[0], atol=1e-6)
    assert not np.allclose(got_a, got_b)
    bs.run(["logits"], {"audio": x[:3]})
    assert bs.buffers == 2  # one per shape


def test_buffers_are_bounded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(bound, "MAX_BUFFERS", 3)
    bs = BoundSession(_session(tmp_path), device_type="cpu")
    x = load_fsdd("test").audio[:6]
    for n in range(1, 7):
        bs.run(["logits"], {"audio": x[:n]})
    assert bs.buffers == 3


def test_only_the_gpu_binds_and_only_when_asked(tmp_path: Path) -> None:
    sess = _session(tmp_path)
    assert not isinstance(getattr(runner_of(sess, "cpu", io_binding=True), "__self__", None), BoundSession)
    assert not isinstance(getattr(runner_of(sess, "gpu"), "__self__", None), BoundSession)
    assert isinstance(getattr(runner_of(sess, "gpu", io_binding=True), "__self__", None), BoundSession)
