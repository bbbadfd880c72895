"""Process plumbing every command shares: logging, signal-driven stop, one-line errors and the
collector's view of a long-running loop's heap.

It imports only the broker (for the error tree), so any package's CLI may use it; see the layering
contract in tests/test_layers.py.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer


def setup_logging(level: str = "INFO", *, rich: bool = False) -> None:
    """Plain timestamped lines (what a log collector wants), or rich lines on stderr for a person."""
    if rich:
        from rich.console import Console
        from rich.logging import RichHandler

        logging.basicConfig(level=level.upper(), format="%(message)s", datefmt="[%X]",
                            handlers=[RichHandler(console=Console(stderr=True), show_path=False)])
        return
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def stop_on_signals(*, on_first: Callable[[str], None] | None = None,
                    on_second: Callable[[], None] | None = None) -> threading.Event:
    """An event set by SIGINT or SIGTERM, so loops finish their current step and exit cleanly.

    ``on_first`` hears the signal's name; with ``on_second``, a second signal calls it and leaves
    at once (exit code 130) — for processes whose clean stop may take a while, such as a worker
    draining the batches it holds.
    """
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        if stop.is_set() and on_second is not None:
            on_second()
            os._exit(130)  # not sys.exit: unwinding would wait for the very drain being skipped
        if on_first is not None:
            on_first(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def settle_heap() -> int:
    """Collect once, then take every object alive now out of the cyclic collector's sight
    (``gc.freeze``); returns how many that was.

    For a loop about to serve: what it imported and loaded at start (numpy, pydantic, its models)
    is most of its heap and lives as long as the process, yet each full collection walked it
    again. Live, the planner's full collections paused it 43-52 ms every 10-25 s at 6,000 requests
    a second, a 30 ms deadline's worth of requests each time (docs/orloj.md, sixth session).
    Objects made later are collected as before."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection inside the block (reference counting still frees what it can); one
    collection after it.

    For a load generator, whose promise is its arrival process: the results it keeps make its heap
    grow through a run, and full collections of it stalled the sender 85-460 ms at 1,500 jobs a
    second; the pipeline then saw a silence and a burst that the schedule never had (docs/orloj.md,
    sixth session)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        gc.collect()


def cli_error(exc: Exception | str, *, usage: tuple[type[BaseException], ...] = ()) -> typer.Exit:
    """Print ``exc`` in red on stderr; the exit code is 2 for configuration/usage errors, else 1."""
    from rich.console import Console

    from adaserve.broker.errors import ConfigError

    # soft_wrap: one line however narrow the terminal, so that logs and scripts see one line too
    Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(2 if isinstance(exc, (str, ConfigError, *usage)) else 1)
