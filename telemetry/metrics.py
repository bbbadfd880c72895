"""Prometheus metrics built from telemetry events, in the exporter's own registry.

Counters and histograms here grow as events arrive (``EventMetrics.apply``); what is read from
the server at scrape time (queue depths, slots, dead letters) is ``telemetry.scrape``. Label values
come from producers and workers, so each label keeps at most ``MAX_VALUES`` distinct values and
folds the rest into ``other``: a producer inventing app names cannot grow the exporter without end.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram

from adaserve.broker.events import (
    BatchDeadLettered,
    BatchDispatched,
    BatchFinished,
    Event,
    JobCompleted,
    JobExpired,
    JobRejected,
    PlannerState,
)

MAX_VALUES = 100
OTHER = "other"
_CLEAN = re.compile(r"[^A-Za-z0-9_.:\-]")
STATUSES = ("completed", "expired", "rejected", "failed")
# Seconds: from a few ms (one small batch on a CPU) to a minute (a long generation under load).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Labels:
    """Bounded label values: known ones as they are (cleaned, at most 64 characters), new ones
    while fewer than ``limit`` are known, ``other`` after that."""

    def __init__(self, limit: int = MAX_VALUES) -> None:
        self.limit = limit
        self._seen: dict[str, set[str]] = {}

    def __call__(self, label: str, value: str) -> str:
        v = _CLEAN.sub("_", value)[:64] or "-"
        seen = self._seen.setdefault(label, set())
        if v in seen:
            return v
        if len(seen) >= self.limit:
            return OTHER
        seen.add(v)
        return v


class EventMetrics:
    def __init__(self, registry: CollectorRegistry, labels: Labels | None = None) -> None:
        self.label = labels or Labels()
        reg = registry
        self.events = Counter("adaserve_events", "Telemetry events read, by type.", ["event"], registry=reg)
        self.requests = Counter("adaserve_requests", "Requests that reached a terminal state.",
                                ["model", "app", "status"], registry=reg)
        self.reasons = Counter("adaserve_request_reasons", "Requests expired or rejected, by reason code.",
                               ["status", "reason"], registry=reg)
        self.jobs = Counter("adaserve_jobs", "Jobs whose last request ended, by whether the job met its deadline.",
                            ["model", "app", "deadline_met"], registry=reg)
        self.job_latency = Histogram("adaserve_job_latency_seconds", "Submission to the job's last result.",
                                     ["model", "app"], buckets=LATENCY_BUCKETS, registry=reg)
        self.queue = Histogram("adaserve_request_queue_seconds", "Submission to the start of the request's batch.",
                               ["model", "app"], buckets=LATENCY_BUCKETS, registry=reg)
        self.execution = Histogram("adaserve_request_execution_seconds", "Execution of the request's batch.",
                                   ["model", "app"], buckets=LATENCY_BUCKETS, registry=reg)
        self.total = Histogram("adaserve_request_latency_seconds", "Submission to the completed request's result.",
                               ["model", "app"], buckets=LATENCY_BUCKETS, registry=reg)
        self.dispatched = Counter("adaserve_batches_dispatched", "Batches the planners sent, by pool and model.",
                                  ["pool", "model"], registry=reg)
        self.finished = Counter("adaserve_batches_finished", "Batches workers finished, by pool and model.",
                                ["pool", "model"], registry=reg)
        self.batch_size = Histogram("adaserve_batch_size", "Requests per finished batch.", ["pool", "model"],
                                    buckets=BATCH_SIZE_BUCKETS, registry=reg)
        self.batch_exec = Histogram("adaserve_batch_execution_seconds", "A finished batch's execution time.",
                                    ["pool", "model"], buckets=LATENCY_BUCKETS, registry=reg)
        self.deadlettered = Counter("adaserve_batches_deadlettered", "Batches dead-lettered after too many deliveries.",
                                    ["pool", "reason"], registry=reg)
        self.decisions = Counter("adaserve_planner_decisions", "Scheduler decisions (next_batch calls) made.",
                                 ["planner"], registry=reg)

    def apply(self, ev: Event) -> None:
        lab = self.label
        self.events.labels(ev.event).inc()
        if isinstance(ev, JobCompleted):
            model, app = lab("model", ev.model), lab("app", ev.app)
            for status in STATUSES:
                n = getattr(ev, status)
                if n:
                    self.requests.labels(model, app, status).inc(n)
            self.jobs.labels(model, app, "true" if ev.deadline_met else "false").inc()
            self.job_latency.labels(model, app).observe(ev.latency_ms / 1000.0)
        elif isinstance(ev, JobRejected):
            # A job refused as a whole never reaches the finaliser's job.completed: its requests end here.
            self.requests.labels("-", lab("app", ev.app or "-"), "rejected").inc(ev.requests)
            self.reasons.labels("rejected", lab("reason", ev.reason)).inc(ev.requests)
        elif isinstance(ev, JobExpired):
            self.reasons.labels("expired", lab("reason", ev.reason)).inc(len(ev.request_ids))
        elif isinstance(ev, BatchDispatched):
            self.dispatched.labels(lab("pool", ev.pool), lab("model", ev.model)).inc()
        elif isinstance(ev, BatchFinished):
            self._finished(ev)
        elif isinstance(ev, BatchDeadLettered):
            self.deadlettered.labels(lab("pool", ev.pool), lab("reason", ev.reason)).inc()
        elif isinstance(ev, PlannerState):
            self.decisions.labels(lab("planner", ev.planner)).inc(ev.decisions)

    def _finished(self, ev: BatchFinished) -> None:
        pool, model = self.label("pool", ev.pool), self.label("model", ev.model)
        self.finished.labels(pool, model).inc()
        self.batch_size.labels(pool, model).observe(ev.ran)
        self.batch_exec.labels(pool, model).observe(ev.exec_ms / 1000.0)
        for it in ev.items:
            if it.status != "completed":
                continue
            app = self.label("app", it.app)
            self.queue.labels(model, app).observe(it.queue_ms / 1000.0)
            self.execution.labels(model, app).observe(it.exec_ms / 1000.0)
            self.total.labels(model, app).observe(it.total_ms / 1000.0)
