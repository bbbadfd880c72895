"""One batch through its runner: requests stacked along axis 0, one outcome per request.

Nothing here touches Redis; ``results`` turns an outcome into wire results and the event, and
``forward`` hands a split model's intermediate tensors on. Language models take their own path
(``generate``): prompts of any length share one padded batch. Every failure (unknown model, a
load error, inputs that do not fit, an exception in the runtime) becomes a ``failed`` outcome with
a reason for the requests it concerns, never an exception. A request whose deadline has passed
when its batch comes to run ends ``expired`` unrun (``past_deadline``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, overload

import numpy as np

from adaserve.broker.clock import ServerClock
from adaserve.broker.errors import InvalidMessage, ModelLoadError, ModelNotFound
from adaserve.broker.messages import BatchItem
from adaserve.broker.tensors import Tensor
from adaserve.workers.generate import Prompt, pack, prompt_of
from adaserve.workers.inputs import InputError, Signature, gather, gather_stacked, signature, targets
from adaserve.workers.runners import RunnerCache
from adaserve.workers.runtime.base import GenerativeRunner, Runner, RunOutput
from adaserve.workers.scoring import score_prompts
from adaserve.workers.wire import AnyBatch, AnyItem, WireBatch, WireTensor, items_of

# Exception types the runtimes raise for inputs of the wrong shape or type (onnxruntime's
# InvalidArgument among them); anything else is the runtime's own fault.
_INPUT_ERRORS = ("InvalidArgument", "ValueError", "TypeError", "IndexError")
NON_FINITE_OUTPUT = "non_finite: the model's output for this request holds NaN or infinite values"
PAST_DEADLINE = "deadline: it had passed when the worker came to run the batch"


def past_deadline(items: Sequence[AnyItem], now_ms: float) -> list[int]:
    """The requests whose deadline has passed by ``now_ms``: running them could only answer late,
    and under overload a quarter to two fifths of what the worker ran finished late, over half of
    it started past its deadline: time the requests behind them then lacked (docs/orloj.md, "Ninth session")."""
    return [i for i, it in enumerate(items) if it.deadline_ms <= now_ms]


@dataclass(frozen=True, slots=True)
class WireRow:
    """One request's slice of an output, already in wire form (little-endian, C order)."""

    dtype: str
    shape: list[int]
    data: bytes

    def to_numpy(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=np.dtype(self.dtype).newbyteorder("<")).reshape(self.shape)


@dataclass
class ItemOutcome:
    status: Literal["completed", "failed", "expired"]
    reason: str = ""
    prediction: int | None = None
    confidence: float | None = None
    exit: int | None = None
    outputs: dict[str, WireRow] = field(default_factory=dict)
    exec_ms: float = 0.0
    # the prompt as other models read it in the plan's scoring passes: (model, depth, perplexity)
    scored: tuple[tuple[str, int, float | None], ...] = ()


@dataclass(slots=True)
class Columns:
    """A batch whose every request completed, kept as the runner returned it: one value per
    request in each list and the outputs as batch arrays (rows are requests, little-endian, C
    order). The reply goes out as one ``columns`` entry per job built from these directly;
    per-request ``ItemOutcome``s (``ColumnItems``) are made only when something asks for them
    (the batch.finished event's fields aside, a redelivery's per-request results)."""

    predictions: list[int | None]
    confidences: list[float | None]
    exits: list[int | None]
    exec_ms: list[float]
    outputs: dict[str, np.ndarray]
    run_ms: float  # the runner's wall time for the whole batch

    def __len__(self) -> int:
        return len(self.exec_ms)


class ColumnItems(Sequence[ItemOutcome]):
    """The ``ItemOutcome`` of each row of ``columns``, built on first access."""

    __slots__ = ("_built", "columns")

    def __init__(self, columns: Columns) -> None:
        self.columns = columns
        self._built: list[ItemOutcome] | None = None

    def _items(self) -> list[ItemOutcome]:
        if self._built is None:
            c = self.columns
            rows = {k: _rows(v) for k, v in c.outputs.items()}
            self._built = [ItemOutcome("completed", prediction=c.predictions[j], confidence=c.confidences[j],
                                       exit=c.exits[j], outputs={k: r[j] for k, r in rows.items()},
                                       exec_ms=c.exec_ms[j]) for j in range(len(c))]
        return self._built

    def __len__(self) -> int:
        return len(self.columns)

    @overload
    def __getitem__(self, i: int) -> ItemOutcome: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[ItemOutcome]: ...
    def __getitem__(self, i: int | slice) -> ItemOutcome | Sequence[ItemOutcome]:
        return self._items()[i]

    def __iter__(self) -> Iterator[ItemOutcome]:
        return iter(self._items())


@dataclass
class BatchOutcome:
    variant: str
    items: Sequence[ItemOutcome]
    started_ms: float
    finished_ms: float
    exec_ms: float  # wall time inside the runner, all groups together
    # The part that runs next when this batch ran a non-last part of a split model; the
    # completed items then carry outputs["intermediate"] for ``forward``.
    next_variant: str | None = None
    # Seconds the batch waited for its runner to load (a switch of depth or model); None: cached.
    load_s: float | None = None

    @property
    def columns(self) -> Columns | None:
        """The batch's answers as columns, when every request completed in one run."""
        return self.items.columns if isinstance(self.items, ColumnItems) else None

    @property
    def expired(self) -> int:
        """How many requests ended unrun, their deadline passed (none when it ran whole)."""
        if isinstance(self.items, ColumnItems):
            return 0
        return sum(1 for it in self.items if it.status == "expired")

    @property
    def failed(self) -> list[int]:
        if isinstance(self.items, ColumnItems):
            return []
        return [i for i, it in enumerate(self.items) if it.status == "failed"]

    def failure_summary(self) -> tuple[str, str]:
        """The most common failure code of the batch and a detail naming the first reasons."""
        reasons = [self.items[i].reason for i in self.failed]
        codes = [r.split(":", 1)[0] for r in reasons]
        code = max(set(codes), key=codes.count) if codes else ""
        detail = "; ".join(dict.fromkeys(reasons[:3]))
        return code, f"{len(reasons)}/{len(self.items)} requests failed: {detail}"


class Executor:
    def __init__(self, runners: RunnerCache, clock: ServerClock, *, max_output_elements: int = 1024) -> None:
        self.runners = runners
        self._clock = clock
        self._max_out = max_output_elements

    def run(self, batch: AnyBatch) -> BatchOutcome:
        n = len(batch.items)
        # A plan that moves to another depth or model loads it here, before this batch runs:
        # the batch waits for the load and is never dropped; the wait is reported as load_s.
        cached = self.runners.is_loaded(batch.model, batch.plan.variant)
        t_load = time.perf_counter()
        try:
            loaded = self.runners.loaded(batch.model, batch.plan.variant)
        except (ModelNotFound, ModelLoadError) as exc:
            code = "unknown_model" if isinstance(exc, ModelNotFound) else "load_failed"
            now = self._clock.now_ms()
            return BatchOutcome(batch.plan.variant, [ItemOutcome("failed", f"{code}: {exc}") for _ in range(n)],
                                now, now, 0.0)
        load_s = None if cached else time.perf_counter() - t_load
        if loaded.generator is not None:
            out = self._generate(batch, loaded.generator)
            out.load_s = load_s
            return out
        runner, nxt = loaded.runner, loaded.next
        if nxt is not None and not batch.plan.placement.next_pool:
            now = self._clock.now_ms()
            why = (f"bad_plan: {batch.model}/{runner.variant} is a part of a "
                   f"split model and the plan names no pool for its next part {nxt!r}")
            return BatchOutcome(batch.plan.variant, [ItemOutcome("failed", why) for _ in range(n)], now, now, 0.0)
        keep = frozenset({"intermediate"}) if nxt is not None else frozenset()
        items: list[ItemOutcome | None] = [None] * n
        if nxt is None:  # a part that forwards its requests leaves their fate to the last part
            for i in past_deadline(items_of(batch), self._clock.now_ms()):
                items[i] = ItemOutcome("expired", PAST_DEADLINE)
        live = [i for i in range(n) if items[i] is None]
        names = tuple(runner.inputs)
        specs = loaded.specs
        groups: dict[Signature, list[int]] = {}
        stacked = batch.stacked if isinstance(batch, WireBatch) else None
        if stacked is not None and live:  # the columnar form: one signature for all, checked once
            try:
                groups[signature(_tensors(items_of(batch)[live[0]].inputs), names)] = live
            except InputError as exc:
                for i in live:
                    items[i] = ItemOutcome("failed", f"bad_input: {exc}")
        elif stacked is None:
            for i in live:
                try:
                    groups.setdefault(signature(_tensors(items_of(batch)[i].inputs), names), []).append(i)
                except InputError as exc:
                    items[i] = ItemOutcome("failed", f"bad_input: {exc}")
        started = self._clock.now_ms()
        exec_s = 0.0
        # One group holding every request, nothing passed on to a next part: its answers may stay
        # columns (``Columns``), when the run succeeds and every row is finite.
        whole = not keep and len(groups) == 1 and all(it is None for it in items)
        for sig, idx in groups.items():
            try:
                target = targets(sig, specs, loaded.pixels)
            except InputError as exc:
                for i in idx:
                    items[i] = ItemOutcome("failed", f"bad_input: {exc}")
                continue
            if stacked is not None:
                arrays = gather_stacked(_tensors(stacked), n, sig, target)
                if len(idx) < n:  # rows of requests that expired before the run stay out of it
                    arrays = {k: v[idx] for k, v in arrays.items()}
            else:
                arrays = gather([_tensors(items_of(batch)[i].inputs) for i in idx], sig, target)
            got = self._run_group(runner, arrays, idx, items, keep, columns=whole)
            if isinstance(got, Columns):
                finished = self._clock.now_ms()
                return BatchOutcome(runner.variant, ColumnItems(got), started, finished, got.run_ms,
                                    load_s=load_s)
            exec_s += got
        finished = self._clock.now_ms()
        done = [it if it is not None else ItemOutcome("failed", "runtime_error: no outcome") for it in items]
        return BatchOutcome(runner.variant, done, started, finished, exec_s * 1000.0, next_variant=nxt,
                            load_s=load_s)

    def _generate(self, batch: AnyBatch, runner: GenerativeRunner) -> BatchOutcome:
        """All prompts of the batch in one padded run; a prompt that does not fit fails alone."""
        items: list[ItemOutcome | None] = [None] * len(batch.items)
        prompts: list[Prompt] = []
        idx: list[int] = []
        for i, item in enumerate(items_of(batch)):
            try:
                prompts.append(prompt_of(cast(BatchItem, item), runner))
                idx.append(i)
            except InputError as exc:
                items[i] = ItemOutcome("failed", f"bad_input: {exc}")
        started = self._clock.now_ms()
        exec_s = 0.0
        if prompts:
            exec_s = cast(float, self._run_group(runner, pack(prompts, runner.pad_id), idx, items, prompts=prompts))
            if batch.plan.score:
                score_prompts(self.runners, batch.plan.score, prompts, idx, items)
        finished = self._clock.now_ms()
        done = [it if it is not None else ItemOutcome("failed", "runtime_error: no outcome") for it in items]
        return BatchOutcome(runner.variant, done, started, finished, exec_s * 1000.0)

    def _run_group(self, runner: Runner, arrays: dict[str, np.ndarray], idx: list[int],
                   items: list[ItemOutcome | None], keep: frozenset[str] = frozenset(),
                   prompts: list[Prompt] | None = None, *, columns: bool = False) -> float | Columns:
        """Run one group and fill its ``items``; returns the seconds it took, or with ``columns``
        the group's answers as ``Columns`` when every request completed."""
        t0 = time.perf_counter()
        try:
            out = runner.run(arrays)
            dt = time.perf_counter() - t0
            if prompts is None:
                cols, bad = self._columns(out, len(idx), dt, keep)
                if columns and not any(bad):
                    # Copied: the publisher reads them on its own thread, and a runtime may reuse its
                    # output buffers for the next batch meanwhile (outputs are small: max_out per row).
                    cols.outputs = {k: v.copy() for k, v in cols.outputs.items()}
                    return cols
                split: list[ItemOutcome] = [
                    it if not bad[j] else ItemOutcome("failed", NON_FINITE_OUTPUT, exec_ms=cols.exec_ms[j])
                    for j, it in enumerate(ColumnItems(cols))]
            else:
                split = _generated(out, prompts, dt)
        except Exception as exc:
            dt = time.perf_counter() - t0
            name = type(exc).__name__
            code = "bad_input" if isinstance(exc, InvalidMessage) or name in _INPUT_ERRORS else "runtime_error"
            msg = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else ""
            for i in idx:
                items[i] = ItemOutcome("failed", f"{code}: {name}: {msg}", exec_ms=dt * 1000.0)
            return dt
        for i, outcome in zip(idx, split):
            items[i] = outcome
        return dt

    def _columns(self, out: RunOutput, n: int, dt: float,
                 keep: frozenset[str] = frozenset()) -> tuple[Columns, list[bool]]:
        """The runner's answers as columns, and which rows hold NaN or ±Inf."""
        cols: dict[str, list[Any]] = {}
        for label, arr in (("predictions", out.predictions), ("confidences", out.confidences),
                           ("exits", out.exits), ("request_exec_s", out.request_exec_s)):
            if arr is not None and len(arr) != n:
                raise RuntimeError(f"runner returned {len(arr)} {label} for {n} requests")
            cols[label] = [None] * n if arr is None else np.asarray(arr).tolist()  # Python scalars, in C
        preds, confs, exits = cols["predictions"], cols["confidences"], cols["exits"]
        exec_ms = [dt * 1000.0] * n if out.request_exec_s is None else [s * 1000.0 for s in cols["request_exec_s"]]
        # ``keep``: outputs that go on to the next part of a split model, not to a reply stream.
        kept = {k: _wire_order(v) for k, v in out.outputs.items()
                if v.ndim >= 1 and v.shape[0] == n and (v[0].size <= self._max_out or k in keep)}
        return Columns([None if p is None else int(p) for p in preds],
                       [None if c is None else float(c) for c in confs],
                       [None if e is None else int(e) for e in exits], exec_ms, kept, dt * 1000.0), _non_finite_rows(out, n)


def _tensors(inputs: Mapping[str, Tensor] | Mapping[str, WireTensor]) -> Mapping[str, Tensor]:
    """``inputs`` reads only a tensor's ``dtype``, ``shape`` and ``data``, which both forms have."""
    return cast(Mapping[str, Tensor], inputs)


def _non_finite_rows(out: RunOutput, n: int) -> list[bool]:
    """Per request, whether the model's answer holds NaN or ±Inf: its confidence or any float
    output row. The planner rejects such inputs unless a model is allowed them; this catches what
    still reaches a runner (an allowed model that answers NaN, a planner of an older version), so
    that no one gets a confident prediction computed from NaN."""
    bad = np.zeros(n, dtype=bool)
    arrays = [v for v in out.outputs.values() if v.ndim >= 1 and v.shape[0] == n and v.dtype.kind == "f"]
    if out.confidences is not None:
        arrays.append(np.asarray(out.confidences))
    for a in arrays:
        if a.dtype.kind == "f":
            bad |= ~np.isfinite(a.reshape(n, -1)).all(axis=1)
    return bad.tolist()


def _wire_order(a: np.ndarray) -> np.ndarray:
    """``a`` little-endian and C-ordered, as the wire carries tensors (no copy when it is)."""
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype)


def _rows(a: np.ndarray) -> list[WireRow]:
    """Per-request wire rows of a batch output: one conversion per batch, then byte slices."""
    a = _wire_order(a)
    blob = a.tobytes()
    step = len(blob) // len(a) if len(a) else 0
    name, shape = str(a.dtype), list(a.shape[1:])
    return [WireRow(name, shape, blob[j * step:(j + 1) * step]) for j in range(len(a))]


def _generated(out: RunOutput, prompts: list[Prompt], dt: float) -> list[ItemOutcome]:
    """Per request: its own generated tokens and their confidences (no padding), the mean
    confidence, the exit depth; a forward request's one token is also its ``prediction``."""
    ids, conf = out.outputs["tokens"], out.outputs["confidence"]
    if len(ids) != len(prompts):
        raise RuntimeError(f"runner returned {len(ids)} generations for {len(prompts)} prompts")
    means = out.confidences if out.confidences is not None else np.full(len(prompts), np.nan)
    exits = out.exits.tolist() if out.exits is not None else [None] * len(prompts)
    # Per-token outputs beyond tokens and confidence (exit_at_tau; exits of the early-exit
    # variant) are cut to the request's own count; per-request ones (prompt_ppl) pass as scalars.
    per_token = [k for k in ("exit_at_tau", "exits") if k in out.outputs]
    per_request = [k for k in ("prompt_ppl",) if k in out.outputs]
    res = []
    for j, p in enumerate(prompts):
        tok, cf = _rows(ids[j:j + 1, :p.new])[0], _rows(conf[j:j + 1, :p.new].astype(np.float32))[0]
        rows = {"tokens": tok, "confidence": cf}
        rows.update({k: _rows(out.outputs[k][j:j + 1, :p.new])[0] for k in per_token})
        rows.update({k: _rows(out.outputs[k][j:j + 1])[0] for k in per_request})
        first = int(ids[j, 0]) if p.new else None
        res.append(ItemOutcome(
            "completed", prediction=first if p.forward else None,
            confidence=None if np.isnan(means[j]) else float(means[j]),
            exit=None if (e := exits[j]) is None else int(e), outputs=rows,
            exec_ms=dt * 1000.0))
    return res
