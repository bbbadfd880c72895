"""The faults of ``adaserve bench chaos``, each a function of a running stack that returns when the
fault ended, and the scenarios that pair a fault with the stack it needs."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field

from adaserve.bench.chaos import Fault
from adaserve.broker.errors import AdaserveError
from adaserve.stack import Stack


def broker_restart(down_s: float = 1.0) -> Fault:
    """SIGKILL the server, leave it down ``down_s``, start it again from what it had on disk."""

    def fault(stack: Stack) -> float:
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

    def fault(stack: Stack) -> float:
        proc = stack.child(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
        if restart_after_s is None:
            stack.children = [(n, p) for n, p in stack.children if n != name]
            return time.time()
        time.sleep(restart_after_s)
        stack.respawn(name)
        return time.time()

    return fault


def pause(name: str, seconds: float) -> Fault:
    """SIGSTOP one child for ``seconds``, then SIGCONT: a process that hangs, then wakes up."""

    def fault(stack: Stack) -> float:
        proc = stack.child(name)
        proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            proc.send_signal(signal.SIGCONT)
        return time.time()

    return fault


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    fault: Fault
    stack: dict[str, object] = field(default_factory=dict)  # chaos_stack options


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
)


def scenario(name: str) -> Scenario:
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise KeyError(name)
