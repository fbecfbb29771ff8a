"""Input validation: all or nothing, every problem named by line or record."""

from __future__ import annotations

import itertools
import json

import pytest

from adamem.errors import InputError
from adamem.ingest import load_messages, parse_time, parse_time_offset, stated_time
from adamem.settings import Settings
from tests.conftest import LOCOMO

GOOD = {"user_id": "alice", "speaker": "Alice", "text": "I love hiking", "occurred_at": "2024-03-01T09:30:00Z"}


def _jsonl(*rows: object) -> bytes:
    return b"\n".join(r if isinstance(r, bytes) else json.dumps(r, ensure_ascii=False).encode() for r in rows)


def test_a_good_line_becomes_a_message(settings: Settings) -> None:
    (msg,) = load_messages(_jsonl(GOOD), settings)
    assert (msg.user_id, msg.speaker.name, msg.speaker.role, msg.text) == ("alice", "Alice", "user", "I love hiking")
    assert msg.occurred_at == 1_709_285_400_000
    assert msg.tenant == "default" and msg.conversation_id == "default"


def test_event_ids_are_deterministic_so_republishing_is_recognised(settings: Settings) -> None:
    first = load_messages(_jsonl(GOOD, {**GOOD, "text": "other"}), settings)
    second = load_messages(_jsonl(GOOD, {**GOOD, "text": "other"}), settings)
    assert [m.event_id for m in first] == [m.event_id for m in second]
    assert first[0].event_id != first[1].event_id


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({k: v for k, v in GOOD.items() if k != "user_id"}, "'user_id'"),
        ({k: v for k, v in GOOD.items() if k != "speaker"}, "'speaker'"),
        ({k: v for k, v in GOOD.items() if k != "text"}, "'text' is missing"),
        ({**GOOD, "text": "   "}, "'text' is empty"),
        ({**GOOD, "text": "x" * 40_000}, "over the limit"),
        ({**GOOD, "occurred_at": "yesterday-ish"}, "'occurred_at'"),
        ({k: v for k, v in GOOD.items() if k != "occurred_at"}, "'occurred_at' is missing"),
        ({**GOOD, "role": "robot"}, "'role'"),
        ({**GOOD, "event_id": "not-a-uuid"}, "'event_id'"),
        ({**GOOD, "metadata": {"a": 1}}, "'metadata'"),
    ],
)
def test_a_bad_record_rejects_the_whole_batch(settings: Settings, bad: dict[str, object], needle: str) -> None:
    with pytest.raises(InputError) as info:
        load_messages(_jsonl(GOOD, bad, GOOD), settings, source="in.jsonl")
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("in.jsonl:2:")
    assert needle in info.value.problems[0]
    assert "nothing was published" in str(info.value)


def test_invalid_utf8_and_broken_json_are_named_by_line(settings: Settings) -> None:
    with pytest.raises(InputError) as info:
        load_messages(_jsonl(GOOD, b'{"user_id": "a", "text": "\xff\xfe"}', b"{not json"), settings, source="x")
    assert [p.split(":")[1] for p in info.value.problems] == ["2", "3"]
    assert "UTF-8" in info.value.problems[0] and "not JSON" in info.value.problems[1]


def test_size_limit_is_configurable(settings: Settings) -> None:
    small = Settings(max_text_bytes=10)
    with pytest.raises(InputError, match="over the limit of 10"):
        load_messages(_jsonl(GOOD), small)
    assert load_messages(_jsonl({**GOOD, "text": "短"}), small)[0].text == "短"


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("1:56 pm on 8 May, 2023", 1_683_554_160_000),
        ("12:05 am on 1 Jan, 2024", 1_704_067_500_000),
        ("2024-03-01T09:30:00+08:00", 1_709_256_600_000),
        ("2024-03-01 09:30", 1_709_285_400_000),
        (1_700_000_000_000, 1_700_000_000_000),
    ],
)
def test_time_formats(value: object, ms: int) -> None:
    assert parse_time(value) == ms


@pytest.mark.parametrize(
    ("value", "ms", "offset"),
    [
        ("2024-03-02T00:30:00+08:00", 1_709_310_600_000, 480),
        ("2024-03-01T21:00:00-05:00", 1_709_344_800_000, -300),
        ("2024-03-01T09:30:00+05:45", 1_709_264_700_000, 345),
        ("2024-03-01T09:30:00Z", 1_709_285_400_000, 0),
        ("2024-03-01T09:30:00+00:00", 1_709_285_400_000, 0),
        ("2024-03-01T09:30:00-00:00", 1_709_285_400_000, None),  # RFC 3339: the local offset is unknown
        ("2024-03-01 09:30", 1_709_285_400_000, None),  # naive: UTC, no offset stated
        (1_709_285_400_000, 1_709_285_400_000, None),
        ("9:30 am on 1 March, 2024", 1_709_285_400_000, None),
    ],
)
def test_the_offset_a_time_states_is_kept(value: object, ms: int, offset: int | None) -> None:
    assert parse_time_offset(value) == (ms, offset)
    assert parse_time_offset(stated_time(value)) == (ms, offset)  # what the CLI and MCP pass on


def test_a_message_keeps_its_speakers_offset_or_the_one_given_with_milliseconds(settings: Settings) -> None:
    rows = [
        {**GOOD, "text": "我喜欢爬山", "occurred_at": "2024-03-02T00:30:00+08:00"},
        {**GOOD, "occurred_at": 1_709_344_800_000, "utc_offset_minutes": -300},
        {**GOOD, "occurred_at": "2024-03-01T21:00:00-05:00", "utc_offset_minutes": -300},  # the same: fine
        GOOD,
        {**GOOD, "occurred_at": "2024-03-01T09:30:00"},
    ]
    assert [m.utc_offset_minutes for m in load_messages(_jsonl(*rows), settings)] == [480, -300, -300, 0, None]
    with pytest.raises(InputError) as caught:
        load_messages(
            _jsonl(
                {**GOOD, "occurred_at": "2024-03-01T21:00:00-05:00", "utc_offset_minutes": 480},
                {**GOOD, "utc_offset_minutes": "+08:00"},
                {**GOOD, "utc_offset_minutes": 1440},
            ),
            settings,
        )
    problems = "\n".join(caught.value.problems)
    assert "<input>:1: 'utc_offset_minutes' 480 disagrees with the offset 'occurred_at' states (-300)" in problems
    assert "<input>:2: 'utc_offset_minutes' '+08:00' is not a whole number of minutes" in problems
    assert "<input>:3: 'utc_offset_minutes' 1440 is not a whole number of minutes" in problems


def test_locomo_each_conversation_is_one_owner(settings: Settings) -> None:
    messages = load_messages(LOCOMO.read_bytes(), settings, str(LOCOMO))
    assert len(messages) == 2760  # every turn of the split (its README says 2,740; the file has 2,760)
    owners = {m.user_id for m in messages}
    assert owners == {"conv-26", "conv-30", "conv-41", "conv-42", "conv-43"}
    first = next(m for m in messages if m.user_id == "conv-26")
    assert (first.message_id, first.speaker.name, first.speaker.role) == ("D1:1", "Caroline", "user")
    assert first.occurred_at == parse_time("1:56 pm on 8 May, 2023")
    assert first.conversation_id == "conv-26/session_1"
    per_owner = [m for m in messages if m.user_id == "conv-26"]
    same_session = [(a, b) for a, b in itertools.pairwise(per_owner) if a.conversation_id == b.conversation_id]
    assert all(a.occurred_at < b.occurred_at for a, b in same_session)
    assert {m.utc_offset_minutes for m in messages} == {None}  # LoCoMo's dates state no offset: UTC
    assert len({m.event_id for m in messages}) == 2760
    assert any("blip_caption" in m.metadata for m in messages)


def test_locomo_bad_session_date_is_reported(settings: Settings) -> None:
    doc = [
        {
            "sample_id": "c1",
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_1_date_time": "someday",
                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
            },
        }
    ]
    with pytest.raises(InputError, match="c1 session_1_date_time"):
        load_messages(json.dumps(doc).encode(), settings, "doc.json")
