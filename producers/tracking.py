"""A submitted job's bookkeeping inside a ``Client``: which requests have ended, with what.

Results are filed as the maps read from the reply stream (``broker.replies.read_reply_maps``
checked their ids and summary fields); ``JobResult`` builds ``Result`` objects only when asked."""

from __future__ import annotations

from typing import Any

from adaserve.broker.replies import ColumnRef, ColumnsEntry
from adaserve.producers.results import JobResult


class Tracked:
    """Results filed by request id; mutated only under the client's lock.

    The job's inputs are not kept: a load generator with thousands of jobs in flight would
    otherwise hold every tensor it ever sent.
    """

    __slots__ = (
        "_index",
        "_slots",
        "app",
        "deadline_ms",
        "duplicates",
        "ended",
        "entry_id",
        "job_id",
        "model",
        "request_ids",
        "result",
        "run",
        "submitted_ms",
    )

    def __init__(self, job_id: str, app: str, model: str, run: str, deadline_ms: float,
                 request_ids: tuple[str, ...]) -> None:
        self.job_id = job_id
        self.app = app
        self.model = model
        self.run = run
        self.deadline_ms = deadline_ms
        self.request_ids = request_ids
        self._index = {rid: i for i, rid in enumerate(request_ids)}
        self._slots: list[dict[str, Any] | ColumnRef | None] = [None] * len(request_ids)
        self.ended = 0
        self.duplicates = 0  # a second result for a request: never expected (the finaliser ends each once)
        self.entry_id = ""
        self.submitted_ms = 0.0
        self.result: JobResult | None = None

    def set_entry(self, entry_id: str) -> None:
        self.entry_id = entry_id
        self.submitted_ms = float(entry_id.split("-", 1)[0])

    def add_columns(self, entry: ColumnsEntry) -> bool:
        """File a ``columns`` entry without a map per request (the first result per request wins);
        True when the job just finished. A job that ran as one batch, its every request in this
        entry in order, is filed whole; the requests of one that was split over batches are each
        filed as a reference to their row, read for the summaries and expanded only for
        ``JobResult.results``."""
        if self.result is not None:
            return False
        if not self.ended and tuple(entry.request_ids) == self.request_ids:
            self.ended = len(self.request_ids)
            self.result = JobResult(
                job_id=self.job_id, app=self.app, model=self.model, run=self.run,
                deadline_ms=self.deadline_ms, submitted_ms=self.submitted_ms, columns=entry,
            )
            return True
        slots, index = self._slots, self._index
        for j, rid in enumerate(entry.request_ids):
            at = index.get(rid)
            if at is None:
                continue
            if slots[at] is not None:
                self.duplicates += 1
                continue
            slots[at] = ColumnRef(entry, j)
            self.ended += 1
        return self._finish()

    def add(self, res: dict[str, Any]) -> bool:
        """File one result map (the first per request wins); True when the job just finished."""
        if self.result is not None:
            return False
        rid = res["request_id"]
        if rid == "":  # the whole job was rejected before its requests could be read
            for i, slot in enumerate(self._slots):
                if slot is None:
                    self._slots[i] = {**res, "request_id": self.request_ids[i]}
                    self.ended += 1
        else:
            at = self._index.get(rid)
            if at is None:
                return False
            if self._slots[at] is not None:
                self.duplicates += 1
                return False
            self._slots[at] = res
            self.ended += 1
        return self._finish()

    def _finish(self) -> bool:
        if self.ended < len(self._slots):
            return False
        self.result = JobResult(
            job_id=self.job_id, app=self.app, model=self.model, run=self.run,
            deadline_ms=self.deadline_ms, submitted_ms=self.submitted_ms,
            maps=[s for s in self._slots if s is not None],
        )
        return True
