"""A job validated and encoded for one client ahead of its submission (``Client.prepare``)."""

from __future__ import annotations

from adaserve.broker.messages import Job
from adaserve.producers.tracking import Tracked


class PreparedJob:
    """The bytes ``Client.submit_many`` will XADD, and what the client tracks the job by. It
    keeps no ``Job`` (nor its tensors beyond the encoded bytes), so a producer can hold many.
    Each submission tracks the job afresh: a prepared job sent twice is a resubmission of the
    same bytes, which the planner drops as a producer's retry."""

    __slots__ = ("_meta", "client_id", "job_id", "raw")

    def __init__(self, client_id: str, job: Job, raw: bytes) -> None:
        self.client_id, self.job_id, self.raw = client_id, job.id, raw
        self._meta = (job.app, job.model, job.run, job.slo.deadline_ms, tuple(r.id for r in job.requests))

    def tracked(self) -> Tracked:
        app, model, run, deadline_ms, request_ids = self._meta
        return Tracked(self.job_id, app, model, run, deadline_ms, request_ids)

    def __repr__(self) -> str:
        return f"PreparedJob({self.job_id!r}, {len(self.raw)} bytes)"
