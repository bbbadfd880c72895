"""Telemetry: reading the event stream (tail, follow), aggregating it (stats), dead letters."""

from adaserve.telemetry.dead import DeadLetter, dead_count, read_dead
from adaserve.telemetry.reader import EventFilter, Received, TelemetryReader, attribute_values, parse_types, run_events
from adaserve.telemetry.stats import Counts, PoolStats, Stats, aggregate

__all__ = [
    "Counts", "DeadLetter", "EventFilter", "PoolStats", "Received", "Stats", "TelemetryReader",
    "aggregate", "attribute_values", "dead_count", "parse_types", "read_dead", "run_events",
]
