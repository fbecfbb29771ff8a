"""The wire format against the reference implementations: Avro's and Kafka's Java libraries.

One JVM per test session (``conformance/java``, built by its ``build.sh``) does all the Java
side at once, and the tests check its report:

* it produces ChatMessages with stock ``BinaryMessageEncoder`` and the producer's default
  partitioner to two topic prefixes' messages topics, which ``adamem project`` and the Faust
  worker must each turn into memory, dead-lettering nothing;
* it decodes every event type this project writes with stock ``BinaryMessageDecoder`` (and must
  refuse the old reversed headers, which only this project reads), sealed ones too (their
  ciphertext is opaque bytes to it) and, decrypted here with the key, the Avro records inside;
* avro-tools (``getschema``, ``count``, ``tojson``) reads an embedded log's container files.

The whole module needs the broker, since the one JVM run produces to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from adamem.cli import main
from adamem.events import ChatMessage, MessageAnalyzed, Speaker, message_event_id
from adamem.feed import ItemChange, MemoryChanged, change_event_id
from adamem.partitioning import partition_for
from adamem.projections.store.lance import LanceStore
from adamem.schemas import default_registry
from adamem.schemas.codec import SCHEMA_DIR
from adamem.schemas.sealing import ANALYSIS_CONTENT, MESSAGE_CONTENT, _aad
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.embedded_log import ENTRY_SCHEMA
from adamem.streams.factory import open_log
from adamem.streams.keys import InMemoryKeyRing
from tests.conftest import REPO
from tests.schemas.test_codec import (
    ANALYSIS,
    COMPRESSED,
    CORRECTED,
    FEEDBACK,
    FORGOT,
    GRANTED,
    JAVA_HEADERS,
    MSG,
    READ,
)
from tests.streams.test_worker import _caught_up, _start_worker, _stop

pytestmark = pytest.mark.kafka

JAVA = REPO / "conformance" / "java"
LEGACY = REPO / "tests" / "schemas" / "legacy_header"
PARTITIONS = 3
TEXTS = (
    "I live in Lisbon and I love hiking.",
    "我喜欢吃辣的,周末常去爬山。",
    "Last week I started a new job as a nurse.",
)
OWNERS = ("ana", "chen", "dmitri", "eve")  # on every one of 3 partitions, and of 2


CHANGED = MemoryChanged(
    event_id=change_event_id("default:ana", "adamem.analyses", 1, 41, 0),
    user_id="ana",
    source_topic="adamem.analyses",
    source_partition=1,
    source_offset=41,
    causation_id=ANALYSIS.event_id,
    occurred_at=1_709_542_800_000,
    changes=(
        ItemChange("messages", "added", MSG.event_id),
        ItemChange("episodic", "superseded", "rec-1", ("status", "valid_to", "superseded_by")),
        ItemChange("graph_edges", "removed", "edge-1"),
    ),
    view="r2",
)
EVENTS = (MSG, ANALYSIS, FORGOT, CORRECTED, CHANGED, GRANTED, FEEDBACK, COMPRESSED, READ)
"""One of every event type this project writes (the change feed's and the audit trail's too), in the order Java is
asked to decode them."""


def _sealed() -> list[tuple[str, bytes]]:
    """A sealed message and analysis as this code writes them, and the plaintext records inside (decrypted)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    keys = InMemoryKeyRing()
    message, analysis = encode_event(MSG, keys), encode_event(ANALYSIS, keys)
    key = keys.get(MSG.owner_id, MSG.event_id)
    opened_message, opened_analysis = decode_event(message), decode_event(analysis)
    assert key is not None and isinstance(opened_message, ChatMessage) and isinstance(opened_analysis, MessageAnalyzed)
    assert opened_message.sealed is not None and opened_analysis.sealed is not None
    inner = [
        (name, AESGCM(key).decrypt(s.nonce, s.ciphertext, _aad(name, MSG.owner_id, event_id)))
        for name, s, event_id in (
            (MESSAGE_CONTENT, opened_message.sealed, MSG.event_id),
            (ANALYSIS_CONTENT, opened_analysis.sealed, ANALYSIS.event_id),
        )
    ]
    return [(ChatMessage.SCHEMA, message), (MessageAnalyzed.SCHEMA, analysis), *inner]


SEALED = _sealed()


def _messages() -> list[ChatMessage]:
    out = []
    for i, owner in enumerate(OWNERS):
        for j, text in enumerate(TEXTS):
            mid = f"java-{j}"
            out.append(
                ChatMessage(
                    message_event_id("default", owner, "c1", mid),
                    owner,
                    "c1",
                    mid,
                    Speaker("user", owner.title()),
                    text,
                    1_709_542_800_000 + 60_000 * (3 * i + j),
                    metadata={"client": "java"},
                )
            )
    return out


def _settings(root: Path, prefix: str) -> Settings:
    return Settings(
        log_url=str(root / "log"),
        store_url=str(root / "store"),
        topic_prefix=prefix,
        partitions=PARTITIONS,
        embedded_partitions=2,
        fsync=False,
        kafka_timeout_s=20.0,
    )


@dataclasses.dataclass(frozen=True)
class Java:
    """What the session's one JVM run was given and what it reported."""

    report: dict[str, Any]
    messages: list[ChatMessage]
    by_project: Settings  # the prefix `adamem project` reads
    by_worker: Settings  # the prefix the Faust worker reads
    embedded: Path  # the embedded log whose files avro-tools read
    root: Path


def _container_files(log: Path) -> list[Path]:
    return sorted(
        p for p in log.glob("*/*.avro") if p.parent.name.split(".")[-1] in ("messages", "analyses", "control")
    )


def _embedded_log(root: Path, messages: list[ChatMessage]) -> Path:
    """An embedded log written by this code: the messages, their analyses, a forget (via the CLI)."""
    root.mkdir()
    log = root / "log"
    src = root / "in.jsonl"
    rows = [
        {
            "user_id": m.user_id,
            "conversation_id": m.conversation_id,
            "message_id": m.message_id,
            "speaker": m.speaker.name,
            "text": m.text,
            "occurred_at": m.occurred_at,
            "metadata": m.metadata,
        }
        for m in messages
    ]
    src.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADAMEM_TOPIC_PREFIX", "adamem")
        mp.setenv("ADAMEM_EMBEDDED_PARTITIONS", "2")
        assert main(["publish", str(src), "--log", str(log), "--quiet"]) == 0
        assert main(["project", "--log", str(log), "--store", str(root / "store")]) == 0
        assert main(["forget", "eve", "--message", messages[-1].event_id, "--log", str(log)]) == 0
    return log


@pytest.fixture(scope="session")
def java(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Java:
    """Build (cached) and run the Java conformance program once, on inputs this code wrote."""
    subprocess.run(["bash", str(JAVA / "build.sh")], check=True, timeout=600)
    root = tmp_path_factory.mktemp("java")
    tag = os.urandom(4).hex()
    by_project, by_worker = _settings(root / "p", f"tjp{tag}"), _settings(root / "w", f"tjw{tag}")

    async def make_topics() -> None:
        for s in (by_project, by_worker):  # with their explicit settings, before Java produces
            log = open_log(f"kafka://{kafka_bootstrap}", s)
            await log.start()
            await log.stop()

    asyncio.run(make_topics())
    messages = _messages()
    embedded = _embedded_log(root / "embedded", messages)
    legacy = json.loads((LEGACY / "events.json").read_text())["events"]
    request = {
        "schemas": str(SCHEMA_DIR),
        "avro_tools": str(next((JAVA / "target" / "tools").glob("avro-tools-*.jar"))),
        "produce": {
            "bootstrap": kafka_bootstrap,
            "topics": [by_project.topic("messages"), by_worker.topic("messages")],
            "messages": [m.to_record() for m in messages],
        },
        "decode": [{"schema": e.SCHEMA, "hex": encode_event(e).hex()} for e in EVENTS]
        + [{"schema": name, "hex": data.hex()} for name, data in SEALED],
        "refuse": legacy,
        "container_files": [str(p) for p in _container_files(embedded) + _container_files(LEGACY / "log")],
    }
    (root / "request.json").write_text(json.dumps(request, ensure_ascii=False), encoding="utf-8")
    classpath = f"{JAVA / 'target' / 'classes'}:{JAVA / 'target' / 'libs'}/*"
    started = time.monotonic()
    run = subprocess.run(
        [
            "java",
            "-Xmx512m",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            classpath,
            "adamem.conformance.Conformance",
            str(root / "request.json"),
            str(root / "report.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if run.returncode != 0:
        pytest.fail(f"the Java conformance program exited {run.returncode}:\n{run.stderr[-6000:]}")
    report = json.loads((root / "report.json").read_text(encoding="utf-8"))
    report["seconds"] = round(time.monotonic() - started, 1)
    (root / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    return Java(report, messages, by_project, by_worker, embedded, root)


def test_java_computes_the_fingerprints_we_frame_with(java: Java) -> None:
    registry = default_registry()
    assert java.report["avro"] == "1.12.2" and java.report["kafka_clients"] == "4.4.0"
    assert {n: int(fp, 16) for n, fp in java.report["fingerprints"].items()} == {
        n: registry.fingerprint(n) for n in registry.names()
    }
    for name, header in JAVA_HEADERS.items():  # the constants the codec tests hold
        assert bytes.fromhex(header)[2:] == int(java.report["fingerprints"][name], 16).to_bytes(8, "little")


def test_java_s_encoder_writes_exactly_our_bytes_and_its_partitioner_our_partitions(java: Java) -> None:
    produced = java.report["produced"]
    assert len(produced) == 2 * len(java.messages)
    ours = {m.user_id + m.message_id: encode_event(m) for m in java.messages}
    for row, message in zip(produced, [m for m in java.messages for _ in range(2)], strict=True):
        assert bytes.fromhex(row["hex"]) == ours[message.user_id + message.message_id]
        assert row["key"] == message.user_id
        assert row["partition"] == partition_for(message.user_id, PARTITIONS)
    assert {r["partition"] for r in produced} == set(range(PARTITIONS))


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("index", range(len(EVENTS)), ids=[type(e).__name__ for e in EVENTS])
def test_java_s_decoder_reads_every_event_type_we_write(java: Java, index: int) -> None:
    event = EVENTS[index]
    row = java.report["decoded"][index]
    assert row["schema"] == event.SCHEMA
    assert row["record"] == _as_json(event.to_record())  # every field's value, as Java read it
    assert bytes.fromhex(row["reencoded_hex"]) == encode_event(event)  # and Java writes it back byte for byte


@pytest.mark.parametrize(
    "index", range(4), ids=["sealed ChatMessage", "sealed MessageAnalyzed", "MessageContent", "AnalysisContent"]
)
def test_java_s_decoder_reads_sealed_events_and_the_records_inside_byte_for_byte(java: Java, index: int) -> None:
    name, data = SEALED[index]
    row = java.report["decoded"][len(EVENTS) + index]
    assert row["schema"] == name
    assert bytes.fromhex(row["reencoded_hex"]) == data  # Java writes back exactly what we wrote
    record = row["record"]
    if name == ChatMessage.SCHEMA:  # without the key: ids and times, no text
        assert (record["event_id"], record["text"], record["speaker"]["name"]) == (MSG.event_id, "", "")
        assert record["sealed"]["scheme"] == "aes256gcm/1" and record["metadata"] == {}
    elif name == MessageAnalyzed.SCHEMA:
        assert (record["summary"], record["facts"], record["embedding"]["vector"]) == ("", [], [])
        assert record["message"]["text"] == "" and record["sealed"]["scheme"] == "aes256gcm/1"
    elif name == MESSAGE_CONTENT:  # what the key opens: Avro, read by Java from message_content.avsc
        assert (record["text"], record["speaker_name"], record["metadata"]) == (
            MSG.text,
            MSG.speaker.name,
            MSG.metadata,
        )
    else:
        assert record["summary"] == ANALYSIS.summary and record["vector"] == [0.5, -0.25, 0.125]
        assert [a["value"] for a in record["attributes"]] == [a.value for a in ANALYSIS.attributes]


def test_java_s_decoder_refuses_the_old_reversed_header(java: Java) -> None:
    refused = java.report["refused"]
    assert len(refused) == 4
    assert all(r.get("error", "").startswith("MissingSchemaException") for r in refused), refused


def test_avro_tools_reads_the_embedded_log(java: Java) -> None:
    registry = default_registry()
    tools = {Path(t["file"]): t for t in java.report["tools"]}
    ours, legacy = _container_files(java.embedded), _container_files(LEGACY / "log")
    assert set(tools) == set(ours + legacy)
    seen = 0
    for path, t in tools.items():
        with path.open("rb") as fo:
            entries = list(fastavro.reader(fo))
        schema = json.loads(t["getschema"])
        assert schema["name"] == "LogEntry" and [f["name"] for f in schema["fields"]] == [
            f["name"] for f in ENTRY_SCHEMA["fields"]
        ]
        assert int(t["count"].strip()) == len(entries)
        rows = [json.loads(line) for line in t["tojson"].split("\n") if line]  # not splitlines: U+0085 is in values
        assert [(r["offset"], r["key"]) for r in rows] == [(e["offset"], e["key"]) for e in entries]
        values = [r["value"].encode("latin-1") for r in rows]  # Avro JSON: one code point per byte
        assert values == [e["value"] for e in entries]
        assert {registry.header_order(v) for v in values} <= ({"spec"} if path in ours else {"reversed"})
        seen += len(values) if path in ours else 0
    assert seen == 2 * len(java.messages) + 1  # messages, analyses, one forget


def _rows(store: Path) -> dict[str, int]:
    live = LanceStore(str(store), read_only=True)
    try:
        return {o: len(live.rows("messages", o)) for o in live.owners()}
    finally:
        live.close()


async def _dead_letters(settings: Settings, bootstrap: str) -> int:
    log = open_log(f"kafka://{bootstrap}", settings)
    await log.start()
    try:
        return sum((await log.end_offsets(settings.topic("deadletter"))).values())
    finally:
        await log.stop()


def test_adamem_project_turns_java_s_messages_into_memory(
    java: Java, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ADAMEM_TOPIC_PREFIX", java.by_project.topic_prefix)
    monkeypatch.setenv("ADAMEM_PARTITIONS", str(PARTITIONS))
    store = java.root / "project-store"
    assert main(["project", "--log", f"kafka://{kafka_bootstrap}", "--store", str(store)]) == 0
    n = len(java.messages)
    assert f"analyzed {n} message(s), forwarded 0 control event(s), applied {n} event(s)" in capsys.readouterr().out
    assert _rows(store) == dict.fromkeys((f"default:{o}" for o in OWNERS), len(TEXTS))
    assert asyncio.run(_dead_letters(java.by_project, kafka_bootstrap)) == 0


@pytest.fixture
def worker(java: Java, kafka_bootstrap: str) -> Iterator[Path]:
    env = {
        **os.environ,
        "ADAMEM_LOG": f"kafka://{kafka_bootstrap}",
        "ADAMEM_TOPIC_PREFIX": java.by_worker.topic_prefix,
        "ADAMEM_PARTITIONS": str(PARTITIONS),
    }
    store = java.root / "worker-store"
    proc = _start_worker(env, store, java.root / "worker.log")
    try:
        yield store
    finally:
        _stop(proc)


async def test_the_faust_worker_turns_java_s_messages_into_memory(
    java: Java, kafka_bootstrap: str, worker: Path
) -> None:
    await _caught_up(java.by_worker, kafka_bootstrap, worker, len(java.messages), timeout=180)
    assert _rows(worker) == dict.fromkeys((f"default:{o}" for o in OWNERS), len(TEXTS))
    assert await _dead_letters(java.by_worker, kafka_bootstrap) == 0
