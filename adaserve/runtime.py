"""Process plumbing shared by the long-running commands: logging and signal-driven stop."""

from __future__ import annotations

import logging
import signal
import threading

import typer


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM, so loops finish their current step and exit cleanly."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def cli_error(exc: Exception | str, *, usage: tuple[type[BaseException], ...] = ()) -> typer.Exit:
    """Print ``exc`` in red on stderr; the exit code is 2 for configuration/usage errors, else 1."""
    from rich.console import Console

    from adaserve.broker.errors import ConfigError

    # soft_wrap: one line however narrow the terminal, so that logs and scripts see one line too
    Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(2 if isinstance(exc, (str, ConfigError, *usage)) else 1)
