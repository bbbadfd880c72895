"""The caller's side of one submitted job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adaserve.broker.errors import JobTimeout
from adaserve.producers.results import JobResult
from adaserve.producers.tracking import Tracked

if TYPE_CHECKING:
    from adaserve.producers.client import Client


class JobHandle:
    """A submitted job: its ids, submission time, and its results once every request ended."""

    def __init__(self, client: Client, tracked: Tracked) -> None:
        self._client = client
        self._t = tracked

    @property
    def job_id(self) -> str:
        return self._t.job_id

    @property
    def entry_id(self) -> str:
        """The ingress stream entry id; its milliseconds are the job's submission time."""
        return self._t.entry_id

    @property
    def submitted_ms(self) -> float:
        return self._t.submitted_ms

    def done(self) -> bool:
        return self._t.result is not None

    def result(self, timeout: float | None = None) -> JobResult:
        """Wait up to ``timeout`` seconds (None: forever) for every request's result."""
        if not self._client._pump(self.done, timeout):
            raise JobTimeout(
                f"job {self.job_id}: {self._t.ended} of {len(self._t.request_ids)} requests ended within {timeout} s"
            )
        return self._client._claim(self._t)

    def __repr__(self) -> str:
        return f"JobHandle({self.job_id!r}, done={self.done()})"
