"""Process plumbing: a first signal asks for a clean stop, a second one (where asked for) leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from adaserve.broker.errors import ConfigError
from adaserve.process import cli_error, stop_on_signals


@pytest.fixture
def restore_handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_a_signal_sets_the_stop_event_and_names_itself(restore_handlers: None) -> None:
    heard: list[str] = []
    stop = stop_on_signals(on_first=heard.append)
    assert not stop.is_set()
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.wait(2) and heard == ["SIGTERM"]


def test_a_second_signal_leaves_at_once_when_asked() -> None:
    script = textwrap.dedent("""
        import os, signal, time
        from adaserve.process import stop_on_signals
        stop = stop_on_signals(on_first=lambda n: print("first", n, flush=True),
                               on_second=lambda: print("second", flush=True))
        os.kill(os.getpid(), signal.SIGINT)
        stop.wait(2)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        print("still here", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 130
    assert done.stdout.split() == ["first", "SIGINT", "second"]


def test_cli_errors_choose_their_exit_code() -> None:
    assert cli_error(ConfigError("bad setting")).exit_code == 2
    assert cli_error("bad usage").exit_code == 2
    assert cli_error(RuntimeError("broke")).exit_code == 1


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    import gc

    gc.unfreeze()


def test_settling_the_heap_takes_what_lives_now_out_of_every_collection(unfrozen: None) -> None:
    import gc

    from adaserve.process import settle_heap

    kept = [[i] for i in range(1000)]  # containers the collector tracks
    frozen = settle_heap()
    assert frozen >= 1000 and gc.get_freeze_count() == frozen
    tracked = {id(x) for x in gc.get_objects()}
    assert not any(id(x) in tracked for x in kept)
    later = [[1]]  # made afterwards: collected as before
    assert any(x is later for x in gc.get_objects())


def test_no_cyclic_collection_runs_while_paused_and_one_runs_after() -> None:
    import gc

    from adaserve.process import collection_paused

    collected: list[int] = []

    def heard(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collected.append(info["generation"])

    gc.callbacks.append(heard)
    try:
        with collection_paused():
            assert not gc.isenabled()
            for _ in range(50_000):  # far past the youngest generation's threshold
                a: list[object] = []
                a.append(a)
            assert collected == []
        assert gc.isenabled() and collected  # the cycles made inside are collected after
    finally:
        gc.callbacks.remove(heard)
