"""docker-compose.yml describes the same single-node KRaft broker that deploy/kafka.sh runs."""

from __future__ import annotations

import yaml

from tests.conftest import REPO


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
