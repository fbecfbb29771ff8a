"""Times on the speaker's clock: the offset a message's time states is kept on the log, in the rows and in
every answer, and a replay renders the same.

Each message is said shortly after local midnight (or before it), so its UTC calendar day is another day
than the speaker's: "yesterday" and the day an answer names must be the speaker's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adamem import Memory
from adamem.integrations.mcp_server import compact_answer
from adamem.retrieval.answer import Answer, when_text

# text, when it was said (the speaker's clock), the question, the offset, the local time, the day it happened
CASES = [
    (
        "昨天我去长城爬山了。",
        "2024-03-02T00:30:00+08:00",  # 2024-03-01T16:30Z: UTC says the 1st, the speaker the 2nd
        "我什么时候去的长城？",
        480,
        "2024-03-02T00:30:00+08:00",
        "2024-03-01",
    ),
    (
        "Yesterday I ran my first marathon in Boston.",
        "2024-03-01T21:00:00-05:00",  # 2024-03-02T02:00Z: UTC says the 2nd, the speaker the 1st
        "When did I run my first marathon?",
        -300,
        "2024-03-01T21:00:00-05:00",
        "2024-02-29",
    ),
]


def _add(m: Memory, user: str, text: str, at: str) -> None:
    m.add(user, text, occurred_at=at)
    m.add(user, "I had noodles for lunch.", occurred_at="2024-03-01T04:00:00Z")  # another message, in UTC


def _item(answer: Answer, text: str) -> dict[str, Any]:
    return next(i for i in answer.to_dict()["items"] if i["content"] == text)


@pytest.mark.parametrize(("text", "at", "question", "offset", "local", "day"), CASES, ids=["zh+08", "en-05"])
def test_an_answer_shows_the_time_and_day_on_the_speakers_clock(
    tmp_path: Path, text: str, at: str, question: str, offset: int, local: str, day: str
) -> None:
    with Memory(log=str(tmp_path / "log"), store=str(tmp_path / "store")) as m:
        _add(m, "lin", text, at)
        answer = m.query("lin", question)
        item = _item(answer, text)
        assert item["utc_offset_minutes"] == offset
        assert item["occurred_at_local"] == local
        assert item["provenance"][0]["utc_offset_minutes"] == offset
        assert item["provenance"][0]["occurred_at_local"] == local
        # "yesterday" is the day before the speaker's day, not before the UTC day
        assert (
            when_text(item["occurred_at"], item["event_time"], item["utc_offset_minutes"])
            == f"{local} (happened {day})"
        )
        assert f"{local} (happened {day})" in compact_answer(answer)  # what MCP's recall shows
        noodles = _item(m.query("lin", "What did I have for lunch?"), "I had noodles for lunch.")
        assert (noodles["utc_offset_minutes"], noodles["occurred_at_local"]) == (0, "2024-03-01T04:00:00Z")

        before = [(i["id"], i["utc_offset_minutes"], i["occurred_at_local"]) for i in answer.to_dict()["items"]]
        assert m.replay(verify=True).verified is True  # the rebuilt rows (the offsets too) equal the live ones
        assert m.replay().switched
        again = m.query("lin", question)
        assert [(i["id"], i["utc_offset_minutes"], i["occurred_at_local"]) for i in again.to_dict()["items"]] == before
        assert compact_answer(again) == compact_answer(answer)


def test_a_time_without_an_offset_is_shown_in_utc(tmp_path: Path) -> None:
    with Memory(log=str(tmp_path / "log"), store=str(tmp_path / "store")) as m:
        m.add("bo", "I adopted a cat named Miso.", occurred_at="2024-03-02T00:30:00")  # naive: UTC, no offset
        m.add("bo", "我养了一只叫年糕的狗。", occurred_at=1_709_339_400_000)  # milliseconds: no offset
        answer = m.query("bo", "What pets do I have?")
        shown = {i["content"]: (i["utc_offset_minutes"], i["occurred_at_local"]) for i in answer.to_dict()["items"]}
    assert shown["I adopted a cat named Miso."] == (None, "2024-03-02T00:30:00Z")
    assert shown["我养了一只叫年糕的狗。"] == (None, "2024-03-02T00:30:00Z")


def test_the_cli_adds_at_the_speakers_time_and_shows_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from adamem.cli import main

    folder = ["--log", str(tmp_path / "log"), "--store", str(tmp_path / "store")]
    text, at, question, _, local, day = CASES[0]
    assert main(["add", "lin", text, "--at", at, *folder]) == 0
    capsys.readouterr()
    assert main(["query", "lin", question, "--store", str(tmp_path / "store")]) == 0
    assert f"{local} (happened {day})" in capsys.readouterr().out


def test_the_inspector_shows_the_speakers_clock(tmp_path: Path) -> None:
    from adamem.api.app import create_app
    from adamem.projections.store.factory import open_store
    from adamem.retrieval.service import Retriever
    from adamem.settings import Settings
    from tests.api.conftest import embedder
    from tests.conftest import serving

    store = str(tmp_path / "store")
    with Memory(log=str(tmp_path / "log"), store=store) as m:
        for text, at, *_ in CASES:
            m.add("lin", text, occurred_at=at)
    app = create_app(Settings.from_env(store_url=store), Retriever(open_store(store, read_only=True), embedder()))
    with serving(app) as c:
        timeline = c.get("/ui/owners/lin/timeline").text
        asked = c.get("/ui/owners/lin/query", params={"q": CASES[0][2]}).text
    assert "2024-03-02T00:30:00+08:00" in timeline and "2024-03-01T21:00:00-05:00" in timeline
    assert '<td class="time">2024-03-01T16:30:00Z</td>' not in timeline  # the message's row: not the UTC time
    assert "2024-03-02T00:30:00+08:00 (happened 2024-03-01)" in asked
