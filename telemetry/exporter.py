"""``adaserve exporter``: telemetry as Prometheus metrics over HTTP.

One thread follows ``Keys.telemetry`` from now on (``$``) and feeds counters and histograms
(``telemetry.metrics``); each scrape also reads what the server holds at that moment
(``telemetry.scrape``). Both live in the exporter's own registry, so a process embedding it
exports nothing else by accident. Counters start at zero when the exporter starts, which
Prometheus' ``rate()`` and ``increase()`` expect of any restarted process.
"""

from __future__ import annotations

import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from adaserve.broker.connection import connect
from adaserve.broker.errors import ConfigError
from adaserve.broker.settings import Settings
from adaserve.telemetry.metrics import EventMetrics
from adaserve.telemetry.reader import TelemetryReader
from adaserve.telemetry.scrape import LiveCollector

__all__ = ["DEFAULT_PORT", "Exporter"]
log = logging.getLogger(__name__)
DEFAULT_PORT = 9464  # the port OpenTelemetry's Prometheus exporter uses, free of the usual services


class Exporter:
    def __init__(self, settings: Settings, *, port: int = DEFAULT_PORT, addr: str = "0.0.0.0") -> None:
        self.settings, self.port, self.addr = settings, port, addr
        self.registry = CollectorRegistry()
        self.metrics = EventMetrics(self.registry)
        # Two connections: scrapes come on the HTTP server's threads while the follower blocks.
        self.reader = TelemetryReader(connect(settings, block_ms=500), settings)
        self.registry.register(LiveCollector(connect(settings), settings))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._after = "$"

    def serve(self) -> int:
        """Start the HTTP server (``/metrics``); returns the port it listens on (``port`` 0: any free one).
        The follow cursor is taken here, so events published after ``serve`` returns are counted."""
        self._after = self.reader.latest_id()
        # The server was reached: from here on an outage is waited out, also before the first read.
        self.reader.outage.recovered()
        try:
            self._server, self._thread = start_http_server(self.port, addr=self.addr, registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {self.addr}:{self.port}: {exc.strerror or exc}") from None
        self.port = int(self._server.server_port)
        log.info("exporter listening on http://%s:%d/metrics", self.addr, self.port)
        return self.port

    def run(self, stop: threading.Event) -> None:
        """Follow telemetry until ``stop``; an outage of the broker is waited out."""
        for got in self.reader.follow(after=self._after, block_ms=500, stop=stop.is_set):
            self.metrics.apply(got.event)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
