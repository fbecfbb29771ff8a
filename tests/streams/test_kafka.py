"""The Kafka adapter against the real broker, and interoperability with an independent client.

The independent client is confluent-kafka (librdkafka, C): it consumes what our publisher wrote
and decodes it with the ``.avsc`` files alone, and it produces a message our reader accepts.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import fastavro
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from confluent_kafka import Consumer, Producer
from fastavro.schema import fingerprint, to_parsing_canonical_form

from adamem.cli import main
from adamem.errors import BrokerUnavailable
from adamem.events import ChatMessage, Speaker
from adamem.ingest import load_messages
from adamem.schemas.codec import SCHEMA_DIR
from adamem.schemas.serde import decode_as, encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import partition_for
from adamem.streams.publish import publish_messages

pytestmark = pytest.mark.kafka

LINES = [
    {"user_id": f"user-{i % 7}", "speaker": "Ann", "text": f"message {i} 你好", "occurred_at": 1_700_000_000_000 + i}
    for i in range(40)
]


def _messages(settings: Settings) -> list[ChatMessage]:
    data = "\n".join(json.dumps(r, ensure_ascii=False) for r in LINES).encode()
    return load_messages(data, settings)


async def test_topics_have_explicit_settings(settings: Settings, kafka_bootstrap: str) -> None:
    log = open_log(f"kafka://{kafka_bootstrap}", settings)
    await log.start()
    await log.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        names = [settings.topic(n) for n in ("messages", "analyses", "control", "deadletter")]
        described = await admin.describe_topics(names)
        assert {len(t["partitions"]) for t in described} == {settings.partitions}
        res = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names[:3]])
        for response in res:
            for resource in response.resources:
                configs = {c[0]: c[1] for c in resource[4]}
                assert configs["retention.ms"] == "-1", resource[3]
    finally:
        await admin.close()


async def test_publish_through_the_cli_and_read_back(
    settings: Settings,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ADAMEM_TOPIC_PREFIX", settings.topic_prefix)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in LINES), encoding="utf-8")
    url = f"kafka://{kafka_bootstrap}"
    assert await asyncio.to_thread(main, ["publish", str(src), "--log", url]) == 0
    assert "published 40 message(s) for 7 owner(s)" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["log", "dump", "--log", url, "--user", "user-3"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["event"]["text"] for r in rows] == [r["text"] for r in LINES if r["user_id"] == "user-3"]


def _decode_with_avsc_only(value: bytes) -> dict[str, object]:
    """An outsider's decoder: fastavro plus the .avsc file, none of our codec."""
    schema = fastavro.parse_schema(json.loads((SCHEMA_DIR / "chat_message.avsc").read_text()))
    assert value[:2] == b"\xc3\x01"
    # The spec's header: the fingerprint's 8 bytes in little-endian order, as fastavro gives them.
    assert value[2:10] == bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
    return fastavro.schemaless_reader(io.BytesIO(value[10:]), schema)  # type: ignore[return-value]


async def test_an_independent_client_reads_what_we_publish(settings: Settings, kafka_bootstrap: str) -> None:
    log = open_log(f"kafka://{kafka_bootstrap}", settings)
    await log.start()
    messages = _messages(settings)
    await publish_messages(log, messages, settings)
    await log.stop()

    def consume() -> list[tuple[str, int, dict[str, object]]]:
        consumer = Consumer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "group.id": f"{settings.topic_prefix}-interop",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([settings.topic("messages")])
        got: list[tuple[str, int, dict[str, object]]] = []
        for _ in range(60):
            for msg in consumer.consume(num_messages=100, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.append((msg.key().decode(), msg.partition(), _decode_with_avsc_only(msg.value())))
            if len(got) >= len(messages):
                break
        consumer.close()
        return got

    got = await asyncio.to_thread(consume)
    assert len(got) == len(messages)
    for key, partition, record in got:
        assert record["user_id"] == key
        assert partition == partition_for(key, settings.partitions)  # librdkafka sees our partitioner's choice
    assert sorted(str(r["event_id"]) for _, _, r in got) == sorted(m.event_id for m in messages)


async def test_we_read_what_an_independent_client_produces(settings: Settings, kafka_bootstrap: str) -> None:
    msg = ChatMessage(
        "3c0c2a8e-7d1b-4b8e-9a55-0d6c2f1e9b77",
        "zoe",
        "c1",
        "m1",
        Speaker("user", "Zoe"),
        "written by librdkafka",
        1_700_000_000_000,
    )
    value = encode_event(msg)

    def produce() -> None:
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random"})
        producer.produce(settings.topic("messages"), key=b"zoe", value=value)
        assert producer.flush(20) == 0

    log = open_log(f"kafka://{kafka_bootstrap}", settings)
    await log.start()
    await asyncio.to_thread(produce)
    got = [r async for r in log.read(settings.topic("messages"), key="zoe")]
    await log.stop()
    assert len(got) == 1
    assert got[0].partition == partition_for("zoe", settings.partitions)  # librdkafka's murmur2 agrees with ours
    assert decode_as(got[0].value, ChatMessage) == msg


async def test_no_broker_is_a_clear_error(settings: Settings) -> None:
    log = open_log("kafka://127.0.0.1:1", Settings(kafka_timeout_s=3.0, topic_prefix=settings.topic_prefix))
    with pytest.raises(BrokerUnavailable, match=r"deploy/kafka\.sh start"):
        await log.start()
