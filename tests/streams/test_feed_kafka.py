"""The change feed on the real broker, read by another client: kcat's raw bytes, decoded by the .avsc alone."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
from collections import defaultdict

import fastavro
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from fastavro.schema import fingerprint, to_parsing_canonical_form

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.feed import MemoryChanged
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.schemas.codec import SCHEMA_DIR
from adamem.schemas.serde import decode_as, encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.feed import compute_feed
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from tests.conftest import FlatEmbedder
from tests.streams.test_pipeline import SAMPLE

pytestmark = pytest.mark.kafka


def _kcat_records(kcat: str, bootstrap: str, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    """(partition, offset, key, value) of every record of ``topic``, as kcat prints them (raw bytes)."""
    fmt = "%p,%o,%K,%S;%k%s"  # lengths first: Avro bytes hold any delimiter
    run = subprocess.run(
        [kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", fmt],
        check=True,
        timeout=60,
        capture_output=True,
    )
    out, pos, records = run.stdout, 0, []
    while pos < len(out):
        head_end = out.index(b";", pos)
        p, o, klen, vlen = (int(x) for x in out[pos:head_end].split(b","))
        key = out[head_end + 1 : head_end + 1 + klen]
        value = out[head_end + 1 + klen : head_end + 1 + klen + vlen]
        records.append((p, o, key, value))
        pos = head_end + 1 + klen + vlen
    return records


def _outsider_decode(value: bytes) -> dict[str, object]:
    """fastavro and the .avsc file, none of our codec."""
    schema = fastavro.parse_schema(json.loads((SCHEMA_DIR / "memory_changed.avsc").read_text()))
    assert value[:2] == b"\xc3\x01"
    assert value[2:10] == bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
    return fastavro.schemaless_reader(io.BytesIO(value[10:]), schema)  # type: ignore[return-value]


async def test_kcat_reads_the_feed_the_pipeline_publishes_on_kafka(settings: Settings, kafka_bootstrap: str) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: `apt-get install -y kcat` (deploy/test.sh installs it)"
    log = open_log(f"kafka://{kafka_bootstrap}", settings)
    await log.start()
    try:
        await publish_messages(log, load_messages(SAMPLE, settings), settings)
        store = open_store(str(settings.store_url))
        stats = await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), FlatEmbedder()), settings)
        assert stats.applied > 0
        topic = settings.topic("changes")
        partitions = log.partitions(topic)
        assert partitions == settings.partitions  # co-partitioned with every other topic
        want: dict[int, list[MemoryChanged]] = {
            p: await compute_feed(log, settings, p, view=store.view) for p in range(partitions)
        }
    finally:
        await log.stop()
    records = await asyncio.to_thread(_kcat_records, kcat, kafka_bootstrap, topic)
    assert len(records) == sum(len(v) for v in want.values()) > 0
    got: dict[int, list[MemoryChanged]] = defaultdict(list)
    for partition, _offset, key, value in sorted(records):
        event = decode_as(value, MemoryChanged)
        assert key.decode() == event.user_id
        assert partition == partition_for(event.user_id, partitions)  # Kafka's Java partitioner (murmur2)
        assert value == encode_event(event)
        outsider = _outsider_decode(value)
        assert (str(outsider["event_id"]), outsider["user_id"], len(outsider["changes"])) == (  # type: ignore[arg-type]
            event.event_id,
            event.user_id,
            len(event.changes),
        )
        got[partition].append(event)
    assert {p: v for p, v in got.items()} == {p: v for p, v in want.items() if v}  # live == recomputed, in order
    kinds = {c.kind for v in got.values() for e in v for c in e.changes}
    assert {"added", "updated"} <= kinds
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        res = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        configs = {c[0]: c[1] for r in res for resource in r.resources for c in resource[4]}
        assert configs["retention.ms"] == str(7 * 24 * 3600 * 1000)
    finally:
        await admin.close()
