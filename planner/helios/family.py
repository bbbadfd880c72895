"""Admission of a job that names a family: which candidates could serve every one of its requests.

A family is served when at least one candidate has a live worker and accepts the job as if the
job had named it (input names, shapes, token ids in its vocabulary, prompt plus new tokens within
its context). When none does, the job is rejected with each candidate's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adaserve.broker.errors import InvalidMessage
from adaserve.broker.messages import Job
from adaserve.broker.settings import Limits
from adaserve.planner.validate import check_job

from .repository import Candidate


def servable(job: Job, cands: Sequence[Candidate], live: Mapping[str, dict[str, dict[str, Any]] | None],
             limits: Limits | None = None) -> list[str]:
    """The candidates (names) that can serve ``job``; ``InvalidMessage("no_candidate")`` with
    every candidate's reason when there is none. ``live`` maps each model a live worker serves
    to its input spec (None when it did not advertise one)."""
    if not cands:
        raise InvalidMessage("no_candidate", f"family {job.model!r} has no candidate models")
    ok, why = [], []
    for c in cands:
        if c.name not in live:
            why.append(f"{c.name}: no live worker serves it")
            continue
        try:
            check_job(job.model_copy(update={"model": c.name}), known=True, inputs=live[c.name], limits=limits)
        except InvalidMessage as exc:
            why.append(f"{c.name}: {exc.detail}")
            continue
        ok.append(c.name)
    if not ok:
        raise InvalidMessage("no_candidate", f"no candidate of family {job.model!r} can serve this job ("
                             + "; ".join(why) + ")")
    return ok
