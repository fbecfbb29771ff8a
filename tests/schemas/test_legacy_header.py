"""Events written by earlier releases, with the fingerprint reversed, are still read.

``legacy_header/`` holds real bytes the old code wrote (see its README): one event of each type,
and an embedded log with messages, analyses and control events. Logs are kept forever, so these
must stay readable; what is written now is in the spec's order only.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path

import fastavro
import pytest

from adamem.cli import main
from adamem.projections.store.lance import LanceStore
from adamem.schemas import MAGIC, default_registry
from adamem.schemas.serde import decode_event, encode_event
from tests.schemas.test_codec import ANALYSIS, CORRECTED, FORGOT, MSG

FIXTURE = Path(__file__).resolve().parent / "legacy_header"
EVENTS = json.loads((FIXTURE / "events.json").read_text())


def test_the_fixture_records_the_old_order() -> None:
    assert EVENTS["header_order"] == "reversed"
    assert [e["schema"] for e in EVENTS["events"]] == [x.SCHEMA for x in (MSG, ANALYSIS, FORGOT, CORRECTED)]


@pytest.mark.parametrize(
    "index", range(4), ids=["ChatMessage", "MessageAnalyzed", "MemoryForgotten", "MemoryCorrected"]
)
def test_an_old_event_decodes_as_it_was_written_and_is_written_again_in_the_spec_s_order(index: int) -> None:
    old = bytes.fromhex(EVENTS["events"][index]["hex"])
    # written before `utc_offset_minutes`: the message reads without an offset (UTC)
    unstated = dataclasses.replace(MSG, utc_offset_minutes=None)
    event = (unstated, dataclasses.replace(ANALYSIS, message=unstated), FORGOT, CORRECTED)[index]
    registry = default_registry()
    assert registry.header_order(old) == "reversed"
    assert decode_event(old) == event
    new = encode_event(decode_event(old))
    assert registry.header_order(new) == "spec"
    assert decode_event(new) == event  # written again with the current schemas (with `sealed`)
    # Forwarded as it is (``reframe``): the same body; only the header's order changed.
    assert registry.reframe(old) == MAGIC + old[2:10][::-1] + old[10:]


def _entries(path: Path) -> list[dict[str, object]]:
    with path.open("rb") as fo:
        return list(fastavro.reader(fo))  # type: ignore[arg-type]


def _values(log: Path, topic: str) -> list[bytes]:
    return [bytes(e["value"]) for f in sorted((log / topic).glob("*.avro")) for e in _entries(f)]  # type: ignore[arg-type]


def test_an_old_embedded_log_is_projected_and_goes_on_in_the_spec_s_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = default_registry()
    log, store = tmp_path / "log", tmp_path / "store"
    shutil.copytree(FIXTURE / "log", log)
    old = {t: _values(log, f"adamem.{t}") for t in ("messages", "analyses", "control")}
    assert [len(v) for v in old.values()] == [8, 8, 2]
    assert {registry.header_order(v) for vs in old.values() for v in vs} == {"reversed"}  # real old bytes
    monkeypatch.setenv("ADAMEM_TOPIC_PREFIX", "adamem")

    assert main(["project", "--log", str(log), "--store", str(store)]) == 0
    # The messages are analysed already (the analyses are in the log): only the control events are new.
    assert capsys.readouterr().out.startswith(
        "analyzed 0 message(s), forwarded 2 control event(s), applied 10 event(s)"
    )
    live = LanceStore(str(store), read_only=True)
    # an old log projects into the (tenant, user_id) owners; one message was forgotten
    assert {o: len(live.rows("messages", o)) for o in live.owners()} == {"default:alice": 4, "default:xiaoming": 3}
    assert live.rows("persona", "default:alice") or live.rows("episodic", "default:alice")
    live.close()

    # A message written now goes on the same log in the spec's order, and both are read.
    src = tmp_path / "new.jsonl"
    line = {"user_id": "xiaoming", "speaker": "Xiaoming", "text": "我搬到杭州了", "occurred_at": 1_709_600_000_000}
    src.write_text(json.dumps(line, ensure_ascii=False), encoding="utf-8")
    assert main(["publish", str(src), "--log", str(log), "--quiet"]) == 0
    assert main(["project", "--log", str(log), "--store", str(store)]) == 0
    assert "analyzed 1 message(s)" in capsys.readouterr().out
    assert Counter(registry.header_order(v) for v in _values(log, "adamem.messages")) == {"reversed": 8, "spec": 1}
    # The analyses topic: the 8 old analyses as they were, then the 2 forwarded control events and
    # the new analysis, written now and so in the spec's order (a forwarded event is reframed).
    analyses = _values(log, "adamem.analyses")
    assert [registry.header_order(v) for v in analyses] == ["reversed"] * 8 + ["spec"] * 3
    assert analyses[8:10] == [registry.reframe(v) for v in old["control"]]
    live = LanceStore(str(store), read_only=True)
    assert len(live.rows("messages", "default:xiaoming")) == 4


def test_a_store_rebuilt_from_a_log_records_the_embedder_its_analyses_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The old log's analyses were embedded with e5: a fresh store takes e5 from them, not the default e5-pair, so
    the next message's vector fits the rows replayed; a configured embedder that disagrees is named in a warning."""
    from adamem.analysis.e5 import E5Embedder
    from adamem.analysis.pair import E5SmallV2, PairedEmbedder
    from adamem.streams.generations import embedder_named

    e5 = E5Embedder()
    assert embedder_named(e5.name) == "e5"
    assert embedder_named(PairedEmbedder(e5, E5SmallV2()).name) == "e5-pair"
    assert embedder_named("text-embedding-3-small") is None
    log = tmp_path / "log"
    shutil.copytree(FIXTURE / "log", log)
    monkeypatch.setenv("ADAMEM_TOPIC_PREFIX", "adamem")
    assert main(["project", "--log", str(log), "--store", str(tmp_path / "a")]) == 0
    assert LanceStore(str(tmp_path / "a"), read_only=True).generation()["embedder"] == "e5"
    monkeypatch.setenv("ADAMEM_EMBEDDER", "openai")  # set, and not the log's: the log's wins, with a warning
    assert main(["project", "--log", str(log), "--store", str(tmp_path / "b")]) == 0
    assert LanceStore(str(tmp_path / "b"), read_only=True).generation()["embedder"] == "e5"
    assert "the log's analyses were embedded with embedder=e5" in caplog.text
