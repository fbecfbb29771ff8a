"""``Memory.persona`` and ``Memory.timeline`` (``history``) return typed results whose ``to_dict`` is the JSON shape.

The owners are the bundled sample's ``alice`` (English) and ``xiaoming`` (Chinese), remembered
through the facade itself. The dict keys are checked in order, since JSON callers (the MCP server)
print them as they come.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from adamem import AsyncMemory, Memory, PersonaTrait, TimelineEntry, TraitEvidence
from adamem.ingest import parse_time

TRAIT_KEYS = [
    "id",
    "kind",
    "key",
    "value",
    "strength",
    "mentions",
    "stable",
    "disputed",
    "first_seen",
    "last_seen",
    "evidence",
]
EVIDENCE_KEYS = ["message_event_id", "text", "occurred_at"]
MESSAGE_KEYS = ["time", "source", "id", "speaker", "text"]
EPISODIC_KEYS = ["time", "source", "id", "text", "from"]


def _sample(user_id: str) -> list[dict[str, str]]:
    lines = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_text(encoding="utf-8")
    return [r for r in map(json.loads, lines.splitlines()) if r["user_id"] == user_id]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("reads")
    return {"log": str(root / "log"), "store": str(root / "store")}


@pytest.fixture(scope="module")
def memory(stores: dict[str, str]) -> Iterator[Memory]:
    with Memory(**stores) as m:
        for user in ("alice", "xiaoming"):
            m.remember(user, _sample(user))
        yield m


def _check_trait(trait: PersonaTrait) -> None:
    assert isinstance(trait, PersonaTrait) and isinstance(trait.evidence, tuple)
    assert all(isinstance(e, TraitEvidence) for e in trait.evidence)
    d = trait.to_dict()
    assert list(d) == TRAIT_KEYS
    types = {"strength": float, "mentions": int, "stable": bool, "disputed": bool, "evidence": list}
    for key, value in d.items():
        assert isinstance(value, types.get(key, str)), (key, value)
    assert d["strength"] == round(d["strength"], 4)
    for e in d["evidence"]:
        assert list(e) == EVIDENCE_KEYS and all(isinstance(v, str) for v in e.values())
    assert json.loads(json.dumps(d, ensure_ascii=False)) == d


@pytest.mark.parametrize(
    ("user", "kind", "value", "said"),
    [
        ("alice", "preference", "spicy food", "I love spicy food, especially Sichuan hotpot."),
        ("alice", "trait", "peanuts", "I'm allergic to peanuts, so I have to read every label anyway."),
        ("xiaoming", "preference_cluster", "重口味", "我喜欢吃辣的川菜。"),
        ("xiaoming", "trait", "花生", "我对花生过敏。"),
    ],
)
def test_persona_is_typed_traits_with_their_evidence(
    memory: Memory, user: str, kind: str, value: str, said: str
) -> None:
    traits = memory.persona(user)
    assert traits and [t.strength for t in traits] == sorted((t.strength for t in traits), reverse=True)
    for trait in traits:
        _check_trait(trait)
    trait = next(t for t in traits if t.value == value)
    assert trait.kind == kind and not trait.disputed and trait.mentions >= 1
    assert said in [e.text for e in trait.evidence]
    first = next(e for e in trait.evidence if e.text == said)
    assert first.occurred_at.endswith("Z") and trait.first_seen <= first.occurred_at <= trait.last_seen
    with pytest.raises(dataclasses.FrozenInstanceError):
        trait.value = "something else"  # type: ignore[misc]
    assert memory.persona(user, limit=1) == traits[:1]


def test_a_stable_trait_reads_as_stable(memory: Memory) -> None:
    spicy = next(t for t in memory.persona("alice") if t.value == "spicy food")
    assert spicy.stable and spicy.key == "likes" and spicy.mentions == 3 and len(spicy.evidence) == 3
    assert spicy.to_dict()["evidence"][-1] == {
        "message_event_id": spicy.evidence[-1].message_event_id,
        "text": "Honestly I love spicy food more than anything, even after the check-up.",
        "occurred_at": "2024-04-01T08:16:00Z",
    }


@pytest.mark.parametrize(
    ("user", "start", "end", "speaker", "said", "drawn"),
    [
        (
            "alice",
            "2024-03-04T00:00:00Z",
            "2024-03-05T00:00:00Z",
            "Alice",
            "Hi! I just moved from Shanghai to Beijing for a new job.",
            "Alice lives in Beijing (moved from Shanghai)",
        ),
        (
            "xiaoming",
            "2024-05-06T00:00:00Z",
            "2024-05-07T00:00:00Z",
            "小明",
            "我刚从上海搬到北京，公司在海淀。",
            "小明住在北京（从上海搬来）",
        ),
    ],
)
def test_timeline_is_typed_entries_of_messages_and_episodic_records(
    memory: Memory, user: str, start: str, end: str, speaker: str, said: str, drawn: str
) -> None:
    entries = memory.timeline(user, parse_time(start), parse_time(end))
    assert entries and all(isinstance(e, TimelineEntry) for e in entries)
    assert [e.time for e in entries] == sorted(e.time for e in entries)
    assert all(start <= e.time <= end for e in entries)
    message = next(e for e in entries if e.text == said)
    assert message.source == "message" and message.speaker == speaker and message.from_ids is None
    assert list(message.to_dict()) == MESSAGE_KEYS
    assert all(isinstance(v, str) for v in message.to_dict().values())
    record = next(e for e in entries if e.text == drawn)
    assert record.source == "episodic/fact" and record.speaker is None and record.from_ids == (message.id,)
    assert record.to_dict() == {
        "time": message.time,
        "source": "episodic/fact",
        "id": record.id,
        "text": drawn,
        "from": [message.id],
    }
    for entry in entries:
        d = entry.to_dict()
        assert list(d) == (MESSAGE_KEYS if entry.source == "message" else EPISODIC_KEYS)
        assert entry.source == "message" or entry.source.startswith("episodic/")
        assert json.loads(json.dumps(d, ensure_ascii=False)) == d
    assert memory.history(user, parse_time(start), parse_time(end)) == entries
    assert memory.timeline(user, parse_time(start), parse_time(end), limit=2) == entries[:2]


def test_history_is_timeline() -> None:
    assert Memory.history is Memory.timeline and AsyncMemory.history is AsyncMemory.timeline
    assert "history" in (Memory.timeline.__doc__ or "") and "history" in (AsyncMemory.timeline.__doc__ or "")


def test_async_memory_reads_the_same_typed_results(memory: Memory, stores: dict[str, str]) -> None:
    start, end = parse_time("2024-05-01T00:00:00Z"), parse_time("2024-06-30T00:00:00Z")
    want_persona, want_timeline = memory.persona("xiaoming"), memory.timeline("xiaoming", start, end)

    async def run() -> None:
        async with AsyncMemory(**stores) as m:
            assert await m.persona("xiaoming") == want_persona
            assert await m.timeline("xiaoming", start, end) == want_timeline
            assert await m.history("xiaoming", start, end) == want_timeline

    asyncio.run(run())


def test_the_reference_page_lists_the_result_types() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "python.md").read_text(encoding="utf-8")
    results = page.split("## Results", 1)[1].split("\n## ", 1)[0]
    for name in ("PersonaTrait", "TraitEvidence", "TimelineEntry"):
        assert f"::: adamem.{name}\n" in results
