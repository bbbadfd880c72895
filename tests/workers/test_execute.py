"""Batch execution without Redis: stacking, per-request outcomes, every failure contained."""

from __future__ import annotations

import numpy as np
import pytest

from adaserve.broker import ServerClock, Tensor
from adaserve.broker.codec import encode_map
from adaserve.broker.errors import ModelLoadError, ModelNotFound
from adaserve.broker.messages import Batch, BatchItem, Plan
from adaserve.workers import Executor, RunnerCache
from adaserve.workers.runtime.base import Runner, RunOutput
from adaserve.workers.wire import WireBatch, read_batch


class Doubler(Runner):
    """Predicts the sum of each row; records what it was given."""

    model, variant, device, inputs = "m", "v1", "cpu", ("a",)

    def __init__(self, fail: Exception | None = None, outputs: dict[str, np.ndarray] | None = None) -> None:
        self.calls: list[dict[str, np.ndarray]] = []
        self.fail = fail
        self.extra = outputs or {}

    def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
        self.calls.append(inputs)
        if self.fail is not None:
            raise self.fail
        a = inputs["a"]
        n = len(a)
        return RunOutput({"twice": a * 2, "big": np.zeros((n, 5000), np.float32), **self.extra},
                         predictions=a.reshape(n, -1).sum(1).astype(np.int64), confidences=np.full(n, 0.5),
                         exits=np.arange(n), request_exec_s=np.full(n, 0.001))


def _batch(*arrays: np.ndarray, model: str = "m") -> Batch:
    items = [BatchItem(job_id="j", request_id=f"r{i}", app="a", reply_to="c", inputs={"a": Tensor.from_numpy(x)},
                       submitted_ms=0.0, deadline_ms=1e15) for i, x in enumerate(arrays)]
    return Batch(id="b", model=model, plan=Plan(), items=items, dispatched_ms=0.0)


def _executor(runner: object) -> Executor:
    def load(model: str, variant: str, device: str, data_dir: object) -> object:
        if model != "m":
            raise ModelNotFound(f"no {model}")
        return runner

    return Executor(RunnerCache(load, device="cpu", data_dir=None), ServerClock(), max_output_elements=100)  # type: ignore[arg-type]


def test_requests_are_stacked_and_split() -> None:
    runner = Doubler()
    out = _executor(runner).run(_batch(np.array([1, 2], np.int64), np.array([3, 4], np.int64)))
    assert len(runner.calls) == 1 and runner.calls[0]["a"].shape == (2, 2)
    assert [i.prediction for i in out.items] == [3, 7]
    assert [i.exit for i in out.items] == [0, 1] and [i.exec_ms for i in out.items] == [1.0, 1.0]
    assert out.variant == "v1" and out.failed == []
    assert set(out.items[1].outputs) == {"twice"}  # "big" has 5000 elements per request: left out
    np.testing.assert_array_equal(out.items[1].outputs["twice"].to_numpy(), [6, 8])
    # every request completed in one run: the answers stay columns, the items are built from them
    assert out.columns is not None and out.columns.predictions == [3, 7] and set(out.columns.outputs) == {"twice"}
    np.testing.assert_array_equal(out.columns.outputs["twice"], [[2, 4], [6, 8]])


def test_unknown_model_fails_every_request() -> None:
    out = _executor(Doubler()).run(_batch(np.zeros(2, np.int64), model="other"))
    assert [i.status for i in out.items] == ["failed"] and out.items[0].reason.startswith("unknown_model")


def test_runtime_exception_fails_the_group_not_the_process() -> None:
    out = _executor(Doubler(fail=RuntimeError("device lost"))).run(_batch(np.zeros(2, np.int64), np.zeros(2, np.int64)))
    assert [i.status for i in out.items] == ["failed", "failed"]
    assert out.items[0].reason == "runtime_error: RuntimeError: device lost"
    code, detail = out.failure_summary()
    assert code == "runtime_error" and detail.startswith("2/2 requests failed")


def test_shapes_are_grouped_and_a_bad_group_fails_alone() -> None:
    class Picky(Doubler):
        def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
            if inputs["a"].shape[1] != 2:
                self.calls.append(inputs)
                raise ValueError("wrong width")
            return super().run(inputs)

    runner = Picky()
    out = _executor(runner).run(_batch(np.ones(2, np.int64), np.ones(3, np.int64), np.ones(2, np.int64)))
    assert [i.status for i in out.items] == ["completed", "failed", "completed"] and out.columns is None
    assert out.items[1].reason.startswith("bad_input: ValueError")
    assert sorted(c["a"].shape for c in runner.calls) == [(1, 3), (2, 2)]


def test_runner_returning_the_wrong_count_is_a_runtime_error() -> None:
    class Short(Doubler):
        def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
            out = super().run(inputs)
            out.predictions = out.predictions[:1]
            return out

    out = _executor(Short()).run(_batch(np.ones(2, np.int64), np.ones(2, np.int64)))
    assert all(i.reason.startswith("runtime_error") for i in out.items)


def test_missing_input_fails_that_request() -> None:
    batch = _batch(np.ones(2, np.int64))
    item = batch.items[0].model_copy(update={"inputs": {"b": Tensor.from_numpy(np.ones(2))}})
    batch = batch.model_copy(update={"items": [item, *_batch(np.ones(2, np.int64)).items]})
    out = _executor(Doubler()).run(batch)
    assert [i.status for i in out.items] == ["failed", "completed"]
    assert "missing input 'a'" in out.items[0].reason


def test_failed_loads_are_remembered() -> None:
    calls = []

    def load(model: str, variant: str, device: str, data_dir: object) -> object:
        calls.append(model)
        raise OSError("corrupt file")

    cache = RunnerCache(load, device="cpu", data_dir=None, retry_s=60)  # type: ignore[arg-type]
    for _ in range(3):
        with pytest.raises(ModelLoadError, match="corrupt file"):
            cache.get("m")
    assert calls == ["m"]


def test_runner_cached_under_its_resolved_variant_and_threads_passed() -> None:
    seen = {}

    def load(model: str, variant: str, device: str, data_dir: object, threads: int | None = None) -> object:
        seen["threads"] = threads
        return Doubler()

    cache = RunnerCache(load, device="cpu", data_dir=None, threads=3)  # type: ignore[arg-type]
    first = cache.get("m", "default")
    assert cache.get("m", "v1") is first and seen == {"threads": 3}
    assert cache.variants() == [("m", "default"), ("m", "v1")] and cache.models() == ["m"]


def test_io_binding_reaches_loaders_that_take_it_and_is_dropped_for_others() -> None:
    seen = {}

    def load(model: str, variant: str, device: str, data_dir: object, io_binding: bool = False) -> object:
        seen["io_binding"] = io_binding
        return Doubler()

    RunnerCache(load, device="gpu", data_dir=None, io_binding=True).get("m")  # type: ignore[arg-type]
    assert seen == {"io_binding": True}

    def plain(model: str, variant: str, device: str, data_dir: object) -> object:
        return Doubler()

    assert isinstance(RunnerCache(plain, device="gpu", data_dir=None, io_binding=True).get("m"), Doubler)  # type: ignore[arg-type]


def test_a_non_finite_answer_fails_its_request_instead_of_completing() -> None:
    class NanEcho(Runner):
        """Answers with logits that carry its input's NaN, as a real network does."""

        model, variant, device, inputs = "m", "v1", "cpu", ("a",)

        def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
            a = inputs["a"].astype(np.float32)
            logits = np.stack([a.sum(1), -a.sum(1)], axis=1)
            with np.errstate(invalid="ignore", over="ignore"):
                conf = np.exp(logits).max(1) / np.exp(logits).sum(1)
            return RunOutput({"logits": logits}, predictions=logits.argmax(1), confidences=conf)

    out = _executor(NanEcho()).run(_batch(np.array([1.0, 2.0], np.float32), np.array([np.nan, 1.0], np.float32),
                                          np.array([np.inf, 0.0], np.float32)))
    assert [i.status for i in out.items] == ["completed", "failed", "failed"] and out.columns is None
    assert out.items[0].prediction == 0 and out.items[1].prediction is None
    assert all(i.reason.startswith("non_finite:") for i in out.items[1:])


def test_finite_answers_to_non_finite_inputs_complete() -> None:
    class NanAware(Runner):
        """A model built for missing values: NaN means 'absent', the answer is finite."""

        model, variant, device, inputs = "m", "v1", "cpu", ("a",)

        def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
            a = np.nan_to_num(inputs["a"], nan=0.0, posinf=0.0, neginf=0.0)
            return RunOutput({"mean": a.mean(1, keepdims=True)}, predictions=(a.sum(1) > 0).astype(np.int64),
                             confidences=np.full(len(a), 0.9))

    out = _executor(NanAware()).run(_batch(np.array([np.nan, 2.0], np.float32)))
    assert out.items[0].status == "completed" and out.items[0].prediction == 1


class Sized(Doubler):
    def __init__(self, variant: str, weight_bytes: int) -> None:
        super().__init__()
        self.variant, self.weight_bytes = variant, weight_bytes


def test_a_batch_that_loads_its_runner_reports_the_load_time() -> None:
    cache = RunnerCache(lambda m, v, d, dd: Sized(v, 10), device="cpu", data_dir=None)  # type: ignore[arg-type]
    ex = Executor(cache, ServerClock())
    first = ex.run(_batch(np.zeros(2, np.int64)))
    again = ex.run(_batch(np.zeros(2, np.int64)))
    assert first.load_s is not None and first.load_s >= 0 and again.load_s is None
    assert first.failed == again.failed == []


def test_a_memory_budget_evicts_the_least_recently_used_runner() -> None:
    cache = RunnerCache(lambda m, v, d, dd: Sized(v, 60), device="cpu", data_dir=None,  # type: ignore[arg-type]
                        memory_bytes=130)
    a = cache.get("m", "a")
    cache.get("m", "b")
    cache.get("m", "a")  # a used last: b is the one to go
    cache.get("m", "c")
    assert cache.variants() == [("m", "a"), ("m", "c")] and cache.held_bytes() == 120
    assert cache.get("m", "a") is a  # still held, not loaded again
    big = RunnerCache(lambda m, v, d, dd: Sized(v, 500), device="cpu", data_dir=None,  # type: ignore[arg-type]
                      memory_bytes=130)
    big.get("m", "a")
    big.get("m", "b")
    assert big.variants() == [("m", "b")]  # alone over the budget, it is still served


def test_columns_do_not_share_a_runtime_s_reused_output_buffer() -> None:
    """The publisher packs a batch's columns on its own thread while the runner may already run
    the next batch: a runtime that writes its outputs into the same buffer each run must not
    change the answers of the batch before."""

    class Reusing(Doubler):
        def __init__(self) -> None:
            super().__init__()
            self.buf = np.zeros((2, 2), np.int64)

        def run(self, inputs: dict[str, np.ndarray]) -> RunOutput:
            self.buf[:] = inputs["a"] * 2
            n = len(self.buf)
            return RunOutput({"twice": self.buf}, predictions=np.zeros(n, np.int64), confidences=np.full(n, 0.5))

    ex = _executor(Reusing())
    first = ex.run(_batch(np.array([1, 2], np.int64), np.array([3, 4], np.int64)))
    ex.run(_batch(np.array([5, 5], np.int64), np.array([5, 5], np.int64)))
    assert first.columns is not None
    np.testing.assert_array_equal(first.columns.outputs["twice"], [[2, 4], [6, 8]])


def _wire(batch: Batch, columnar: bool) -> WireBatch:
    """``batch`` as a worker reads it off the wire, in the columnar form or the per-request one."""
    body = batch.model_dump(mode="python")
    if columnar:
        items = body.pop("items")
        body["jobs"] = [{k: v for k, v in items[0].items() if k not in ("request_id", "inputs", "kind", "generation",
                                                                         "prior_exec_ms")}
                        | {"request_ids": [it["request_id"] for it in items]}]
        body["inputs"] = {name: {"dtype": t["dtype"], "shape": [len(items), *t["shape"]],
                                 "data": b"".join(it["inputs"][name]["data"] for it in items)}
                          for name, t in items[0]["inputs"].items()}
    for it in body.get("items", []):
        for t in it["inputs"].values():
            t["shape"] = list(t["shape"])
    return read_batch(encode_map(body))


def test_a_columnar_batch_runs_as_one_stacked_group_with_the_per_request_form_s_answers() -> None:
    batch = _batch(np.array([1, 2], np.int64), np.array([3, 4], np.int64), np.array([5, 6], np.int64))
    runner = Doubler()
    col, per = (_executor(runner).run(_wire(batch, c)) for c in (True, False))
    assert _wire(batch, True).stacked is not None and _wire(batch, False).stacked is None
    assert len(runner.calls) == 2 and runner.calls[0]["a"].flags.writeable
    np.testing.assert_array_equal(runner.calls[0]["a"], runner.calls[1]["a"])
    assert col.columns is not None and [i.prediction for i in col.items] == [i.prediction for i in per.items] == [3, 7, 11]
    assert [i.outputs["twice"] for i in col.items] == [i.outputs["twice"] for i in per.items]


def test_a_columnar_batch_without_the_runner_s_input_fails_every_request() -> None:
    batch = _batch(np.array([1, 2], np.int64), np.array([3, 4], np.int64))
    body = _wire(batch, True).body
    body["inputs"] = {"b": body["inputs"]["a"]}
    out = _executor(Doubler()).run(read_batch(encode_map(body)))
    assert [i.status for i in out.items] == ["failed", "failed"]
    assert all(i.reason.startswith("bad_input: missing input 'a'") for i in out.items)


def _late(batch: Batch, *late: int) -> Batch:
    """``batch`` with the deadlines of the requests at ``late`` already passed."""
    items = [it.model_copy(update={"deadline_ms": 1.0}) if i in late else it for i, it in enumerate(batch.items)]
    return batch.model_copy(update={"items": items})


@pytest.mark.parametrize("columnar", [False, True])
def test_requests_past_their_deadline_end_expired_unrun_and_the_rest_run(columnar: bool) -> None:
    batch = _late(_batch(np.array([1, 2], np.int64), np.array([3, 4], np.int64), np.array([5, 6], np.int64)), 0)
    if columnar:  # two jobs in the columnar form: the first one's deadline has passed
        body = _wire(batch, True).body
        job = body["jobs"][0]
        body["jobs"] = [job | {"deadline_ms": 1.0, "request_ids": ["r0"]},
                        job | {"deadline_ms": 1e15, "request_ids": ["r1", "r2"]}]
        wire: Batch | WireBatch = read_batch(encode_map(body))
        assert wire.stacked is not None
    else:
        wire = batch
    runner = Doubler()
    out = _executor(runner).run(wire)
    assert [i.status for i in out.items] == ["expired", "completed", "completed"]
    assert out.items[0].reason.startswith("deadline") and out.items[0].outputs == {}
    assert len(runner.calls) == 1
    np.testing.assert_array_equal(runner.calls[0]["a"], [[3, 4], [5, 6]])  # only the rows that can still answer
    assert [i.prediction for i in out.items[1:]] == [7, 11] and out.columns is None and out.failed == []


def test_a_batch_whose_every_deadline_passed_does_not_run() -> None:
    runner = Doubler()
    out = _executor(runner).run(_late(_batch(np.ones(2, np.int64), np.ones(2, np.int64)), 0, 1))
    assert [i.status for i in out.items] == ["expired", "expired"] and runner.calls == [] and out.exec_ms == 0.0
