"""The Kafka adapter against the real broker, and interoperability with an independent client.

The independent client is confluent-kafka (librdkafka, C): it consumes what our publisher wrote
and decodes it with the ``.avsc`` files alone, and it produces a message our reader accepts.
With librdkafka's default partitioner (CRC32), confluent-kafka and kcat put keys on other
partitions than murmur2 does: those records are dead-lettered once, and nobody else's are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shutil
import subprocess
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import fastavro
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from confluent_kafka import Consumer, Producer
from fastavro.schema import fingerprint, to_parsing_canonical_form

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import NoExtractor
from adamem.cli import main
from adamem.errors import BrokerUnavailable
from adamem.events import ChatMessage, Speaker
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store import MemoryStore
from adamem.projections.store.factory import open_store
from adamem.schemas.codec import SCHEMA_DIR
from adamem.schemas.serde import decode_as, encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import EventLog, partition_for
from adamem.streams.pipeline import ERROR_HEADER, run_pipeline
from adamem.streams.publish import publish_messages
from tests.conftest import FlatEmbedder

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
        for _ in range(50):  # a broker that just started may describe a new topic before its partitions
            described = await admin.describe_topics(names)
            if all(t["partitions"] for t in described):
                break
            await asyncio.sleep(0.2)
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


async def test_a_call_cancelled_while_its_client_starts_leaves_no_client_open(
    settings: Settings, kafka_bootstrap: str
) -> None:
    """A caller cancelled at any point of ``end_offsets`` or ``start`` stops the client it opened."""
    import gc
    import warnings

    log = open_log(f"kafka://{kafka_bootstrap}", settings)
    await log.start()
    try:
        topic = settings.topic("messages")
        for delay in (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2):
            other = open_log(f"kafka://{kafka_bootstrap}", settings)
            for call in (log.end_offsets(topic), other.start()):
                task = asyncio.create_task(call)
                await asyncio.sleep(delay)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await other.stop()  # what a caller whose start returned does; nothing to stop otherwise
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gc.collect()
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    finally:
        await log.stop()


# ---- producers on librdkafka's default partitioner (CRC32), and kcat ---------------------------


def _crc32_partition(key: str, partitions: int) -> int:
    """Where librdkafka's default partitioner (``consistent_random``) puts a key."""
    return zlib.crc32(key.encode()) % partitions


def _owners(n: int) -> tuple[str, str, str]:
    """A stray (CRC32 and murmur2 disagree), an owner on the stray's arrival partition, one on its own."""
    names = [f"owner-{i}" for i in range(1000)]
    stray = next(k for k in names if _crc32_partition(k, n) != partition_for(k, n))
    busy = next(k for k in names if partition_for(k, n) == _crc32_partition(stray, n))
    victim = next(k for k in names if k != stray and partition_for(k, n) == partition_for(stray, n))
    return stray, busy, victim


def _chat(owner: str, i: int) -> ChatMessage:
    return ChatMessage(
        str(uuid.uuid5(uuid.NAMESPACE_URL, f"{owner}/{i}")),
        owner,
        "c1",
        f"m{i}",
        Speaker("user", owner),
        f"hi {i}",
        1 + i,
    )


async def _project_run(log: EventLog, settings: Settings, store: MemoryStore) -> tuple[int, int]:
    """One `adamem project` run: the in-process pipeline, resuming from the log alone."""
    stats = await run_pipeline(log, Projector(store), MemoryAgent(NoExtractor(), FlatEmbedder()), settings)
    return stats.analyzed, stats.dead_lettered


async def _check_misplaced_are_dead_lettered_once(
    settings: Settings, kafka_bootstrap: str, produce: Callable[[list[tuple[str, bytes]], bool], None]
) -> None:
    """``produce(records, murmur2)`` writes keyed records with the client's default partitioner, or murmur2."""
    n = settings.partitions
    stray, busy, victim = _owners(n)
    log = open_log(f"kafka://{kafka_bootstrap}", settings)
    await log.start()
    try:
        await publish_messages(log, [_chat(busy, i) for i in range(8)] + [_chat(victim, i) for i in range(3)], settings)
        strays = [_chat(stray, i) for i in range(5)]
        await asyncio.to_thread(produce, [(stray, encode_event(m)) for m in strays], False)
        landed = [r async for r in log.read(settings.topic("messages"), from_offsets=None)]
        assert {r.partition for r in landed if r.key == stray} == {_crc32_partition(stray, n)}  # not murmur2's
        store = open_store("memory://")
        assert await _project_run(log, settings, store) == (11, 5)
        await publish_messages(log, [_chat(victim, i) for i in range(3, 6)], settings)
        assert await _project_run(log, settings, store) == (3, 0)  # nothing again, nothing skipped
        assert await _project_run(log, settings, store) == (0, 0)
        assert {o: len(store.rows("messages", o)) for o in store.owners()} == {
            f"default:{busy}": 8,
            f"default:{victim}": 6,
        }
        dead = [r async for r in log.read(settings.topic("deadletter"))]
        assert sorted(r.value for r in dead) == sorted(encode_event(m) for m in strays)
        assert {r.partition for r in dead} == {_crc32_partition(stray, n)}  # where they arrived
        assert all(b"partitioner=murmur2_random" in dict(r.headers)[ERROR_HEADER] for r in dead)
        # The fix the error names: the same records published again with murmur2 are analysed.
        await asyncio.to_thread(produce, [(stray, encode_event(m)) for m in strays], True)
        assert await _project_run(log, settings, store) == (5, 0)
        assert len(store.rows("messages", f"default:{stray}")) == 5
    finally:
        await log.stop()


async def test_confluent_kafka_with_its_default_partitioner_loses_nobody_and_dead_letters_once(
    settings: Settings, kafka_bootstrap: str
) -> None:
    def produce(records: list[tuple[str, bytes]], murmur2: bool) -> None:
        config = {"bootstrap.servers": kafka_bootstrap}
        if murmur2:
            config["partitioner"] = "murmur2_random"
        producer = Producer(config)  # default: consistent_random, CRC32 of the key
        for key, value in records:
            producer.produce(settings.topic("messages"), key=key.encode(), value=value)
        assert producer.flush(20) == 0

    await _check_misplaced_are_dead_lettered_once(settings, kafka_bootstrap, produce)


async def test_kcat_with_its_default_partitioner_loses_nobody_and_dead_letters_once(
    settings: Settings, kafka_bootstrap: str, tmp_path: Path
) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: `apt-get install -y kcat` (deploy/test.sh installs it)"

    def produce(records: list[tuple[str, bytes]], murmur2: bool) -> None:
        for i, (key, value) in enumerate(records):  # one file per record: Avro bytes hold any delimiter
            path = tmp_path / f"record-{murmur2}-{i}.bin"
            path.write_bytes(value)
            args = [kcat, "-P", "-b", kafka_bootstrap, "-t", settings.topic("messages"), "-k", key]
            args += ["-X", "partitioner=murmur2_random"] if murmur2 else []
            subprocess.run([*args, str(path)], check=True, timeout=60, capture_output=True)

    await _check_misplaced_are_dead_lettered_once(settings, kafka_bootstrap, produce)
