"""Views of a snapshot: as of a time or an offset, working memory then, and records a waiting message supersedes."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from adamem.projections.folds.rows import EpisodicRow, MessageRow, OwnerRow, Row
from adamem.retrieval.snapshot import AsOf, OwnerSnapshot, View


def make(cls: type[Row], **values: Any) -> Any:
    """A row with every field defaulted by type, then the given values."""
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = typing.get_type_hints(cls)[f.name]
        origin = typing.get_origin(hint)
        defaults[f.name] = {str: "", int: 0, float: 0.0, bool: False}.get(hint, () if origin is tuple else [])
    defaults.update(values)
    return cls(**defaults)


def messages(n: int) -> list[Row]:
    return [
        make(
            MessageRow,
            id=f"m{i:02d}",
            owner_id="default:u",
            seq=i,
            occurred_at=1000 * i,
            source_offset=i,
            in_working=i >= n - 16,
            consolidated=True,
        )
        for i in range(n)
    ]


def test_working_memory_as_of_replays_the_fifo_20_evict_5() -> None:
    snap = OwnerSnapshot(
        "default:u", [make(OwnerRow, id="default:u", owner_id="default:u", last_event_time=29_000), *messages(30)]
    )
    for seen, kept in ((20, 20), (21, 16), (25, 20), (26, 16), (30, 20)):
        view = View(snap, AsOf(time=1000 * (seen - 1)))
        assert len(view.working_ids) == kept, seen
        assert max(view.working_ids) == f"m{seen - 1:02d}"


def test_an_offset_view_sees_messages_below_it_and_takes_its_time_from_them() -> None:
    snap = OwnerSnapshot("default:u", messages(10))
    view = View(snap, AsOf(offset=4))
    assert (view.time, view.now) == (3000, 3000)
    assert [m.id for m in snap.by_seq if view.message(m)] == ["m00", "m01", "m02", "m03"]
    assert View(snap).live and not view.live


def record(id_: str, content: str, confidence: float) -> Row:
    return make(
        EpisodicRow,
        id=id_,
        owner_id="default:u",
        type="fact",
        key="lives_in",
        content=content,
        confidence=confidence,
        status="active",
        source_message_ids=["old"],
        valid_from=0,
        valid_to=-1,
    )


def waiting(content: str, confidence: float) -> Row:
    facts = [{"content": content, "type": "general", "key": "lives_in", "confidence": confidence}]
    return make(
        MessageRow,
        id="new",
        owner_id="default:u",
        seq=1,
        occurred_at=10,
        in_working=True,
        consolidated=False,
        extraction_json=json.dumps({"facts": facts, "attributes": [], "events": []}),
    )


def test_a_waiting_message_supersedes_a_record_the_way_the_router_will() -> None:
    old = make(MessageRow, id="old", owner_id="default:u", seq=0, consolidated=True)
    beijing = record("r1", "Alice lives in Beijing", 0.9)
    for claim, confidence, pending in (
        ("Alice lives in Shenzhen", 0.9, True),  # UPDATE: as reliable, newer
        ("Alice lives in Shenzhen", 0.8, False),  # less reliable: IGNORE
        ("Alice lives in Beijing", 0.95, False),  # redundant
        ("Alice lives in Shenzhen", 0.7, False),
    ):  # not above the ADD threshold
        snap = OwnerSnapshot("default:u", [old, beijing, waiting(claim, confidence)])
        assert (snap.pending == {"r1": "new"}) is pending, claim
        now = View(snap)
        assert now.record(snap.records["r1"]) is not pending
        assert now.stale(snap.messages["old"]) is pending  # what "old" stated is history once superseded
