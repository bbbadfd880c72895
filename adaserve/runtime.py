"""Process plumbing shared by the long-running commands: logging and signal-driven stop."""

from __future__ import annotations

import logging
import signal
import threading


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
