"""The Grafana dashboard in deploy/grafana: well-formed, and every metric its queries name is one
that a real exporter, scraped over HTTP, exports."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from adaserve.broker import Settings
from adaserve.telemetry.exporter import Exporter

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "deploy" / "grafana" / "adaserve.json").read_text())
METRIC = re.compile(r"\badaserve_[a-z0-9_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count"),
            "gauge": ("",)}


@pytest.fixture
def exported(settings: Settings, r: redis.Redis[bytes]) -> Iterator[set[str]]:
    """The sample names an idle exporter on the real server exports (families without samples included)."""
    exp = Exporter(settings, port=0, addr="127.0.0.1")
    exp.serve()
    stop = threading.Event()
    t = threading.Thread(target=exp.run, args=(stop,), daemon=True)
    t.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        yield {fam.name + suffix for fam in text_string_to_metric_families(text) for suffix in SUFFIXES[fam.type]}
    finally:
        stop.set()
        t.join(5)
        exp.close()


def _exprs() -> list[str]:
    out = [t["expr"] for p in DASHBOARD["panels"] for t in p["targets"]]
    out += [v["definition"] for v in DASHBOARD["templating"]["list"] if v["type"] == "query"]
    return out


def test_the_dashboard_has_panels_with_targets_on_a_datasource_variable() -> None:
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert DASHBOARD["uid"] and DASHBOARD["title"] and DASHBOARD["panels"]
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    for p in DASHBOARD["panels"]:
        assert p["title"] and p["targets"], p
        assert p["datasource"]["uid"] == "${datasource}"
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and t["refId"] and METRIC.search(t["expr"]), (p["title"], t)
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
        pos = p["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24 and pos["h"] > 0


def test_every_metric_the_dashboard_queries_is_exported(exported: set[str]) -> None:
    named = {m for e in _exprs() for m in METRIC.findall(e)}
    assert named and named <= exported, f"not exported: {sorted(named - exported)}"
    # and the dashboard shows the figures the exporter exists for
    for must in ("adaserve_queue_depth", "adaserve_pool_inflight_batches", "adaserve_requests_total",
                 "adaserve_request_latency_seconds_bucket", "adaserve_planner_decision_seconds",
                 "adaserve_dead_letters", "adaserve_worker_gpu_utilization_ratio"):
        assert must in named


def test_the_compose_monitoring_profile_provisions_this_dashboard() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    grafana = compose["services"]["grafana"]
    mounts = {m.split(":")[0]: m.split(":")[1] for m in grafana["volumes"]}
    assert mounts["./deploy/grafana/adaserve.json"].startswith("/var/lib/grafana/dashboards/")
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/adaserve.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    prom = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    (target,) = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    host, port = target.split(":")
    assert host in compose["services"] and compose["services"][host]["command"][:3] == ["exporter", "--port", port]
