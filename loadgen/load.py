"""The load generator: real held-out inputs, sent at the times an arrival process gives.

One thread sends and collects: it submits every job that is due (pipelined when it has fallen
behind), then reads results until the next arrival is due. After the last arrival it waits a
grace period for stragglers and reports per request.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from adaserve.broker.errors import ConfigError
from adaserve.broker.messages import Job
from adaserve.broker.settings import Limits, Settings
from adaserve.broker.violations import explain
from adaserve.loadgen.summary import LoadSummary, summarize
from adaserve.process import collection_paused
from adaserve.producers.client import Client
from adaserve.producers.jobs import make_job
from adaserve.producers.prepared import PreparedJob
from adaserve.producers.results import JobResult
from adaserve.workload.arrivals import PATTERNS, arrivals
from adaserve.workload.trace import TRACES, load_trace

# (model, n, seed) -> (per-request modality -> array maps, labels or None)
InputSource = Callable[[str, int, int], tuple[Sequence[Mapping[str, np.ndarray]], "np.ndarray | None"]]
POOL = 512  # distinct inputs drawn per run; arrivals cycle through them
PREPARE_BYTES = 512 << 20  # encoded jobs built before a run starts (``_prepare_ahead``)


class LoadOptions(BaseModel):
    """What to send: ``rate`` jobs per second of ``requests_per_job`` requests each."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = "fsdd-cnn"
    rate: float = Field(20.0, gt=0, le=1_000_000)
    duration_s: float = Field(30.0, gt=0, le=86_400)
    requests_per_job: int = Field(1, ge=1)
    deadline_ms: float = Field(200.0, gt=0)
    min_accuracy: float = Field(0.0, ge=0, le=1)
    app: str = Field("default", pattern=r"^[A-Za-z0-9_.:\-]+$", max_length=64)
    run: str = Field(default_factory=lambda: "run-" + uuid.uuid4().hex[:8], pattern=r"^[A-Za-z0-9_.:\-]+$", max_length=64)
    pattern: str = "poisson"
    trace: str = "conv"
    seed: int = 0
    grace_s: float = Field(10.0, ge=0)
    # "auto": generation requests for the language models, forward passes for the others.
    kind: Literal["auto", "forward", "generate"] = "auto"
    # "auto": forward jobs in columns (one stacked array per input: the form the README
    # recommends, one check per input for the SDK and the planner), generation jobs as rows.
    form: Literal["auto", "rows", "columns"] = "auto"
    max_new_tokens: int | None = Field(None, ge=1, le=4096)
    temperature: float = Field(0.0, ge=0.0, le=10.0)

    @model_validator(mode="after")
    def _known(self) -> LoadOptions:
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}")
        if self.trace not in TRACES:
            raise ValueError(f"trace must be one of {', '.join(TRACES)}")
        return self

    @model_validator(mode="after")
    def _form(self) -> LoadOptions:
        if self.form == "columns" and self.request_kind != "forward":
            raise ValueError("generation requests are sent as rows: form must be rows or auto")
        return self

    @property
    def columns(self) -> bool:
        """Whether jobs are sent in columns."""
        return self.form == "columns" or (self.form == "auto" and self.request_kind == "forward")

    @property
    def request_kind(self) -> str:
        if self.kind != "auto":
            return self.kind
        from adaserve.models.datasets import LM_MODELS

        return "generate" if self.model in LM_MODELS else "forward"

    def generation(self) -> dict[str, Any] | None:
        if self.request_kind != "generate":
            return None
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature}


def load_options(**values: Any) -> LoadOptions:
    """``LoadOptions`` with a ``ConfigError`` naming what is wrong."""
    try:
        return LoadOptions(**values)
    except ValidationError as exc:
        raise ConfigError(f"invalid load options: {explain(exc)}") from None


def held_out(model: str, n: int, seed: int) -> tuple[Sequence[Mapping[str, np.ndarray]], np.ndarray | None]:
    """Inputs from the model's test split, never seen in training."""
    from adaserve.models.datasets import sample_inputs  # the model zoo is heavy; import on use

    inputs, labels = sample_inputs(model, n, seed=seed, split="test")
    return inputs, labels


def schedule(opts: LoadOptions) -> np.ndarray:
    gaps = load_trace(opts.trace).gaps_s if opts.pattern == "trace" else None
    return arrivals(opts.pattern, opts.rate, opts.duration_s, seed=opts.seed, gaps_s=gaps)


def run_load(
    settings: Settings, opts: LoadOptions, *, inputs: InputSource | None = None,
    limits: Limits | None = None, progress: bool = True, steady_from_s: float | None = None,
) -> LoadSummary:
    """Send the run, wait ``grace_s`` for stragglers, and summarise it per request; with
    ``steady_from_s``, also the finish rate of the jobs due from that second of the run on."""
    offsets = schedule(opts)
    n_jobs = len(offsets)
    pool_n = max(1, min(POOL, n_jobs * opts.requests_per_job))
    pool, pool_labels = (inputs or held_out)(opts.model, pool_n, opts.seed)
    if len(pool) == 0:
        raise ConfigError(f"no inputs for model {opts.model!r}")
    labels: dict[tuple[str, str], int] | None = {} if pool_labels is not None else None
    collected: list[JobResult] = []
    bar = _Bar(n_jobs) if progress else None
    kind, generation = opts.request_kind, opts.generation()
    steady: set[str] = set()  # the jobs due from ``steady_from_s`` on

    def build(i: int, limits: Limits) -> Job:
        """Job ``i`` of the run: the pool's next ``requests_per_job`` inputs."""
        idx = [(i * opts.requests_per_job + j) % len(pool) for j in range(opts.requests_per_job)]
        items = [pool[x] for x in idx]
        stacked = _stacked(items) if opts.columns else None
        job = make_job(opts.model, items if stacked is None else stacked, opts.deadline_ms,
                       min_accuracy=opts.min_accuracy, app=opts.app, run=opts.run, limits=limits,
                       kind=kind, generation=generation)
        if steady_from_s is not None and offsets[i] >= steady_from_s:
            steady.add(job.id)
        if labels is not None and pool_labels is not None:
            for req, x in zip(job.requests, idx):
                labels[(job.id, req.id)] = int(pool_labels[x])
        return job

    with collection_paused(), Client(settings, limits=limits, read_block_ms=50) as client, (bar or nullcontext()):
        ready = _prepare_ahead(client, build, n_jobs)
        t0 = time.monotonic()
        last_done = t0
        sent = 0
        while sent < n_jobs:
            due = int(np.searchsorted(offsets, time.monotonic() - t0, side="right"))
            if due > sent:
                batch: list[Job | PreparedJob] = []
                for i in range(sent, due):
                    got = ready[i] if i < len(ready) else None
                    batch.append(build(i, client.limits) if got is None else got)
                    if got is not None:
                        ready[i] = None  # sent: its bytes can go
                client.submit_many(batch)
                sent = due
            wait = offsets[sent] - (time.monotonic() - t0) if sent < n_jobs else 0.0
            last_done = _collect(client.poll(max(0.0, wait)), collected, last_done)
            if bar:
                bar.update(sent, len(collected))
        end = time.monotonic() + opts.grace_s
        while client.outstanding and time.monotonic() < end:
            last_done = _collect(client.poll(min(0.2, end - time.monotonic())), collected, last_done)
            if bar:
                bar.update(sent, len(collected))
    return summarize(
        collected, run=opts.run, model=opts.model, pattern=opts.pattern, jobs=n_jobs,
        submitted=n_jobs * opts.requests_per_job, duration_s=opts.duration_s,
        elapsed_s=last_done - t0, deadline_ms=opts.deadline_ms, labels=labels,
        steady=None if steady_from_s is None else (steady, len(steady) * opts.requests_per_job),
        generation=kind == "generate",
    )


def _stacked(items: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray] | None:
    """The requests' inputs as one array per input, a row per request; None when they do not
    stack (different input names or shapes): such a job is sent as rows."""
    names = items[0].keys()
    if any(x.keys() != names for x in items):
        return None
    try:
        return {k: np.stack([x[k] for x in items]) for k in names}
    except ValueError:
        return None


def _prepare_ahead(client: Client, build: Callable[[int, Limits], Job], n_jobs: int) -> list[PreparedJob | None]:
    """The run's first jobs, built, validated and encoded before its clock starts, as many as
    ``PREPARE_BYTES`` holds: building and encoding a job cost the generator about 80 µs of CPU
    (fsdd-cnn, 4 requests), which, paid during the run, came off the two cores the pipeline it
    measures runs on. The rest are built when due."""
    out: list[PreparedJob | None] = []
    size = 0
    while len(out) < n_jobs and size < PREPARE_BYTES:
        got = client.prepare([build(len(out), client.limits)])[0]
        size += len(got.raw)
        out.append(got)
    return out


def _collect(batch: list[JobResult], into: list[JobResult], last: float) -> float:
    into.extend(batch)
    return time.monotonic() if any(j.completed for j in batch) else last


class _Bar:
    """sent / received / elapsed, on stderr so that ``--json`` output stays clean."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), console=Console(stderr=True))
        self._sent = self._p.add_task("sent", total=total)
        self._recv = self._p.add_task("received", total=total)

    def update(self, sent: int, received: int) -> None:
        self._p.update(self._sent, completed=sent)
        self._p.update(self._recv, completed=received)

    def __enter__(self) -> _Bar:
        self._p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._p.stop()
