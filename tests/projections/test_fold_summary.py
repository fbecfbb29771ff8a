"""The owner summary shown by ``adamem memory``, and the provenance every archived message keeps."""

from __future__ import annotations

from adamem.projections.folds import MessageRow, owner_summary
from adamem.projections.folds.testing import T0, Chat, fold, scenario


def test_owner_summary_counts_every_layer_and_names_the_top_items() -> None:
    state, _ = fold(scenario())
    summary = owner_summary(state, top=3)
    assert summary["user_id"] == "alice" and summary["last_event_time"] == state.last_event_time
    assert summary["archive"]["messages"] == len(state.tables["messages"])
    assert summary["working"]["size"] == len(summary["working"]["message_ids"]) <= 20
    assert set(summary["episodic"]["active"]) == {"attribute", "event", "fact"}
    assert summary["episodic"]["superseded"] >= 1
    strongest = summary["persona"]["strongest"]
    assert len(strongest) == 3 and strongest[0]["strength"] >= strongest[1]["strength"] >= strongest[2]["strength"]
    assert summary["graph"]["nodes"]["message"] == len(state.tables["messages"])
    daily = sum(1 for m in state.tables["messages"].values() if isinstance(m, MessageRow) and "daily" in m.topics)
    assert summary["graph"]["top_topics"][0] == {"topic": "daily", "mentions": daily}


def test_an_archived_message_records_its_analysis_and_log_position() -> None:
    chat = Chat(topic="adamem.analyses")
    state, _ = fold([chat.say("hi", at=T0), chat.say("there", at=T0 + 1)])
    second = sorted((m for m in state.tables["messages"].values() if isinstance(m, MessageRow)), key=lambda m: m.seq)[1]
    assert (second.source_topic, second.source_partition, second.source_offset, second.seq) == (
        "adamem.analyses",
        0,
        1,
        1,
    )
    assert second.analyzer == "test/1" and second.generation == "g1" and len(second.vector) == 4
