"""What a job's results add up to, for the caller that submitted it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from adaserve.broker.messages import Result
from adaserve.broker.replies import ColumnRef, ColumnsEntry, results_of

STATUSES = ("completed", "expired", "rejected", "failed")


class Outcome(NamedTuple):
    """How one request ended, read from the fields the client checked on arrival (no ``Result``
    is built): ``reason`` is empty for a completed request, ``prediction`` None where the model
    gives none, ``total_ms`` from submission to the end."""

    request_id: str
    status: str
    reason: str
    prediction: int | None
    total_ms: float


class JobResult:
    """Every request's result of one job, in request order.

    A job the planner could not read at all is rejected with one result whose ``request_id`` is
    empty; it is repeated here under each request id so that ``results`` always lines up with
    the job's requests.

    The client files results as the maps it read (their summary fields checked, see
    ``broker.replies.read_reply_maps``): the summaries below (``counts``, ``completed``,
    ``predictions``, ``latency_ms`` ...) read those fields, and ``results`` validates the maps
    into ``Result`` objects the first time it is asked (``InvalidMessage`` if one is malformed).
    Validating every result on arrival was most of what collecting results cost.
    """

    __slots__ = ("_columns", "_maps", "_results", "app", "deadline_ms", "job_id", "model", "run", "submitted_ms")

    def __init__(self, job_id: str, app: str, model: str, run: str, deadline_ms: float, submitted_ms: float,
                 results: Sequence[Result] | None = None, *,
                 maps: Sequence[dict[str, Any] | ColumnRef] | None = None,
                 columns: ColumnsEntry | None = None) -> None:
        if (results is not None) + (maps is not None) + (columns is not None) != 1:
            raise TypeError("JobResult takes one of results, maps or columns")
        self.job_id, self.app, self.model, self.run = job_id, app, model, run
        self.deadline_ms, self.submitted_ms = deadline_ms, submitted_ms
        self._results: tuple[Result, ...] | None = None if results is None else tuple(results)
        # maps, or references to rows of ``columns`` entries (a job split over batches)
        self._maps: tuple[dict[str, Any] | ColumnRef, ...] | None = None if maps is None else tuple(maps)
        # A job that completed in one batch, filed from its ``columns`` entry: the summaries read
        # the columns, and the maps are built only for ``results``.
        self._columns = columns

    @property
    def results(self) -> tuple[Result, ...]:
        if self._results is None:
            if self._maps is None:
                assert self._columns is not None
                self._maps = tuple(self._columns.maps())
            self._results = tuple(results_of([m.entry.maps()[m.j] if isinstance(m, ColumnRef) else m
                                              for m in self._maps]))
        return self._results

    @property
    def outcomes(self) -> list[Outcome]:
        """Each request's ending, in request order, without building ``Result`` objects: what a
        caller that counts and times results needs (building them costs about 60 µs a request)."""
        if self._columns is not None:
            c = self._columns
            return [Outcome(rid, "completed", "", p, c.total_ms) for rid, p in zip(c.request_ids, c.predictions)]
        if self._maps is not None:
            return [Outcome(m.entry.request_ids[m.j], "completed", "", m.entry.predictions[m.j], m.entry.total_ms)
                    if isinstance(m, ColumnRef) else
                    Outcome(m["request_id"], m["status"], m.get("reason", ""), m.get("prediction"),
                            m["timings"]["total_ms"])
                    for m in self._maps]
        return [Outcome(r.request_id, r.status, r.reason, r.prediction, r.timings.total_ms) for r in self.results]

    def __len__(self) -> int:
        if self._columns is not None:
            return len(self._columns.request_ids)
        return len(self._maps) if self._maps is not None else len(self.results)

    @property
    def statuses(self) -> list[str]:
        """Each request's status, in request order."""
        if self._columns is not None:
            return ["completed"] * len(self._columns.request_ids)
        if self._maps is not None:
            return ["completed" if isinstance(m, ColumnRef) else m["status"] for m in self._maps]
        return [r.status for r in self.results]

    @property
    def counts(self) -> dict[str, int]:
        c: Counter[str] = Counter(self.statuses)
        return {s: c.get(s, 0) for s in STATUSES}

    @property
    def completed(self) -> int:
        return self.statuses.count("completed")

    @property
    def ok(self) -> bool:
        """Every request completed."""
        return self.completed == len(self)

    @property
    def latency_ms(self) -> float:
        """Effective latency: from submission until the job's last request ended."""
        return max((t for *_, t in self.outcomes), default=0.0)

    @property
    def deadline_met(self) -> bool:
        """Every request completed within the job's deadline."""
        return self.ok and all(t <= self.deadline_ms for *_, t in self.outcomes)

    @property
    def on_time(self) -> int:
        """Requests that completed within the deadline."""
        return sum(s == "completed" and t <= self.deadline_ms for _, s, _, _, t in self.outcomes)

    @property
    def predictions(self) -> list[int | None]:
        return [p if s == "completed" else None for _, s, _, p, _ in self.outcomes]

    @property
    def reasons(self) -> dict[str, int]:
        """Why requests did not complete: reason -> count."""
        c = Counter(why or s for _, s, why, _, _ in self.outcomes if s != "completed")
        return dict(c)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobResult):
            return NotImplemented
        return (self.job_id, self.app, self.model, self.run, self.deadline_ms, self.submitted_ms, self.results) == (
            other.job_id, other.app, other.model, other.run, other.deadline_ms, other.submitted_ms, other.results)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JobResult({self.job_id!r}, {self.counts})"
