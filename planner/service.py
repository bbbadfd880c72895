"""The live planner: a thin I/O loop around the pure schedulers.

Each iteration reads new jobs (XREADGROUP on the ingress stream) and telemetry (heartbeats and
``batch.finished`` feedback), asks the model's scheduler for a batch whenever a pool that serves
the model has a free slot, publishes the batch, ends expired requests and acks a job's ingress
entry once all its requests have left the planner. When every slot is busy it blocks on telemetry,
because only a finished batch can free a slot; when nothing waits it blocks on ingress.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from adaserve.broker import streams
from adaserve.broker.clock import ServerClock
from adaserve.broker.codec import encode, encode_map
from adaserve.broker.connection import connect
from adaserve.broker.direct import Direct
from adaserve.broker.errors import InvalidMessage
from adaserve.broker.finalize import Also, Finalizer, Packed
from adaserve.broker.keys import PLANNER_GROUP, Keys
from adaserve.broker.messages import Job, Plan
from adaserve.broker.outage import Outage, is_transient
from adaserve.broker.profiles import Profile
from adaserve.broker.settings import Limits, Settings, default_limits
from adaserve.planner.config import PlannerConfig, SchedulerFactory, default_factory
from adaserve.planner.core import Decision, Pending, Scheduler
from adaserve.planner.dispatch import build_batches, expiries
from adaserve.planner.follow import Finished, Follower
from adaserve.planner.heft.heft import Choice
from adaserve.planner.heft.live import LivePlacement, outcome_event
from adaserve.planner.helios import Helios, HeliosParams, HeliosScheduler, Repository, load_repository, servable
from adaserve.planner.intake import Intake
from adaserve.planner.orloj.feed import OnlineFeedback
from adaserve.planner.overload import for_planner
from adaserve.planner.placement import parse_splits, place
from adaserve.planner.pools import PoolView
from adaserve.planner.profiles import fallback_profile
from adaserve.planner.report import StateReport
from adaserve.planner.stall import StallWatch, describe
from adaserve.planner.state import HeldJob

__all__ = ["Planner"]
log = logging.getLogger("adaserve.planner")


class Planner:
    def __init__(self, settings: Settings, config: PlannerConfig | None = None, *, limits: Limits | None = None,
                 factory: SchedulerFactory | None = None, helios: HeliosParams | None = None) -> None:
        self.settings, self.config = settings, config or PlannerConfig()
        self.limits = limits or default_limits()
        self.keys = Keys(settings.namespace)
        self.r = connect(settings, block_ms=max(settings.block_ms, 500))
        # The loop's round trips (its reads, its pipelines) on one held connection
        self._direct = Direct(self.r)
        self.fin = Finalizer(self.r, settings, direct=self._direct)
        self.intake = Intake(self.r, settings, self.limits, self.fin, check=self._check_job, shed=self._shed,
                             family=self._is_family, direct=self._direct)
        self.helios = helios or HeliosParams()
        self._repo: Repository | None = None  # HELIOS's families, read from the models on first need
        self.consumer = self.config.consumer()
        self._splits = parse_splits(tuple(self.config.split))
        self.factory = factory or default_factory(self.config.policy, self.config.modality, settings,
                                                     max_batch=self.config.max_batch, app_ratio=self.config.app_ratio)
        self.scheds: dict[str, Scheduler] = {}
        self.held: dict[str, HeldJob] = {}
        self.overload = for_planner(max_queue=self.config.max_queue, admission=self.config.admission,
                                    max_batch=self.config.max_batch)
        self._admitting: dict[str, int] = {}  # requests admitted in this read, not yet queued
        self._read_ms = 0.0  # when the current ingress read began (server clock)
        self.follow = Follower(self.r, self.keys, settings.worker_ttl_s, overload=self.overload, direct=self._direct)
        self.pools = self.follow.pools
        self.clock = ServerClock()
        self._next_clock = self._next_touch = 0.0
        self._stalled = False
        self._blocked_s = 0.0  # the current step's seconds in blocking reads
        self.stall = StallWatch()
        self._pipe = self.r.pipeline(transaction=False)
        # What a step expired, ended once at its end on the pipeline's round trip (``_end_expired``)
        self._expiring: list[tuple[list[Pending], float]] = []
        self._takers: list[tuple[int, Callable[[Any], int]]] = []  # script replies due from the pipeline
        # ORLOJ's long-term feedback: re-runs sampled requests alone while `adaserve profiler` runs.
        self.feedback = OnlineFeedback(self.r, settings, mode=self.config.online_feedback)
        self.report = StateReport(self.consumer, settings.heartbeat_s)
        self._heard: list[float] = []  # finishes read this step, stamped when it can act on them
        self.follow.on_heard = self._heard.append
        # StarONNX's placement per batch (planner/heft), when configured
        self.heft = (LivePlacement.build(self.config.heft_profile, tuple(self.config.pool_kind), frozenset(self._splits))
                     if self.config.placement == "heft" else None)
        if self.heft is not None:
            self.follow.on_finished = self._heft_finished

    # -- clock -------------------------------------------------------------------------------
    def now_ms(self) -> float:
        return self.clock.now_ms()

    def _sync_clock(self) -> None:
        # Deadlines are in server time (the ingress entry id); align the local clock to it.
        self.clock.sync(self.r)
        self._next_clock = time.time() + 30.0

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, *, rebuilt: bool = False) -> None:
        """Join the planners' group and take up what this planner holds on the server; with
        ``rebuilt`` (after an outage) the jobs it had read come back from its pending entries."""
        if streams.ensure_group(self.r, self.keys.jobs, PLANNER_GROUP) and rebuilt:
            log.error("the planners' consumer group was gone when the broker came back: the server lost "
                      "its data (no persistence, or a failover to a replica without it); jobs submitted "
                      "before the outage and not yet planned are lost, and their producers will time out")
        self._sync_clock()
        self.follow.start()
        if rebuilt:
            own = self.intake.own(self.consumer)
            if own:
                log.info("re-admitting %d job entries this planner held before the outage", len(own))
                self._admit(own)
        self._reclaim()

    def run(self, stop: threading.Event) -> None:
        """Plan until ``stop``; a broker outage is waited out (backoff, one line when it starts and
        one when it ends), never a reason to exit, unless it outlasts ``max_outage_s``."""
        outage = Outage(f"planner {self.consumer}", max_s=self.settings.max_outage_s, logger=log)
        started = False
        try:
            while not stop.is_set():
                try:
                    if not started:
                        self.start()
                        started = True
                        log.info("planner %s up (policy %s, modality %s)", self.consumer, self.config.policy,
                                 self.config.modality)
                    elif outage.down:
                        self._rebuild()
                    self.step()
                except redis.RedisError as exc:
                    if not is_transient(exc):
                        raise
                    stop.wait(outage.failed(exc))
                    continue
                outage.recovered()
        finally:
            self._goodbye()
            self.close()

    def _goodbye(self) -> None:
        """Leave the planners hash, so a health check does not wait for this entry to go stale."""
        try:
            self.r.hdel(self.keys.planners, self.consumer)
            if self.heft is not None:
                self.r.hdel(self.keys.placement, self.consumer)
        except redis.RedisError as exc:
            log.warning("could not announce the stop: %s", exc)

    def _rebuild(self) -> None:
        """Start again from what the server holds. Whether the commands queued when the connection
        broke were applied is unknown, so this planner drops everything it kept about jobs and
        re-reads its pending ingress entries: a request already ended stays ended (its flag is on
        the server), one already sent in a batch may run twice, and the finaliser keeps its
        first result only. The schedulers start again from the models' profiles; the pools'
        measured delays are kept."""
        self._pipe.reset()
        self._expiring.clear()
        self._takers.clear()
        self.close()
        self.scheds.clear()
        self.held.clear()
        self.follow.reset()
        self.start(rebuilt=True)

    def close(self) -> None:
        """Stop what schedulers run beside the loop (MOSEL's monitor thread)."""
        for sched in self.scheds.values():
            sched.close()

    def step(self) -> None:
        started, self._blocked_s = time.perf_counter(), 0.0
        self.pools.refresh(self.now_ms())
        self.follow.limit_pools(self.config.queue_ms)
        counted = self.pools.workers > 0  # the ingress read below also brings the pools' in-flight counts
        if not counted:
            # No worker to plan for: leave jobs in the stream rather than reject them as unknown.
            self._follow_blocking(200)
        elif self._pending() and not any(v.free > 0 for v in self.pools.views.values()):
            # Only a finished batch (a telemetry event) can free a slot.
            self._follow_blocking(20)
            self._read_ingress(block_ms=None, read=False)
        else:
            # Pending work that no scheduler released last time (MOSEL's jobs wait for their first
            # monitor pass) is worth a short wait on ingress instead of a busy loop.
            idle = self.settings.block_ms if not self._pending() else (2 if self._stalled else None)
            self._read_ingress(block_ms=idle, read=True)
        self._stalled = sent = False
        self._stamp_heard()
        if self._pending():
            if not counted:
                self.follow.refresh_inflight()
            sent = self._dispatch()
            self._stalled = not sent
            now = self.now_ms()
            if sent:
                self.stall.sent(now)
            elif self.stall.due(now):
                self._tell_stall(now)
        else:
            self.stall.idle()
        self._end_expired()
        self._scheduler_events()
        self._housekeeping()
        self._execute()
        lags = self.follow.inflight.stamp(self.now_ms())
        if lags:
            self.report.sent(lags)
        if sent:  # how soon the loop can send again: what the pipeline simulator gates dispatch by
            self.report.stepped((time.perf_counter() - started - self._blocked_s) * 1000.0)

    def _stamp_heard(self) -> None:
        """The finishes read this step, reported as heard now, when the step comes to dispatch:
        one read while the loop waited for a slot is followed by the admission of what arrived
        meanwhile (milliseconds when the planner is behind), and its slot waits for that too,
        which the pipeline simulator replays as the hearing delay."""
        if self._heard:
            now = self.now_ms()
            for finished_ms in self._heard:
                self.report.heard(finished_ms, now)
            self._heard.clear()

    def _follow_blocking(self, block_ms: int) -> None:
        t = time.perf_counter()
        self.follow.read(block_ms, self.scheds)
        self._blocked_s += time.perf_counter() - t

    def _tell_stall(self, now_ms: float) -> None:
        log.warning("no batch sent for %.0f ms while requests came in (held or expired): %s",
                    self.stall.stalled_ms(now_ms), describe(self.follow, self.scheds, now_ms))

    def _pending(self) -> bool:
        return any(len(s) for s in self.scheds.values())

    # -- ingress -------------------------------------------------------------------------------
    def _read_ingress(self, block_ms: int | None, *, read: bool) -> None:
        """New jobs admitted; the telemetry since the last read (with ``read``) and the pools'
        in-flight counts come back on the round trip that registers the jobs."""
        t = time.perf_counter()
        entries = streams.read_group(self._direct, [self.keys.jobs], PLANNER_GROUP, self.consumer,
                                     count=self.config.read_count, block_ms=block_ms)
        if block_ms is not None:  # a wait for work is not work (a non-blocking read's round trip is)
            self._blocked_s += time.perf_counter() - t
        later: list[Callable[[], None]] = []  # applied once the jobs are held, as when they were two reads

        def also(p: redis.client.Pipeline[bytes]) -> Callable[[list[Any]], None]:
            take = self.follow.queue(p, self.scheds, read=read)
            return lambda replies: later.append(lambda: take(replies))

        self._admit(entries, also=also)
        for apply in later:
            apply()

    def _admit(self, entries: list[streams.Entry], *, also: Also | None = None) -> None:
        # An entry delivered again while held (a group's last-delivered-id moved back by an AOF
        # restart, redis #7105) is already being planned.
        held = {h.entry_id for h in self.held.values()}
        fresh = [e for e in entries if e.id not in held]
        self._admitting.clear()
        # One clock read per read: every job of it is checked at the time its refusal is stamped
        # with, which is what the pipeline simulator replays (planner/sim/pipeline.py).
        self._read_ms = self.now_ms()
        for e, job, done in self.intake.admit(fresh, self.pools, self._pipe, self._read_ms, also=also):
            self._hold(e, job, done)

    def _hold(self, e: streams.Entry, job: Job, done: set[str]) -> None:
        todo = [r for r in job.requests if r.id not in done]
        held = HeldJob(job, e.id, float(e.ms), len(todo))
        if not todo:
            self.intake.done(self._pipe, [e.id])
            return
        self.held[job.id] = held
        sched = self._sched(job.model)
        # once per job, not per request: the entry id is parsed, and the clock read, on each call
        ms, now_s, n = e.ms, self.now_ms() / 1000.0, len(job.requests)
        arrival_s, deadline_s, floor = ms / 1000.0, (ms + job.slo.deadline_ms) / 1000.0, job.slo.min_accuracy
        if self.heft is not None:
            self.heft.placer.arrived(job.model, now_s, len(todo))
        items = [Pending(job.id, req.id, job.app, job.model, arrival_s, deadline_s, job.priority, (held, req),
                         floor=floor, job_size=n) for req in todo]
        if deadline_s * 1000.0 <= self._read_ms:
            # Read after its deadline (behind a backlog in the ingress stream, or a deadline no
            # pipeline meets): it ends with the step's other expiries without entering the
            # policy, whose insertion and expiry cost a planner that has fallen behind what it
            # needs to catch up.
            self._expiring.append((items, self._read_ms))
        else:
            sched.add_many(items, now_s)
        # Stamped with the read's time, when admission decided, as a refusal is: registering the
        # read's jobs takes a round trip, and the simulator replays when each job was read.
        self._event_at(self._read_ms, "job.accepted", {
            "job_id": job.id, "app": job.app, "model": job.model, "run": job.run, "requests": len(job.requests),
            "deadline_ms": job.slo.deadline_ms, "submitted_ms": float(e.ms)})

    def _repository(self) -> Repository:
        if self._repo is None:
            self._repo = load_repository(self.settings.data_dir)
        return self._repo

    def _is_family(self, name: str) -> bool:
        """A task family (HELIOS) that no worker serves under that name as a model."""
        return not self.pools.known(name) and self._repository().is_family(name)

    def _check_job(self, job: Job, entry_ms: float) -> None:
        """Admission by the model's scheduler, when it has a say (MOSEL: is the floor reachable),
        then by load: can the queue ahead serve the job by its deadline (``overloaded``). A job
        naming a family needs a candidate that can serve it (``no_candidate``, with the reasons)."""
        only: list[str] | None = None
        if self._is_family(job.model):
            live = {m: self.pools.inputs.get(m) for v in self.pools.views.values() for m in v.models}
            only = servable(job, self._repository().candidates(job.model), live, self.limits)
        sched = self._sched(job.model, job.slo.objective, only)
        sched.check_job(job)
        n = len(job.requests)
        self._load_verdict(job.model, sched, n, entry_ms, job.slo.deadline_ms)
        self._admitting[job.model] = self._admitting.get(job.model, 0) + n

    def _load_verdict(self, model: str, sched: Scheduler, requests: int, entry_ms: float, deadline_ms: float) -> None:
        """Admission control's verdict at the read's time: ``overloaded`` when the queue ahead
        (what the scheduler holds and what this read admitted) cannot serve the job in time."""
        queued = len(sched) + self._admitting.get(model, 0)
        why = self.overload.check(model, queued, requests, entry_ms, deadline_ms, self._read_ms)
        if why is not None:
            raise InvalidMessage("overloaded", why)

    def _shed(self, body: dict[str, Any], entry_ms: float) -> None:
        """``_check_job``'s load verdict on a job's unpacked map, for a model already planned for:
        what the verdict reads (the model, the deadline, the number of requests) is taken only
        when it has the right type, else validation decides first."""
        model, slo = body.get("model"), body.get("slo")
        sched = self.scheds.get(model) if isinstance(model, str) else None
        got = slo.get("deadline_ms") if isinstance(slo, dict) else None
        reqs = body.get("requests", body.get("request_ids"))
        if sched is None or type(got) not in (int, float) or not isinstance(reqs, list) or not reqs:
            return
        deadline = float(got)  # type: ignore[arg-type]
        if not 0 < deadline < math.inf:
            return
        assert isinstance(model, str)
        self._load_verdict(model, sched, len(reqs), entry_ms, deadline)

    def _sched(self, model: str, objective: str = "throughput", only: list[str] | None = None) -> Scheduler:
        s = self.scheds.get(model)
        if s is None and self._is_family(model):
            # The family's first job sets the objective its scheduler optimises, and the candidates
            # a live worker serves are the ones it chooses among.
            cands = tuple(c for c in self._repository().candidates(model) if only is None or c.name in only)
            s = self.scheds[model] = HeliosScheduler(Helios(model, cands, objective, self.helios))
            log.info("%s: HELIOS over %s (objective %s)", model, ", ".join(c.name for c in cands), objective)
        if s is None:
            raw = self.r.get(self.keys.profile(model))
            profile = Profile.from_json(raw) if raw else None
            if profile is None:
                found = fallback_profile(self.settings.data_dir, model)
                if found is not None:
                    profile = found[0]
                    log.info("%s: no profile in Redis; the policy starts from %s", model, found[1])
            s = self.scheds[model] = self.factory(model, profile)
        return s

    # -- dispatch ------------------------------------------------------------------------------
    def _dispatch(self) -> bool:
        """Send batches while pools have free slots; True when at least one went out."""
        now_ms = self.now_ms()
        sent = False
        for model, sched in self.scheds.items():
            self._expire(sched.expire((now_ms + self.follow.ahead_ms(model, now_ms)) / 1000.0), now_ms)
        progress = True
        while progress:
            progress = False
            for pool in sorted(self.pools.views.values(), key=lambda v: -v.free):
                if pool.free <= 0:
                    continue
                ready = [m for m, s in self.scheds.items() if len(s) and (m in pool.models or s.runs_on(pool.models))]
                if not ready:
                    continue
                if len(ready) > 1:  # the most urgent model first; one alone needs no deadline scan
                    urgent = [(self.scheds[m].earliest_deadline(), m) for m in ready]
                    ready = [m for _, m in sorted(urgent, key=lambda x: (x[0] is None, x))]
                picked = self._pick(ready, pool, now_ms)
                if picked is None:  # HEFT wants these models' next batches on other pools
                    continue
                model, size = picked
                started = self.report.start()
                self.scheds[model].set_memory(pool.memory_mb)
                decision = self.scheds[model].next_batch((now_ms + self.follow.wait_ms(pool.name, now_ms)) / 1000.0,
                                                         size)
                self.report.decided(started)
                self._expire(decision.expired, now_ms)
                if decision.batch:
                    self._send(model, pool.name, decision, now_ms)
                    pool.inflight += 1
                    progress = sent = True
        return sent

    def _pick(self, ready: list[str], pool: PoolView, now_ms: float) -> tuple[str, int] | None:
        """The most urgent model whose next batch may go to ``pool``, and the batch's largest size:
        with HEFT, a model whose best plan starts on another pool waits for that pool's slot."""
        for model in ready:
            if self.heft is None or not self.heft.handles(model):
                return model, self.config.max_batch
            now_s = now_ms / 1000.0
            size = self.heft.size(model, now_s, self.config.max_batch, pool, self.scheds[model].name)
            waiting = len(self.scheds[model])
            choice = self.heft.choose(model, min(waiting, size), waiting, self.pools.serving(model), now_s,
                                      delays=self._delays(model, now_ms))
            if choice is None or choice.pool == pool.name:
                return model, size
        return None

    def _delays(self, model: str, now_ms: float) -> dict[str, float]:
        """Each serving pool's measured seconds from dispatch to start (for HEFT's predictions)."""
        return {v.name: self.follow.wait_ms(v.name, now_ms) / 1000.0 for v in self.pools.serving(model)}

    def _plan(self, model: str, pool: str, decision: Decision, now_ms: float) -> tuple[Plan, Choice | None]:
        serving = self.pools.serving(model)
        if self.heft is not None and self.heft.handles(model):
            waiting = len(self.scheds[model]) + len(decision.batch)
            choice = self.heft.choose(model, len(decision.batch), waiting, serving, now_ms / 1000.0, first=pool,
                                      delays=self._delays(model, now_ms))
            if choice is not None:
                return self.heft.plan(choice, decision), choice
        return place(model, pool, decision, self._splits, {v.name for v in serving}), None

    def _send(self, model: str, pool: str, decision: Decision, now_ms: float) -> None:
        items, predicted_s = decision.batch, decision.predicted_s
        model = decision.model or model  # the concrete model a policy chose (HELIOS, for a family)
        plan, choice = self._plan(model, pool, decision, now_ms)
        for batch_id, raw, part in build_batches(model, items, now_ms, plan, self.limits.max_message_bytes):
            view = self.pools.views.get(pool)
            self.follow.inflight.add(batch_id, pool, now_ms, busy=view is not None and view.inflight > 0,
                                     token=decision.token)
            extra: dict[str, object] = {}
            if self.heft is not None and choice is not None:
                extra = dict(self.heft.dispatched(batch_id, model, choice, len(part)))
                extra["rate_batch"] = self.heft.placer.sizes.get(model, (0.0, 0.0, self.config.max_batch))[2]
            # The event goes first: a pipeline's later commands can reach the server after a worker
            # has already run the batch and written its batch.finished (a preempted planner between
            # two writes of a large pipeline), and readers of telemetry expect dispatched first.
            self._event("batch.dispatched", batch_id=batch_id, pool=pool, model=model, variant=plan.variant,
                        size=len(part), predicted_ms=predicted_s * 1000.0, **extra)
            self._pipe.xadd(self.keys.batches(pool), {b"m": raw}, maxlen=self.settings.stream_maxlen,
                            approximate=True)
        for p in items:
            held: HeldJob = p.payload[0]
            if not held.planned:
                held.planned = True
                self._event("job.planned", job_id=held.job.id, variant=plan.variant, pool=pool)
            self._left(held)

    def _heft_finished(self, ev: Finished) -> None:
        assert self.heft is not None
        out = self.heft.finished(ev.batch_id, ev.pool, ev.model, ev.variant, ev.part, ev.size, ev.exec_ms, ev.ts)
        if out is not None:
            self._event("placement.finished", **outcome_event(out))

    def _expire(self, items: list[Pending], now_ms: float) -> None:
        # A step can expire many times (before dispatch, then in each batch decision); each used to
        # cost two round trips (the pipeline, then the script), which made a planner that fell
        # behind expire more and fall further behind. They end together at the step's end.
        if items:
            self._expiring.append((items, now_ms))

    def _end_expired(self) -> None:
        """The step's expiries, queued after what the step queued before them (its jobs'
        ``job.accepted``, earlier batches) and before their jobs' acks: an ack never reaches the
        server ahead of the results it stands for."""
        if not self._expiring:
            return
        endings: list[Packed] = []
        by_job: dict[str, list[Pending]] = {}
        for items, now_ms in self._expiring:
            e, b = expiries(items, now_ms, "deadline: cannot finish in time")
            endings += e
            for job_id, ps in b.items():
                by_job.setdefault(job_id, []).extend(ps)
        self._expiring.clear()
        self._takers.append((len(self._pipe), self.fin.queue_end_packed(self._pipe, endings)))
        for job_id, ps in by_job.items():
            held: HeldJob = ps[0].payload[0]
            self._event("job.expired", job_id=job_id, app=held.job.app, run=held.job.run,
                        request_ids=[p.request_id for p in ps], reason="deadline")
            for _ in ps:
                self._left(held)

    def _execute(self) -> None:
        """Run the pipeline; a queued script's error goes to its taker, any other raises."""
        if not self._takers:
            self._direct.execute(self._pipe)
            return
        takers, self._takers = self._takers, []
        replies = self._direct.execute(self._pipe, raise_on_error=False)
        for at, take in takers:
            take(replies[at])
        taken = {at for at, _ in takers}
        error = next((x for i, x in enumerate(replies) if i not in taken and isinstance(x, Exception)), None)
        if error is not None:
            raise error

    def _left(self, held: HeldJob) -> None:
        held.undispatched -= 1
        if held.undispatched <= 0:
            self.intake.done(self._pipe, [held.entry_id])
            self.held.pop(held.job.id, None)

    def _scheduler_events(self) -> None:
        # Policies that change plans on their own (MOSEL's re-selection) report it as events.
        for key, sched in self.scheds.items():
            events = sched.drain_events()
            for name, body in events:
                self._event(name, **body)
            if events:
                self._store_table(key, sched)

    def _store_table(self, key: str, sched: Scheduler) -> None:
        """What a policy shows of itself (HELIOS's PHT), for ``adaserve helios pht``."""
        table = sched.table()
        if table is not None:
            self._pipe.set(self.keys.helios_table(key), encode_map({"ts": self.now_ms(), **table}))

    # -- housekeeping --------------------------------------------------------------------------
    def _housekeeping(self) -> None:
        self.feedback.tick(self.scheds)  # a clock read, except once every few seconds
        if self.report.due():
            for key, sched in self.scheds.items():
                self._store_table(key, sched)
            raw = encode(self.report.take(self.now_ms(), self.scheds, len(self.held),
                                          {v.name: v.slots for v in self.pools.views.values()},
                                          self.config.queue_ms))
            self._pipe.hset(self.keys.planners, self.consumer, raw)
            self._pipe.xadd(self.keys.telemetry, {b"m": raw}, maxlen=self.settings.telemetry_maxlen, approximate=True)
            if self.heft is not None:
                body = {"v": 1, "type": "event", "event": "placement.state", "ts": self.now_ms(), "planner": self.consumer,
                        **self.heft.state(self.now_ms() / 1000.0)}
                packed = encode_map(body)
                self._pipe.hset(self.keys.placement, self.consumer, packed)
                self._pipe.xadd(self.keys.telemetry, {b"m": packed}, maxlen=self.settings.telemetry_maxlen,
                                approximate=True)
        t = time.time()
        if t >= self._next_clock:
            self._sync_clock()
            self.follow.inflight.prune(self.now_ms() - 10 * self.settings.reclaim_idle_ms)
        if t >= self._next_touch:
            self._next_touch = t + self.settings.reclaim_idle_ms / 3000.0
            # Acks queued this step (a rejected entry's, a finished job's) go out first: a slow step
            # could otherwise see its own just-rejected entry as idle and claim it back (a second
            # rejection for one job).
            self._execute()
            self.intake.keep(self.consumer, [h.entry_id for h in self.held.values()])
            self._reclaim()
            self._trim()

    def _trim(self) -> None:
        """Drop the jobs and batches every consumer is done with, ``consumed_keep_s`` on."""
        keep_ms, now = self.settings.consumed_keep_s * 1000.0, self.now_ms()
        streams.trim_consumed(self.r, self.keys.jobs, PLANNER_GROUP, keep_ms=keep_ms, now_ms=now)
        for pool in list(self.pools.views):
            streams.trim_consumed(self.r, self.keys.batches(pool), pool, keep_ms=keep_ms, now_ms=now)

    def _reclaim(self) -> None:
        got = self.intake.reclaim(self.consumer, {h.entry_id for h in self.held.values()})
        if got:
            log.info("reclaimed %d job entries from other planners", len(got))
            self._admit(got)

    def _event(self, name: str, **body: object) -> None:
        self._event_at(self.now_ms(), name, body)

    def _event_at(self, ts: float, name: str, body: dict[str, object]) -> None:
        self._pipe.xadd(self.keys.telemetry, {b"m": streams.event_bytes(event=name, ts=ts, **body)},
                        maxlen=self.settings.telemetry_maxlen, approximate=True)

