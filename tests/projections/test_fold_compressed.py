"""Compression: clusters of event records distilled into one summary record, folded from a recorded event."""

from __future__ import annotations

import dataclasses

from adamem.events import MemoryCompressed, MessageAnalyzed
from adamem.projections.compressor import clusters_of, propose
from adamem.projections.folds import EpisodicRow, OwnerMemory, PersonaRow, Positioned, apply
from adamem.projections.folds.compressed import summary_id
from adamem.projections.folds.params import SEED_DEFAULT
from adamem.projections.folds.testing import DAY, HOUR, T0, WEEK, Chat, event, fold
from adamem.schemas.serde import decode_event, encode_event

RUNS_EN = [
    "went for a run after work",
    "went for a 5 km run in the park",
    "went jogging by the river after the check-up",
    "went running with a colleague",
    "went for an 8 km evening run",
]
RUNS_ZH = ["下班后去跑步", "在公园跑步5公里", "体检之后去河边慢跑", "和同事一起跑步", "晚上夜跑8公里"]


def series(chat: Chat, contents: list[str], *, every: int = 2 * WEEK, conv: str = "s") -> list[Positioned]:
    """One message a session, each stating one event; then a later message that closes the last session."""
    out = [
        chat.say(c, at=T0 + 9 * DAY + i * every + 19 * HOUR, conv=f"{conv}{i}", events=[event(c)])
        for i, c in enumerate(contents)
    ]
    out.append(chat.say("(later)", at=T0 + 9 * DAY + len(contents) * every, conv=f"{conv}-end"))
    return out


def episodic(state: OwnerMemory) -> list[EpisodicRow]:
    return [r for r in state.tables["episodic"].values() if isinstance(r, EpisodicRow)]


def positioned(chat: Chat, ev: MemoryCompressed) -> Positioned:
    return Positioned(ev, "adamem.analyses", 0, chat._next())


def habit(state: OwnerMemory) -> PersonaRow:
    [row] = [t for t in state.tables["persona"].values() if isinstance(t, PersonaRow) and t.kind == "habit"]
    return row


def test_five_runs_over_three_months_become_one_english_summary_that_leads_back_to_them() -> None:
    chat = Chat()
    state, _ = fold(series(chat, RUNS_EN))
    before = sorted(r.id for r in episodic(state))
    assert len(before) == 5
    habit_before = habit(state)

    [ev] = propose(state.owner_id, episodic(state))
    assert ev.content.startswith("March–May 2024: running, 5 times (about every 2 weeks): ")
    assert sum(c in ev.content for c in RUNS_EN) == 3  # the representative contents, quoted
    assert sorted(ev.source_record_ids) == before
    assert ev.occurred_at == max(r.occurred_at for r in episodic(state))  # event time, not a clock

    state, changes = apply(state, positioned(chat, ev))
    summary = state.record(summary_id(state.owner_id, ev))
    assert summary is not None and summary.type == "summary" and summary.status == "active"
    assert summary.key == "running" and summary.content == ev.content and summary.origin_event_id == ev.event_id
    sources = [state.record(i) for i in before]
    assert all(r is not None and r.status == "compressed" and r.superseded_by == summary.id for r in sources)
    messages = sorted(m for r in sources if r is not None for m in r.source_message_ids)
    assert sorted(summary.source_message_ids) == messages
    assert [r for r in episodic(state) if r.status == "active"] == [summary]  # the active layer shrank 5 -> 1
    assert len(changes) >= 6
    assert habit(state).mention_count == habit_before.mention_count == 5  # still five occurrences

    _, twice = apply(state, positioned(chat, ev))
    assert twice == []  # applying it twice changes nothing


def test_a_chinese_series_compresses_to_a_chinese_summary() -> None:
    chat = Chat(user="wang")
    state, _ = fold(series(chat, RUNS_ZH), user="wang")
    [ev] = propose(state.owner_id, episodic(state))
    assert ev.content.startswith("2024年3月至5月：跑步5次（约每2周一次）：")
    assert sum(c in ev.content for c in RUNS_ZH) == 3
    state, _ = apply(state, positioned(chat, ev))
    [active] = [r for r in episodic(state) if r.status == "active"]
    assert active.type == "summary" and active.content == ev.content


def test_small_or_short_clusters_are_left_alone() -> None:
    chat = Chat()
    state, _ = fold(series(chat, RUNS_EN[:3]))
    assert propose(state.owner_id, episodic(state)) == []  # three records: fewer than four
    burst = Chat(user="bob")
    state, _ = fold(series(burst, RUNS_EN, every=DAY), user="bob")
    assert len(episodic(state)) == 5
    assert clusters_of(state.owner_id, episodic(state)) == []  # five runs within a week are no pattern yet
    looser = dataclasses.replace(SEED_DEFAULT, compression_min_span_days=2.0)
    assert len(clusters_of(state.owner_id, episodic(state), looser)) == 1


def test_replay_folds_the_recorded_summary_to_the_same_rows_without_the_compressor() -> None:
    chat = Chat()
    events = series(chat, RUNS_EN)
    state, _ = fold(events)
    [ev] = propose(state.owner_id, episodic(state))
    log = [*events, positioned(chat, ev), chat.say("ran again", at=T0 + 20 * WEEK, conv="z", events=[event("ran")])]
    live, _ = fold(log[len(events) :], state)
    replayed, _ = fold(log)  # the event carries the text: nothing is proposed again
    assert replayed.tables == live.tables
    assert decode_event(encode_event(ev)) == ev  # the event survives the log as it is


def test_a_stale_proposal_changes_nothing() -> None:
    chat = Chat()
    events = series(chat, RUNS_EN)
    state, _ = fold(events)
    [ev] = propose(state.owner_id, episodic(state))
    first = events[0].event
    assert isinstance(first, MessageAnalyzed)
    state, _ = apply(state, chat.forget("message", first.message.event_id, at=T0 + 20 * WEEK))
    state, changes = apply(state, positioned(chat, ev))
    assert changes == []
    assert all(r.status == "active" and r.type == "event" for r in episodic(state))


def test_forgetting_a_source_message_removes_the_summary_and_restores_the_other_records() -> None:
    chat = Chat()
    events = series(chat, RUNS_EN)
    state, _ = fold(events)
    [ev] = propose(state.owner_id, episodic(state))
    state, _ = apply(state, positioned(chat, ev))
    first = events[0].event
    assert isinstance(first, MessageAnalyzed)
    state, _ = apply(state, chat.forget("message", first.message.event_id, at=T0 + 20 * WEEK))
    rows = episodic(state)
    assert [r.type for r in rows] == ["event"] * 4  # the summary spoke of the forgotten run: it is gone
    assert all(r.status == "active" and r.superseded_by == "" for r in rows)


def test_forgetting_the_summary_restores_its_records() -> None:
    chat = Chat()
    state, _ = fold(series(chat, RUNS_EN))
    [ev] = propose(state.owner_id, episodic(state))
    state, _ = apply(state, positioned(chat, ev))
    state, _ = apply(state, chat.forget("item", summary_id(state.owner_id, ev), at=T0 + 20 * WEEK))
    rows = episodic(state)
    assert len(rows) == 5 and all(r.status == "active" and r.type == "event" for r in rows)


def test_on_the_log_the_summary_is_sealed_under_every_source_message_and_a_forget_of_one_erases_it() -> None:
    from adamem.streams.keys import InMemoryKeyRing

    chat = Chat()
    events = series(chat, RUNS_EN)
    state, _ = fold(events)
    [ev] = propose(state.owner_id, episodic(state))
    keys = InMemoryKeyRing()
    for message in ev.source_message_ids:
        keys.get_or_create(state.owner_id, message)
    data = encode_event(ev, keys)
    assert b"running" not in data and b"colleague" not in data  # key and content only in the ciphertext
    opened = decode_event(data, keys)
    assert isinstance(opened, MemoryCompressed) and not opened.shredded
    assert (opened.key, opened.content, opened.source_record_ids) == (ev.key, ev.content, ev.source_record_ids)
    assert opened.vector == ev.vector
    keys.forget_message(state.owner_id, ev.source_message_ids[2])  # any one of them
    gone = decode_event(data, keys)
    assert isinstance(gone, MemoryCompressed) and gone.shredded and gone.content == gone.key == ""
    _, changes = apply(state, positioned(chat, gone))
    assert changes == []  # a shredded summary is folded as nothing
