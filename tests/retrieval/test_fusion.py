"""Fusion arithmetic with both presets, the temporal and fact-support components, and frozen presets."""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing
from typing import Any

import pytest

from adamem.projections.folds.rows import EpisodicRow, MessageRow, OwnerRow, PersonaRow, Row
from adamem.retrieval import PAPER_V2, SEED_DEFAULT, Breakdown, FusionWeights
from adamem.retrieval.fusion import fact_support, fuse, temporal_score, time_windows
from adamem.retrieval.snapshot import AsOf, OwnerSnapshot, View

DAY = 86_400_000


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).replace(tzinfo=dt.UTC).timestamp() * 1000)


def make(cls: type[Row], **values: Any) -> Any:
    """A row with every field defaulted by type, then the given values."""
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        origin = typing.get_origin(hint)
        defaults[f.name] = {str: "", int: 0, float: 0.0, bool: False}.get(hint, () if origin is tuple else [])
    defaults.update(values)
    return cls(**defaults)


def test_seed_default_weights_the_four_components_70_15_10_5() -> None:
    parts = Breakdown(semantic=0.8, graph=0.5, temporal=0.2, fact=1 / 3)
    assert fuse(parts, SEED_DEFAULT.fusion) == pytest.approx(0.70 * 0.8 + 0.15 * 0.5 + 0.10 * 0.2 + 0.05 / 3)
    assert fuse(parts, SEED_DEFAULT.fusion) == pytest.approx(0.671666667)


def test_paper_v2_weights_them_70_10_10_10() -> None:
    parts = Breakdown(semantic=0.8, graph=0.5, temporal=0.2, fact=1 / 3)
    assert fuse(parts, PAPER_V2.fusion) == pytest.approx(0.7 * 0.8 + 0.1 * 0.5 + 0.1 * 0.2 + 0.1 / 3)
    assert fuse(parts, PAPER_V2.fusion) == pytest.approx(0.663333333)
    assert fuse(Breakdown(1, 1, 1, 1), SEED_DEFAULT.fusion) == pytest.approx(1.0)
    assert fuse(Breakdown(1, 1, 1, 1), PAPER_V2.fusion) == pytest.approx(1.0)


def test_presets_are_frozen_and_varied_by_copying() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SEED_DEFAULT.top_k = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SEED_DEFAULT.fusion.semantic = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPER_V2.cache.query_cosine = 0.5  # type: ignore[misc]
    fast = dataclasses.replace(SEED_DEFAULT, top_k=5, max_hops=2)
    assert (fast.top_k, fast.max_hops, SEED_DEFAULT.top_k, SEED_DEFAULT.max_hops) == (5, 2, 10, 3)
    assert (PAPER_V2.name, PAPER_V2.fusion) == ("paper-v2", FusionWeights(0.7, 0.1, 0.1, 0.1))
    assert dataclasses.replace(PAPER_V2, fusion=SEED_DEFAULT.fusion, name="seed-default") == SEED_DEFAULT


def test_seed_default_has_the_seeds_numbers() -> None:
    c = SEED_DEFAULT
    assert (c.top_k, c.graph_seeds, c.min_node_confidence, c.hop_decay, c.max_hops, c.max_parallel_seeds) == (
        10,
        5,
        0.6,
        0.85,
        3,
        4,
    )
    assert (c.edge_priority, c.min_edge_weight, c.cache.query_cosine) == (
        ("supports", "mentions", "temporal_next", "similar"),  # the seed's three, then the added links in meaning
        0.6,
        0.92,
    )
    assert c.fusion == FusionWeights(0.70, 0.15, 0.10, 0.05)


def test_time_words_resolve_against_the_reference_time_and_score_by_distance() -> None:
    now = ms("2024-03-13T12:00:00")  # a Wednesday
    (window,) = time_windows("what did I do last week?", now)
    assert (window.start, window.end, window.text) == (
        ms("2024-03-04T00:00:00"),
        ms("2024-03-11T00:00:00"),
        "last week",
    )
    assert temporal_score([ms("2024-03-06T09:00:00")], [window], now, SEED_DEFAULT) == 1.0
    assert temporal_score([ms("2024-03-12T00:00:00")], [window], now, SEED_DEFAULT) == pytest.approx(0.5 ** (1 / 7))
    assert temporal_score([ms("2024-02-26T00:00:00")], [window], now, SEED_DEFAULT) == pytest.approx(0.5)
    # the best of an item's times counts (when it was said, and when what it reports happened)
    assert temporal_score([ms("2024-03-12T00:00:00"), ms("2024-03-05T00:00:00")], [window], now, SEED_DEFAULT) == 1.0


def test_without_time_words_recency_halves_every_30_days_unless_walking_back_to_causes() -> None:
    now = ms("2024-03-31T00:00:00")
    assert time_windows("why did I start working out?", now) == ()
    assert temporal_score([now - 30 * DAY], (), now, SEED_DEFAULT) == pytest.approx(0.5)
    assert temporal_score([now - 60 * DAY], (), now, SEED_DEFAULT) == pytest.approx(0.25)
    assert temporal_score([now], (), now, SEED_DEFAULT) == 1.0
    assert temporal_score([now - 30 * DAY], (), now, SEED_DEFAULT, recency=False) == 0.0


def test_fact_support_counts_records_and_persona_evidence_up_to_three() -> None:
    rows = [
        make(OwnerRow, id="default:u", owner_id="default:u", last_event_time=10),
        make(MessageRow, id="m1", owner_id="default:u", occurred_at=1, source_offset=0),
        make(MessageRow, id="m2", owner_id="default:u", occurred_at=2, source_offset=1),
        make(
            EpisodicRow,
            id="r1",
            owner_id="default:u",
            type="fact",
            status="active",
            source_message_ids=["m1"],
            valid_from=1,
            valid_to=-1,
        ),
        make(
            EpisodicRow,
            id="r2",
            owner_id="default:u",
            type="event",
            status="active",
            source_message_ids=["m1", "m2"],
            valid_from=2,
            valid_to=-1,
        ),
        make(EpisodicRow, id="r3", owner_id="default:u", type="fact", status="superseded", source_message_ids=["m2"]),
        make(
            PersonaRow,
            id="p1",
            owner_id="default:u",
            kind="trait",
            status="active",
            mention_count=2,
            evidence_message_ids=["m1", "m2"],
            evidence_confidences=[0.9, 0.9],
            evidence_times=[1, 2],
            first_seen=1,
        ),
    ]
    snap = OwnerSnapshot("default:u", rows)
    now = View(snap)
    m1, m2, p1 = snap.messages["m1"], snap.messages["m2"], snap.traits["p1"]
    r1, r2 = snap.records["r1"], snap.records["r2"]
    assert fact_support(m1, now, SEED_DEFAULT) == 1.0  # r1, r2 and p1
    assert fact_support(m2, now, SEED_DEFAULT) == pytest.approx(2 / 3)  # r2 and p1 (r3 is history)
    assert fact_support(r1, now, SEED_DEFAULT) == pytest.approx(1 / 3)
    assert fact_support(r2, now, SEED_DEFAULT) == pytest.approx(2 / 3)
    assert fact_support(p1, now, SEED_DEFAULT) == pytest.approx(2 / 3)
    then = View(snap, AsOf(time=1))  # m2 not said yet; r2 not valid yet
    assert fact_support(m1, then, SEED_DEFAULT) == pytest.approx(2 / 3)
    assert fact_support(p1, then, SEED_DEFAULT) == pytest.approx(1 / 3)
    assert fact_support(r2, View(snap, AsOf(offset=1)), SEED_DEFAULT) == pytest.approx(1 / 3)
