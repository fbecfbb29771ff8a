"""docker-compose.yml describes the same single-node KRaft broker that deploy/kafka.sh runs."""

from __future__ import annotations

import json

import yaml

from tests.conftest import REPO

PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "adamem.json"


def test_compose_file_parses_and_matches_the_broker_script() -> None:
    doc = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = doc["services"]
    assert {"kafka", "worker", "query"} <= set(services)
    env = services["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == 1
    pom = (REPO / "deploy" / "kafka" / "pom.xml").read_text()
    version = services["kafka"]["image"].split(":")[1]
    assert f"<kafka.version>{version}</kafka.version>" in pom  # the same Kafka release everywhere
    assert "adamem" in services["worker"]["command"] and "worker" in services["worker"]["command"]


def test_compose_runs_prometheus_and_grafana_provisioned_with_the_shipped_files() -> None:
    doc = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = doc["services"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    grafana = services["grafana"]["volumes"]
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana
    provider = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/adamem.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    source = yaml.safe_load((REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    assert source["datasources"][0]["url"] == "http://prometheus:9090"
    uids = {t["datasource"]["uid"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", [])}
    assert uids == {source["datasources"][0]["uid"]}
    # The scrape targets are the services' ports: the query API, and the worker's --metrics-port.
    scrape = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())["scrape_configs"]
    targets = {c["job_name"]: c["static_configs"][0]["targets"][0] for c in scrape}
    worker = services["worker"]["command"]
    assert targets["adamem-worker"] == f"worker:{worker[worker.index('--metrics-port') + 1]}"
    query = services["query"]["command"]
    assert targets["adamem-query"] == f"query:{query[query.index('--port') + 1]}"
