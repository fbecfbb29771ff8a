"""``Memory.replay``: the facade's ``adamem replay`` over a real embedded log and LanceDB store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from adamem import AsyncMemory, InvalidArgument, Memory, UnknownUser
from adamem.errors import LogError
from adamem.projections.folds.changes import Delete
from adamem.projections.store.factory import open_views
from adamem.streams.replay import RebuildReport

LISBON = "I moved to Lisbon last week for a job at a bakery."
CELLO = "My sister Ana plays the cello."


def _memory(tmp_path: Path) -> Memory:
    return Memory(log=str(tmp_path / "log"), store=str(tmp_path / "store"))


def _texts(m: Memory, user: str, question: str) -> str:
    return " | ".join(item.content for item in m.query(user, question).items)


def _wipe(store: Path, owner: str) -> None:
    """Delete the owner's rows but its ``owners`` row from the active view, as damage would."""
    writer = open_views(str(store)).open_view()
    try:
        rows = [r for r in writer.load_owner(owner) if r.TABLE != "owners"]
        from adamem.partitioning import owner_partition

        writer.commit(owner_partition(owner, writer.partition_count()), [Delete(r.TABLE, r.id) for r in rows], {})
    finally:
        writer.close()


def test_replay_of_the_whole_store_switches_to_a_new_view_that_answers(tmp_path: Path) -> None:
    with _memory(tmp_path) as m:
        m.add("alice", LISBON, occurred_at="2026-03-01T10:00:00Z")
        m.add("alice", CELLO, occurred_at="2026-03-05T10:00:00Z")
        assert "Lisbon" in _texts(m, "alice", "Which city did I move to?")
        _wipe(tmp_path / "store", m.owner("alice"))  # the live view lost the rows; the log has them
        assert "Lisbon" not in _texts(m, "alice", "Which city did I move to?")
        report = m.replay()
        assert isinstance(report, RebuildReport)
        assert report.switched and report.view != "main" and report.events > 0 and report.verified is None
        assert open_views(str(tmp_path / "store")).active_view() == report.view
        assert "Lisbon" in _texts(m, "alice", "Which city did I move to?")  # the read side followed the switch
        m.add("alice", "I started learning Portuguese.")  # the handle writes again after a replay
        assert "Portuguese" in _texts(m, "alice", "What language am I learning?")


def test_replay_of_one_user_rebuilds_their_rows_in_place(tmp_path: Path) -> None:
    with _memory(tmp_path) as m:
        m.add("alice", LISBON)
        m.add("bo", "I am allergic to peanuts.")
        _wipe(tmp_path / "store", m.owner("alice"))
        assert "Lisbon" not in _texts(m, "alice", "Which city did I move to?")
        checked = m.replay("alice", verify=True)  # compares only
        assert checked.verified is False and checked.diffs and not checked.switched
        assert "Lisbon" not in _texts(m, "alice", "Which city did I move to?")
        report = m.replay("alice")
        assert report.view == f"owner:{m.owner('alice')}" and report.switched and report.events > 0
        assert open_views(str(tmp_path / "store")).active_view() == "main"  # in place: no view switched
        assert "Lisbon" in _texts(m, "alice", "Which city did I move to?")
        assert m.replay("alice").diffs == []  # equal now: nothing to replace
        with pytest.raises(UnknownUser):
            m.replay("nobody")


def test_verify_reports_no_differences_and_switches_nothing(tmp_path: Path) -> None:
    with _memory(tmp_path) as m:
        m.add("alice", LISBON)
        m.add("alice", CELLO)
        views = open_views(str(tmp_path / "store"))
        before = views.active_view()
        report = m.replay(verify=True)
        assert report.verified is True and report.diffs == [] and not report.switched
        assert report.checksum == report.live_checksum
        assert views.active_view() == before and report.view in views.views()  # kept for inspection
        assert "Lisbon" in _texts(m, "alice", "Which city did I move to?")


def test_replay_after_forget_keeps_the_forgotten_message_forgotten(tmp_path: Path) -> None:
    with _memory(tmp_path) as m:
        said = m.add("alice", CELLO)
        m.add("alice", LISBON)
        m.forget("alice", message=said.event_ids[0])
        assert "cello" not in _texts(m, "alice", "Who plays the cello?")
        report = m.replay()
        assert report.switched
        assert "cello" not in _texts(m, "alice", "Who plays the cello?")
        assert "Lisbon" in _texts(m, "alice", "Which city did I move to?")
        assert m.replay("alice").diffs == []  # the owner's fold agrees


def test_replay_until_a_time_builds_a_view_without_the_later_message(tmp_path: Path) -> None:
    from adamem.core import open_retriever

    with _memory(tmp_path) as m:
        m.add("alice", LISBON, occurred_at="2026-03-01T10:00:00Z")
        m.add("alice", CELLO, occurred_at="2026-03-05T10:00:00Z")
        report = m.replay(until="2026-03-03T00:00:00Z")
        assert not report.switched and open_views(str(tmp_path / "store")).active_view() == "main"
        assert "cello" in _texts(m, "alice", "Who plays the cello?")  # the active view is untouched
        then = open_views(str(tmp_path / "store")).open_view(report.view, read_only=True)
        with Memory(m.settings, retriever=open_retriever(m.settings, then)) as past:
            assert "cello" not in _texts(past, "alice", "Who plays the cello?")
            assert "Lisbon" in _texts(past, "alice", "Which city did I move to?")
        by_offset = m.replay(until="1")  # a string of digits is a log offset, as `adamem replay --until 1`
        assert not by_offset.switched and sum(by_offset.offsets.values()) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"until": "last tuesday"}, "until 'last tuesday'"),
        ({"until": True}, "until True"),
        ({"until": 1.5}, "until 1.5"),
        ({"user_id": "alice", "until": "2026-03-03T00:00:00Z"}, "until builds a view"),
        ({"jobs": 0}, "jobs 0"),
        ({"tenant": "acme"}, "tenant names the tenant"),
    ],
)
def test_bad_replay_arguments_are_refused(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    with _memory(tmp_path) as m:
        m.add("alice", LISBON)
        with pytest.raises(InvalidArgument, match=match):
            m.replay(**kwargs)  # type: ignore[arg-type]
        assert open_views(str(tmp_path / "store")).views() == ["main"]  # nothing was built


def test_replay_while_a_serve_writes_the_folder_is_refused(tmp_path: Path) -> None:
    from adamem.api.notice import ServiceNotice
    from adamem.streams.embedded_log import writer_lock

    with _memory(tmp_path) as m:
        m.add("alice", LISBON)
    log = tmp_path / "log"
    (log / ServiceNotice.NAME).write_text(json.dumps({"url": "http://127.0.0.1:8765", "pid": 1}))
    held = writer_lock(log)  # as the running service holds it
    try:
        with _memory(tmp_path) as m, pytest.raises(LogError, match="stop the service first") as refused:
            m.replay()
        assert "http://127.0.0.1:8765" in str(refused.value)
    finally:
        held.close()
    with _memory(tmp_path) as m:  # the service stopped (its notice left behind): the replay runs
        assert m.replay().switched


def test_async_memory_replays(tmp_path: Path) -> None:
    async def run() -> None:
        async with AsyncMemory(log=str(tmp_path / "log"), store=str(tmp_path / "store"), tenant="acme") as m:
            await m.add("bo", "I am allergic to peanuts.")
            report = await m.replay("bo", tenant="acme", verify=True)
            assert report.verified is True and not report.switched
            whole = await m.replay()
            assert whole.switched
            answer = await m.query("bo", "What am I allergic to?")
            assert "peanuts" in answer.items[0].content

    asyncio.run(run())
