"""Crypto-shredding: the keystore, sealed events on the wire, and a forget that makes the log's copies unreadable.

The end-to-end proofs (every byte of the log, store and keystore after forget + project +
replay; replay equal to live) are in ``test_erasure.py``; the Kafka one is at the end here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import io
import json
from importlib import resources
from pathlib import Path

import avro.io
import avro.schema
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.cli.commands import run_forget
from adamem.errors import DecodeError, LogError, SchemaError
from adamem.events import ChatMessage, MessageAnalyzed, Sealed
from adamem.ingest import load_messages
from adamem.projections.folds.apply import apply
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.projector import Projector
from adamem.projections.store.lance import LanceStore
from adamem.schemas.codec import SCHEMA_DIR
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.erasure import find_text
from adamem.streams.factory import open_log
from adamem.streams.keys import InMemoryKeyRing, Keystore, keystore_for, keystore_path
from adamem.streams.log import LogRecord, OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages, record_to_json
from adamem.streams.replay import rebuild_view
from tests.schemas.test_codec import ANALYSIS, MSG

ALICE = MSG.owner_id
M1, M2 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()


@pytest.fixture(params=["folder", "memory"])
def ring(request: pytest.FixtureRequest, tmp_path: Path) -> Keystore | InMemoryKeyRing:
    """Every key-ring adapter: the keystore folder, and the in-memory one of ``memory://`` logs."""
    return Keystore(tmp_path / "keys", fsync=False) if request.param == "folder" else InMemoryKeyRing()


def test_key_ring_contract(ring: Keystore | InMemoryKeyRing) -> None:
    """What every adapter does: one key per message, kept; a forget destroys exactly what it names."""
    assert ring.get(ALICE, M1) is None
    a, b, c = ring.get_or_create(ALICE, M1), ring.get_or_create(ALICE, M2), ring.get_or_create("default:bob", M1)
    assert len({a, b, c}) == 3 and all(len(k) == 32 for k in (a, b, c))
    ring.flush()
    assert (ring.get(ALICE, M1), ring.get_or_create(ALICE, M1), ring.get(ALICE, M2)) == (a, a, b)
    assert ring.forget_message(ALICE, M1) and not ring.forget_message(ALICE, M1)
    assert ring.get(ALICE, M1) is None and ring.get(ALICE, M2) == b
    assert ring.forget_owner(ALICE) and not ring.forget_owner(ALICE)
    assert ring.get(ALICE, M2) is None and ring.get("default:bob", M1) == c
    assert ring.get_or_create(ALICE, M1) not in (a, b)  # after a forget, a new message gets a new key


def test_the_keystore_keeps_keys_across_processes_and_a_forget_destroys_exactly_what_it_names(tmp_path: Path) -> None:
    ks = Keystore(tmp_path / "keys", fsync=False)
    a, b, c = ks.get_or_create(ALICE, M1), ks.get_or_create(ALICE, M2), ks.get_or_create("default:bob", M1)
    assert len({a, b, c}) == 3 and all(len(k) == 32 for k in (a, b, c))
    assert ks.get_or_create(ALICE, M1) == a  # a message keeps its key (a duplicate publish reuses it)
    other = Keystore(tmp_path / "keys")  # another process
    assert other.get(ALICE, M1) is None  # not durable before flush
    ks.flush()
    assert (other.get(ALICE, M1), other.get(ALICE, M2), other.get("default:bob", M1)) == (a, b, c)
    assert ks.forget_message(ALICE, M1) and not ks.forget_message(ALICE, M1)
    assert other.get(ALICE, M1) is None and other.get(ALICE, M2) == b  # the other process sees the forget
    assert ks.forget_owner(ALICE) and not ks.forget_owner(ALICE)
    assert other.get(ALICE, M2) is None and other.get("default:bob", M1) == c
    for path in (tmp_path / "keys").rglob("*"):
        assert a not in path.read_bytes() and b not in path.read_bytes()  # the key bytes are gone from every file
    with pytest.raises(ValueError):
        ks.get_or_create(ALICE, "not-a-uuid")


def test_a_damaged_key_file_is_a_clear_error(tmp_path: Path) -> None:
    ks = Keystore(tmp_path / "keys", fsync=False)
    ks.get_or_create(ALICE, M1)
    ks.flush()
    path = ks.path_of(ALICE)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(LogError, match="damaged"):
        Keystore(tmp_path / "keys").get(ALICE, M1)


def test_the_keystore_is_beside_an_embedded_log_unless_set(tmp_path: Path) -> None:
    settings = Settings()
    assert keystore_path(str(tmp_path / "log"), settings) == (tmp_path / "log.keys").resolve()
    assert keystore_path("kafka://h:1", settings) == Path.home() / ".adamem" / "keys" / "adamem"
    assert keystore_path("memory://", settings) is None
    assert (
        keystore_path("kafka://h:1", dataclasses.replace(settings, home=str(tmp_path / "h")))
        == tmp_path / "h" / "keys" / "adamem"
    )
    assert keystore_path("kafka://h:1", dataclasses.replace(settings, keystore=str(tmp_path / "k"))) == tmp_path / "k"


def test_a_sealed_message_is_opaque_bytes_without_its_key_and_itself_with_it() -> None:
    keys = InMemoryKeyRing()
    data = encode_event(MSG, keys)
    for clear in (MSG.text, MSG.speaker.name, *MSG.metadata.values()):
        assert clear.encode() not in data
    opened = decode_event(data, keys)
    assert isinstance(opened, ChatMessage) and not opened.shredded
    assert dataclasses.replace(opened, sealed=None) == MSG
    bare = decode_event(data)  # a reader without the keystore: a marker, not a crash
    assert isinstance(bare, ChatMessage) and bare.shredded and (bare.text, bare.speaker.name) == ("", "")
    assert (bare.event_id, bare.user_id, bare.occurred_at) == (MSG.event_id, MSG.user_id, MSG.occurred_at)
    assert keys.forget_message(MSG.owner_id, MSG.event_id)
    assert decode_event(data, keys).shredded  # type: ignore[union-attr]


def test_a_sealed_analysis_hides_its_derived_fields_and_vector_and_opens_to_itself() -> None:
    keys = InMemoryKeyRing()
    data = encode_event(ANALYSIS, keys)
    for clear in (ANALYSIS.message.text, ANALYSIS.summary, "spicy food", *ANALYSIS.entities):
        assert clear.encode() not in data, clear
    opened = decode_event(data, keys)
    assert isinstance(opened, MessageAnalyzed) and not opened.shredded
    plain = dataclasses.replace(opened, sealed=None, message=dataclasses.replace(opened.message, sealed=None))
    assert plain == ANALYSIS
    keys.forget_owner(ANALYSIS.owner_id)
    gone = decode_event(data, keys)
    assert isinstance(gone, MessageAnalyzed) and gone.shredded and gone.summary == "" and not gone.facts
    assert list(gone.embedding.vector) == [] and gone.embedding.model == ANALYSIS.embedding.model


def test_apache_avro_reads_sealed_events_as_opaque_bytes() -> None:
    """The reference reader (Apache Avro's Python package) decodes what we write from the .avsc files alone."""
    names = avro.schema.Names()
    schemas = {}
    for name in ("chat_message", "message_analyzed", "message_content", "analysis_content"):
        s = avro.schema.make_avsc_object(json.loads((SCHEMA_DIR / f"{name}.avsc").read_text()), names)
        schemas[s.fullname] = s
    keys = InMemoryKeyRing()
    data = encode_event(ANALYSIS, keys)
    reader = avro.io.DatumReader(schemas[MessageAnalyzed.SCHEMA])
    decoded = reader.read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    assert decoded["message"]["text"] == "" and decoded["summary"] == "" and decoded["embedding"]["vector"] == []
    assert decoded["sealed"]["scheme"] == "aes256gcm/1" and len(decoded["sealed"]["nonce"]) == 12
    assert isinstance(decoded["sealed"]["ciphertext"], bytes) and isinstance(decoded["message"]["sealed"], dict)
    # with the key, the plaintext inside is Avro too: the reference reads it from message_content.avsc
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from adamem.schemas.sealing import _aad

    key = keys.get(ANALYSIS.owner_id, ANALYSIS.message.event_id)
    assert key is not None
    sealed = decoded["message"]["sealed"]
    aad = _aad("adamem.events.MessageContent", ANALYSIS.owner_id, ANALYSIS.message.event_id)
    plain = AESGCM(key).decrypt(sealed["nonce"], sealed["ciphertext"], aad)
    content = avro.io.DatumReader(schemas["adamem.events.MessageContent"]).read(
        avro.io.BinaryDecoder(io.BytesIO(plain[10:]))
    )
    assert content["text"] == MSG.text and content["speaker_name"] == MSG.speaker.name


def test_tampered_or_moved_ciphertext_is_a_decode_error_not_text() -> None:
    keys = InMemoryKeyRing()
    message = decode_event(encode_event(MSG, keys))
    assert isinstance(message, ChatMessage) and message.sealed is not None
    flipped = bytearray(message.sealed.ciphertext)
    flipped[0] ^= 1
    tampered = dataclasses.replace(message, sealed=Sealed(message.sealed.scheme, message.sealed.nonce, bytes(flipped)))
    with pytest.raises(DecodeError, match="does not open"):
        decode_event(encode_event(tampered), keys)
    other = dataclasses.replace(MSG, event_id=M1)
    keys.get_or_create(other.owner_id, M1)
    moved = dataclasses.replace(other, sealed=message.sealed, shredded=True)  # alice's ciphertext on another event
    with pytest.raises(DecodeError, match="does not open"):
        decode_event(encode_event(moved), keys)


def test_an_analysis_of_a_sealed_message_is_never_written_in_the_clear() -> None:
    keys = InMemoryKeyRing()
    message = decode_event(encode_event(MSG, keys), keys)
    assert isinstance(message, ChatMessage)
    with pytest.raises(SchemaError, match="keystore"):
        encode_event(dataclasses.replace(ANALYSIS, message=message))


def test_a_shredded_analysis_folds_to_nothing() -> None:
    keys = InMemoryKeyRing()
    data = encode_event(ANALYSIS, keys)
    keys.forget_message(ANALYSIS.owner_id, ANALYSIS.message.event_id)
    event = decode_event(data, keys)
    state, changes = apply(OwnerMemory(ANALYSIS.owner_id), event)
    assert changes == [] and state.rows() == []
    ring = InMemoryKeyRing()
    _, live = apply(OwnerMemory(ANALYSIS.owner_id), decode_event(encode_event(ANALYSIS, ring), ring))
    assert live  # the same analysis, readable, does fold


def test_log_dump_shows_sealed_events_opened_and_says_when_they_are_shredded() -> None:
    keys = InMemoryKeyRing()
    rec = LogRecord("adamem.messages", 0, 0, "alice", encode_event(MSG, keys), 0)
    row = record_to_json(rec, keys)
    assert row["event"]["text"] == MSG.text and row["event"]["sealed"] is True and "shredded" not in row
    keys.forget_message(MSG.owner_id, MSG.event_id)
    row = record_to_json(rec, keys)
    assert row["shredded"] is True and row["event"]["text"] == ""


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


async def test_a_producer_that_does_not_seal_has_its_analyses_sealed_but_its_messages_topic_stays_clear(
    settings: Settings, tmp_path: Path
) -> None:
    """What erasure does not cover: a message written in the clear by another producer stays on the messages topic."""
    log = open_log(settings.log_url, settings)
    await log.start()
    [message] = load_messages(
        b'{"user_id": "eve", "speaker": "Eve", "text": "My locker code is Quetzalplum.", "occurred_at": 1}\n', settings
    )
    await log.append(settings.topic("messages"), [OutgoingRecord("eve", encode_event(message))])  # no keys
    store = LanceStore(settings.store_url)
    await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), _embedder()), settings)
    assert store.rows("messages", message.owner_id)
    keys = keystore_for(log, settings)
    assert keys.get(message.owner_id, message.event_id) is not None  # the analyzer made its key
    await log.stop()
    await run_forget(
        settings, "eve", tenant="default", item=None, message=message.event_id, everything=False, reason=""
    )
    log = open_log(settings.log_url, settings)
    await log.start()
    await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), _embedder()), settings)
    assert (await rebuild_view(log, settings.store_url, settings, verify=True)).verified
    traces = find_text("Quetzalplum", log_root=Path(settings.log_url), store_root=Path(settings.store_url), keys=keys)
    assert traces and {t.path.parent.name for t in traces} == {settings.topic("messages")}, traces  # only there
    await log.stop()


@pytest.mark.kafka
async def test_forget_verify_reads_every_record_of_every_topic_of_a_kafka_log(
    settings: Settings,
    kafka_bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from adamem.cli.main import main
    from tests.streams.test_erasure import CONTROL, MARKER, SECRET

    kafka = dataclasses.replace(settings, log_url=f"kafka://{kafka_bootstrap}", keystore=str(tmp_path / "keys"))
    for name, value in (("TOPIC_PREFIX", kafka.topic_prefix), ("PARTITIONS", "3"), ("KEYSTORE", kafka.keystore)):
        monkeypatch.setenv(f"ADAMEM_{name}", value)
    log = open_log(kafka.log_url, kafka)
    await log.start()
    await publish_messages(log, load_messages(SAMPLE + json.dumps(SECRET).encode() + b"\n", kafka), kafka)
    store = LanceStore(kafka.store_url)
    agent = MemoryAgent(RuleExtractor(), _embedder())
    await run_pipeline(log, Projector(store), agent, kafka)
    [secret] = [m for m in store.rows("messages", "default:alice") if MARKER in m.text]  # type: ignore[attr-defined]
    verify = ["forget", "alice", "--verify", "--text", MARKER, "--log", kafka.log_url, "--store", kafka.store_url]
    assert await asyncio.to_thread(main, verify) == 1
    before = capsys.readouterr().out
    for topic in ("messages", "analyses"):  # read from the broker, opened with the keystore
        assert f"{kafka.topic(topic)} partition" in before and "opened with the keystore" in before, before

    assert await asyncio.to_thread(main, ["forget", "alice", "--message", secret.id, "--log", kafka.log_url]) == 0
    assert "destroyed" in capsys.readouterr().out
    await run_pipeline(log, Projector(store), agent, kafka)
    report = await rebuild_view(log, kafka.store_url, kafka, verify=True)
    assert report.verified and report.switched, report.diffs
    await log.stop()
    assert await asyncio.to_thread(main, verify) == 0, capsys.readouterr().out
    assert "found nowhere" in capsys.readouterr().out
    assert await asyncio.to_thread(main, [*verify[:4], CONTROL, *verify[5:]]) == 1  # xiaoming's: still there
    assert f"{kafka.topic('messages')} partition" in capsys.readouterr().out
