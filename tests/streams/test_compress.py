"""Compression on the write path: proposed after a batch, recorded on the log, folded; replay never proposes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.events import MemoryCompressed, MemoryForgotten
from adamem.ingest import load_messages
from adamem.projections.folds.rows import EpisodicRow
from adamem.projections.projector import Projector
from adamem.projections.store import MemoryStore
from adamem.projections.store.lance import LanceStore
from adamem.projections.store.memory import InMemoryStore
from adamem.retrieval import SEED_DEFAULT, Retriever
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.keys import keystore_for
from adamem.streams.log import OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages, record_to_json
from adamem.streams.replay import rebuild_view
from tests.conftest import FlatEmbedder

RUNS = {
    "alice": [
        "I went for a run after work today.",
        "I went running in the park today, 5 km.",
        "I went jogging by the river this morning after my check-up.",
        "I went running with a colleague today.",
        "I went for an 8 km run this evening.",
    ],
    "wang": [
        "我今天下班后去跑步了。",
        "我今天在公园跑步了5公里。",
        "今天体检之后我去河边慢跑了。",
        "我今天和同事一起去跑步了。",
        "我今天晚上夜跑了8公里。",
    ],
}


DAYS = ["2024-03-04", "2024-03-18", "2024-04-01", "2024-04-15", "2024-05-06", "2024-06-03"]


def chat_jsonl() -> bytes:
    """Each user runs about every two weeks from March to May 2024, one session each, then says hello in June."""
    lines = []
    for user, runs in RUNS.items():
        for i, text in enumerate([*runs, "Hello again!" if user == "alice" else "又见面了！"]):
            lines.append(
                {
                    "user_id": user,
                    "conversation_id": f"s{i}",
                    "message_id": f"s{i}-1",
                    "speaker": user.title(),
                    "role": "user",
                    "text": text,
                    "occurred_at": f"{DAYS[i]}T19:00:00Z",
                }
            )
    return "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode()


def summaries(store: MemoryStore, owner: str) -> list[EpisodicRow]:
    return [r for r in store.rows("episodic", owner) if isinstance(r, EpisodicRow) and r.type == "summary"]


@pytest.mark.parametrize("kind", ["lance", "memory"])
async def test_compression_is_recorded_folded_answered_and_replayed_without_the_compressor(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    on = dataclasses.replace(settings, compression="rules")
    log = open_log(str(tmp_path / "log"), on)
    await log.start()
    await publish_messages(log, load_messages(chat_jsonl(), on), on)
    views: str | InMemoryStore = str(tmp_path / "store") if kind == "lance" else InMemoryStore()

    def active() -> MemoryStore:
        return LanceStore(views) if isinstance(views, str) else views.open_view()

    live = active()
    await run_pipeline(log, Projector(live), MemoryAgent(RuleExtractor(), FlatEmbedder()), on)

    [en] = summaries(live, "default:alice")
    assert en.content.startswith("March–May 2024: running, 5 times (about every 2 weeks): ")
    [zh] = summaries(live, "default:wang")
    assert zh.content.startswith("2024年3月至5月：跑步5次（约每2周一次）：")
    for owner, summary in (("default:alice", en), ("default:wang", zh)):
        rows = [r for r in live.rows("episodic", owner) if isinstance(r, EpisodicRow)]
        sources = [r for r in rows if r.superseded_by == summary.id]
        assert len(sources) == 5 and {r.status for r in sources} == {"compressed"}
        assert sorted(summary.source_message_ids) == sorted(m for r in sources for m in r.source_message_ids)
    raw = [r.value async for r in log.read(on.topic("control"))]
    assert len(raw) == 2 and not any(b"running" in v or "跑步".encode() in v for v in raw)  # sealed on the log
    recorded = [decode_event(v, keystore_for(log, on)) for v in raw]
    shown = [record_to_json(r, keystore_for(log, on)) async for r in log.read(on.topic("control"))]
    assert {s["type"] for s in shown} == {"MemoryCompressed"} and "跑步" in json.dumps(shown, ensure_ascii=False)
    assert sorted(e.key for e in recorded if isinstance(e, MemoryCompressed)) == ["running", "running"]

    # every run is also a message in working memory: without deduplication the summary is shown beside them
    retriever = Retriever(
        live, FlatEmbedder(), dataclasses.replace(SEED_DEFAULT, dedupe_evidence=False, summary_evidence=0)
    )
    answer = retriever.query("default:alice", "How often does Alice go running?", top_k=10)
    [item] = [i for i in answer.items if i.id == en.id]  # the summary answers, with its evidence chain
    assert {p.message_id for p in item.provenance} == {f"s{i}-1" for i in range(5)}
    retriever.close()
    shown = Retriever(live, FlatEmbedder(), dataclasses.replace(SEED_DEFAULT, dedupe_evidence=False))
    [item] = [i for i in shown.query("default:alice", "How often does Alice run?", top_k=10).items if i.id == en.id]
    assert len(item.provenance) == 3  # by default the three sources nearest the question
    shown.close()

    def no_compressor(*args: object, **kwargs: object) -> list[MemoryCompressed]:
        raise AssertionError("replay must fold the recorded compression, not run the compressor")

    monkeypatch.setattr("adamem.projections.compressor.propose", no_compressor)
    monkeypatch.setattr("adamem.streams.compress.propose", no_compressor)
    report = await rebuild_view(log, views, settings, verify=True)
    assert report.verified is True and report.diffs == []

    # forgetting one run destroys its key: the summary quoting it is gone from memory and unreadable on the log
    forgotten = next(r for r in live.rows("messages", "default:alice") if r.message_id == "s2-1")
    forget = MemoryForgotten(
        "6f1c9a10-0000-4000-8000-0000000000c1", "alice", "message", 1_717_500_000_000, forgotten.id
    )
    await log.append(on.topic("control"), [OutgoingRecord("alice", encode_event(forget))])
    current = active()
    await run_pipeline(log, Projector(current), MemoryAgent(RuleExtractor(), FlatEmbedder()), settings)
    rows = [r for r in current.rows("episodic", "default:alice") if isinstance(r, EpisodicRow)]
    assert [r.type for r in rows] == ["event"] * 4 and {r.status for r in rows} == {"active"}
    assert all(
        e.shredded
        for v in raw
        if isinstance(e := decode_event(v, keystore_for(log, on)), MemoryCompressed) and e.user_id == "alice"
    )
    again = await rebuild_view(log, views, settings, verify=True)
    assert again.verified is True and again.diffs == []
    await log.stop()


def test_the_compressor_is_named_by_settings(settings: Settings) -> None:
    from adamem.errors import ConfigError
    from adamem.projections.compressor import RULES
    from adamem.projections.compressor_llm import OpenAICompatibleCompressor
    from adamem.streams.compress import compressor_for

    assert compressor_for(dataclasses.replace(settings, compression="rules")) is RULES
    llm = dataclasses.replace(settings, compression="openai", llm_url="http://127.0.0.1:9/v1", llm_model="qwen")
    made = compressor_for(llm)
    assert isinstance(made, OpenAICompatibleCompressor) and made.version == "1/qwen"
    with pytest.raises(ConfigError, match="needs ADAMEM_LLM_URL"):
        compressor_for(dataclasses.replace(settings, compression="openai"))
    with pytest.raises(ConfigError, match="not one of: off, rules, openai"):
        compressor_for(dataclasses.replace(settings, compression="gpt"))
