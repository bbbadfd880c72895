"""The faults of ``adaserve bench chaos``, each a function of a running stack that returns when the
fault ended, and the scenarios that pair a fault with the stack it needs."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field

from adaserve.bench.chaos import MODEL, Fault
from adaserve.bench.chaos_surge import RawSurge
from adaserve.broker import PLANNER_GROUP, Keys, connect
from adaserve.broker.errors import AdaserveError
from adaserve.stack import Stack

# fsdd-cnn's capacity on the 2-core development machine (bench live: 1,834 requests/s in jobs of 4)
SUSTAINABLE_JOBS_S = 450.0


def broker_restart(down_s: float = 1.0) -> Fault:
    """SIGKILL the server, leave it down ``down_s``, start it again from what it had on disk."""

    def fault(stack: Stack, figures: dict[str, float]) -> float:
        if stack.server is None:
            raise AdaserveError("broker_restart needs the stack's embedded server")
        stack.server.kill()
        time.sleep(down_s)
        stack.server.start()
        return time.time()

    return fault


def kill(name: str, *, restart_after_s: float | None = None) -> Fault:
    """SIGKILL one child; start it again after ``restart_after_s`` (None: never, as when a node is
    gone and the others must take over)."""

    def fault(stack: Stack, figures: dict[str, float]) -> float:
        proc = stack.child(name)
        if name.startswith("planner"):
            figures["held_at_kill"] = float(_holding(stack, proc.pid))
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
        if restart_after_s is None:
            stack.children = [(n, p) for n, p in stack.children if n != name]
            return time.time()
        time.sleep(restart_after_s)
        stack.respawn(name)
        return time.time()

    return fault


def _holding(stack: Stack, pid: int, timeout_s: float = 5.0) -> int:
    """Wait (up to ``timeout_s``) until the planner of ``pid`` holds job entries, so that its kill
    leaves work for the others to take over; how many it holds."""
    r = connect(stack.settings)
    jobs = Keys(stack.settings.namespace).jobs
    end = time.monotonic() + timeout_s
    try:
        while True:
            held = sum(int(c["pending"]) for c in r.xinfo_consumers(jobs, PLANNER_GROUP)
                       if f"-{pid}" in (c["name"].decode() if isinstance(c["name"], bytes) else c["name"]))
            if held or time.monotonic() > end:
                return held
            time.sleep(0.001)
    finally:
        r.close()


def pause(name: str, seconds: float) -> Fault:
    """SIGSTOP one child for ``seconds``, then SIGCONT: a process that hangs, then wakes up."""

    def fault(stack: Stack, figures: dict[str, float]) -> float:
        proc = stack.child(name)
        proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            proc.send_signal(signal.SIGCONT)
        return time.time()

    return fault


def surge(jobs_per_s: float, seconds: float, *, deadline_ms: float = 250.0, k: int = 4) -> Fault:
    """A second producer sends ``jobs_per_s`` for ``seconds`` (``chaos_surge.RawSurge``); its
    figures: the rate it reached and how its requests ended (``overloaded`` apart)."""

    def fault(stack: Stack, figures: dict[str, float]) -> float:
        producer = RawSurge(stack.settings, MODEL, k=k, deadline_ms=deadline_ms)
        end = producer.run(jobs_per_s, seconds)
        unfinished = producer.finish(grace_s=60.0)
        figures.update({"surge_jobs_per_s": round(producer.sent / seconds, 1), "surge_target_jobs_per_s": jobs_per_s,
                        "surge_requests": producer.sent * k, "surge_unfinished": unfinished,
                        **{f"surge_{s}": float(n) for s, n in producer.ends.items()}})
        return end

    return fault


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    fault: Fault
    stack: dict[str, object] = field(default_factory=dict)  # chaos_stack options
    deadline_ms: float = 10_000.0  # of the steady load's jobs


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("broker-restart-always", "server SIGKILLed under load, back from its AOF (appendfsync always) 1 s later",
             broker_restart(), {"fsync": "always"}),
    Scenario("broker-restart-everysec", "the same with appendfsync everysec",
             broker_restart(), {"fsync": "everysec"}),
    Scenario("broker-restart-nopersist", "the same with no persistence: the server comes back empty",
             broker_restart(), {"persist": False}),
    Scenario("worker-sigkill", "the only worker SIGKILLed, restarted 3 s later",
             kill("worker-cpu-0", restart_after_s=3.0)),
    Scenario("worker-sigstop", "one of two workers SIGSTOPped for 8 s, then SIGCONT",
             pause("worker-cpu-0", 8.0), {"workers": 2}),
    Scenario("planner-sigkill", "one of two planners SIGKILLed for good: the other takes over",
             kill("planner"), {"planners": 2}),
    Scenario("overload", "a second producer at 10x the sustainable rate for 20 s beside the steady load "
                         "(250 ms deadlines): refused `overloaded`, memory bounded, back within seconds",
             surge(10 * SUSTAINABLE_JOBS_S, 20.0), deadline_ms=250.0),
)


def with_surge(sc: Scenario, seconds: float) -> Scenario:
    """The overload scenario with a surge of ``seconds``; any other as it is."""
    if sc.name != "overload":
        return sc
    return Scenario(sc.name, sc.what.replace("20 s", f"{seconds:g} s"), surge(10 * SUSTAINABLE_JOBS_S, seconds),
                    sc.stack, sc.deadline_ms)


def scenario(name: str) -> Scenario:
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise KeyError(name)
