"""A tiny real ONNX model behind the Runner interface, and helpers to feed a worker real batches.

The model is ``logits = x @ W + b`` with ``W`` chosen so that the predicted class of an input is
the index of its largest of the first three features: tests know every right answer.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import redis

from adaserve.broker import Finalizer, Keys, Settings, Tensor
from adaserve.broker.codec import decode, encode
from adaserve.broker.errors import ModelNotFound
from adaserve.broker.messages import Batch, BatchItem, Job, Placement, Plan, Request, Result, Slo
from adaserve.broker.replies import read_reply
from adaserve.broker.streams import ensure_group, publish
from adaserve.models.manifest import InputSpec
from adaserve.workers import Worker, WorkerConfig
from adaserve.workers.runtime.base import Runner, RunOutput

FEATURES = 4
CLASSES = 3


def tiny_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.zeros((FEATURES, CLASSES), np.float32)
    w[:CLASSES, :CLASSES] = np.eye(CLASSES) * 4.0
    b = np.zeros(CLASSES, np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["logits"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", CLASSES])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


class TinyRunner(Runner):
    """A Runner over an onnxruntime session of the tiny model ("nospec": no specs declared)."""

    def __init__(self, path: Path, variant: str = "default", *, with_specs: bool = True, delay_s: float = 0.0) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.model, self.variant, self.device = "tiny", variant, "cpu"
        self.inputs = ("x",)
        self.delay_s = delay_s
        if with_specs:
            self.specs = {"x": InputSpec(shape=(FEATURES,), dtype="float32")}

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        if self.delay_s:
            time.sleep(self.delay_s)
        (logits,) = self.session.run(None, {"x": inputs["x"]})
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        return RunOutput({"logits": logits}, predictions=p.argmax(1), confidences=p.max(1))


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx")


class TinyZoo:
    """A loader for ``Worker(load=...)``: model "tiny" (variants default, "nospec", "slow")."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.loads: list[tuple[str, str]] = []

    def __call__(self, model: str, variant: str, device: str, data_dir: Path) -> TinyRunner:
        self.loads.append((model, variant))
        if model != "tiny" or variant not in ("default", "nospec", "slow"):
            raise ModelNotFound(f"no model {model!r} variant {variant!r}")
        return TinyRunner(self.path, variant, with_specs=variant != "nospec",
                          delay_s=0.3 if variant == "slow" else 0.0)

    def available(self, data_dir: Path) -> list[str]:
        return ["tiny"]


@pytest.fixture
def zoo(tiny_path: Path) -> TinyZoo:
    return TinyZoo(tiny_path)


def sample(label: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.uniform(0.0, 0.5, FEATURES).astype(np.float32)
    x[label] = 1.0
    return x


class Feeder:
    """Plays the planner: registers jobs and dispatches batches of them to a pool's stream."""

    def __init__(self, settings: Settings, r: redis.Redis[bytes], pool: str = "cpu") -> None:
        self.settings, self.r, self.pool = settings, r, pool
        self.keys = Keys(settings.namespace)
        self.fin = Finalizer(r, settings)
        self.reply = "client-" + uuid.uuid4().hex[:6]
        self.rng = np.random.default_rng(0)
        ensure_group(r, self.keys.batches(pool), pool)

    def batch(self, n: int = 4, *, model: str = "tiny", variant: str = "default",
              inputs: list[np.ndarray] | None = None,
              rows: list[dict[str, np.ndarray]] | None = None) -> tuple[Batch, list[int]]:
        """A batch of ``n`` requests of one freshly registered job, and their right answers.

        By default the requests are tiny-model samples; ``inputs`` gives tiny-model arrays and
        ``rows`` the inputs of another model (the answers are then unknown: an empty list).
        """
        labels = [int(x) for x in self.rng.integers(0, CLASSES, n)] if rows is None else []
        arrays = inputs if inputs is not None else [sample(c, self.rng) for c in labels]
        rows = rows if rows is not None else [{"x": a} for a in arrays]
        job = Job(id="job-" + uuid.uuid4().hex[:8], model=model, reply_to=self.reply, slo=Slo(deadline_ms=60_000),
                  requests=[Request(id=f"r{i}", inputs={k: Tensor.from_numpy(v) for k, v in row.items()})
                            for i, row in enumerate(rows)])
        now = time.time() * 1000.0
        self.fin.register(job, "0-1", now)
        items = [BatchItem(job_id=job.id, request_id=q.id, app=job.app, reply_to=self.reply, inputs=q.inputs,
                           submitted_ms=now, deadline_ms=now + 60_000) for q in job.requests]
        batch = Batch(id="b-" + uuid.uuid4().hex[:8], model=model, items=items, dispatched_ms=now,
                      plan=Plan(variant=variant, placement=Placement(pool=self.pool)))
        return batch, labels

    def send(self, batch: Batch | bytes) -> str:
        raw = batch if isinstance(batch, bytes) else encode(batch)
        return publish(self.r, self.keys.batches(self.pool), raw)

    def results(self, n: int, timeout: float = 10.0) -> list[Result]:
        """Wait until at least ``n`` results are on the reply stream (all of them, decoded)."""
        key = self.keys.reply(self.reply)
        end = time.monotonic() + timeout
        while True:
            got = [res for _, f in self.r.xrange(key) for res in read_reply(f[b"m"])]
            if len(got) >= n or time.monotonic() > end:
                return got
            time.sleep(0.02)

    def events(self, kind: str) -> list[object]:
        out = []
        for _, f in self.r.xrange(self.keys.telemetry):
            ev = decode(f[b"m"])
            if getattr(ev, "event", None) == kind:
                out.append(ev)
        return out

    def pending(self) -> int:
        return int(self.r.xpending(self.keys.batches(self.pool), self.pool)["pending"])

    def dead(self) -> list[dict[bytes, bytes]]:
        return [f for _, f in self.r.xrange(self.keys.dead)]

    @staticmethod
    def wait_for(pred: Callable[[], object], timeout: float = 10.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            time.sleep(0.02)
        return False


@pytest.fixture
def feeder(settings: Settings, r: redis.Redis[bytes]) -> Feeder:
    return Feeder(settings, r)


@contextmanager
def serving(settings: Settings, zoo: TinyZoo, config: WorkerConfig | None = None) -> Iterator[Worker]:
    """A worker serving in a thread of this process, stopped (cleanly) on exit."""
    worker = Worker(settings, config or WorkerConfig(name="w-" + uuid.uuid4().hex[:6]), load=zoo,
                    available=zoo.available)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    assert worker.ready.wait(10), "worker did not start"
    try:
        yield worker
    finally:
        stop.set()
        thread.join(15)
        assert not thread.is_alive(), "worker did not stop"


@pytest.fixture
def serve(settings: Settings, zoo: TinyZoo) -> Callable[..., object]:
    """``with serve(**config) as worker:`` runs a worker on the test's settings and tiny zoo."""

    def start(settings_: Settings | None = None, **config: object) -> object:
        config.setdefault("name", "w-" + uuid.uuid4().hex[:6])
        return serving(settings_ or settings, zoo, WorkerConfig(**config))  # type: ignore[arg-type]

    return start
