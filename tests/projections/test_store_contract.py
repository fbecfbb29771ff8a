"""One contract for every projection store: in-memory and LanceDB (real tables in a temp folder).

The first part runs a whole ``MemoryStore`` (also on S3); the last, each port on its own
(``StoreReader``, ``StoreWriter``, ``ViewCatalog``), reached through the ports only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from adamem.errors import StoreError, StoreFenced
from adamem.locations import StoreLocation
from adamem.partitioning import owner_partition, partition_for
from adamem.projections.folds.changes import Delete, Upsert
from adamem.projections.folds.rows import EpisodicRow, GraphEdgeRow, GraphNodeRow, MessageRow, OwnerRow, PersonaRow, Row
from adamem.projections.store import (
    MemoryStore,
    StoreReader,
    StoreWriter,
    ViewCatalog,
    lance_arrow,
    lance_reads,
    lance_scan,
    lance_tables,
    lance_writes,
)
from adamem.projections.store import memory as memory_store
from adamem.projections.store.base import NODE_COLUMNS, ArchiveSplit, OwnerChanges, OwnerColumns, owner_columns
from adamem.projections.store.factory import open_store, open_views
from adamem.projections.store.lance import LanceStore, switch_view
from adamem.settings import Settings
from adamem.text import search_text
from tests.conftest import s3_store_env

PARTITIONS = 2
ADAPTERS = ["memory", "lancedb", pytest.param("s3", marks=pytest.mark.s3)]


def make(cls: type[Row], **values: Any) -> Row:
    """A row with every field defaulted by type, then the given values."""
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = typing.get_type_hints(cls)[f.name]
        origin = typing.get_origin(hint)
        if type(None) in typing.get_args(hint):  # optional: absent
            defaults[f.name] = None
            continue
        defaults[f.name] = {str: "", int: 0, float: 0.0, bool: False}.get(hint, () if origin is tuple else [])
    defaults.update(values)
    return cls(**defaults)


def message(user: str, id_: str, text: str, vector: tuple[float, ...]) -> Row:
    return make(MessageRow, id=id_, owner_id=user, text=text, speaker="Ann", vector=vector, topics=["t"], seq=1)


def _s3_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> StoreLocation:
    """A fresh prefix on the S3-compatible server, with the settings that reach it (read from the environment)."""
    endpoint = request.getfixturevalue("s3_endpoint")
    for name, value in s3_store_env(endpoint).items():
        monkeypatch.setenv(name, value)
    return Settings.from_env(store_url=f"s3://adamem/contract-{uuid.uuid4().hex}").store


@pytest.fixture(params=ADAPTERS)
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryStore]:
    """Every adapter: in-memory, LanceDB in a folder, LanceDB on an S3-compatible object store."""
    if request.param == "s3":
        url: StoreLocation | str = _s3_url(request, monkeypatch)
    else:
        url = "memory://" if request.param == "memory" else str(tmp_path / "store")
    s = open_store(url)
    s.bind(PARTITIONS)
    yield s
    s.close()


def _commit(store: MemoryStore, user: str, changes: list[Any], offset: int) -> None:
    p = owner_partition(user, PARTITIONS)
    store.commit(p, changes, {"analyses": offset})


def test_upsert_is_by_id_and_delete_removes(store: MemoryStore) -> None:
    a = message("default:alice", "m1", "I love hiking", (1.0, 0.0, 0.0))
    _commit(
        store,
        "default:alice",
        [Upsert("messages", a), Upsert("owners", make(OwnerRow, id="default:alice", owner_id="default:alice"))],
        1,
    )
    _commit(store, "default:alice", [Upsert("messages", dataclasses.replace(a, text="I love climbing"))], 2)  # type: ignore[type-var]
    rows = store.rows("messages", "default:alice")
    assert [(r.id, r.text) for r in rows] == [("m1", "I love climbing")]  # type: ignore[union-attr]
    _commit(store, "default:alice", [Delete("messages", "m1")], 3)
    assert store.rows("messages", "default:alice") == []
    assert store.owners() == ["default:alice"]


def test_rows_round_trip_exactly(store: MemoryStore) -> None:
    row = make(
        EpisodicRow,
        id="r1",
        owner_id="default:小明",
        type="fact",
        key="lives_in",
        content="小明住在北京",
        confidence=0.875,
        source_message_ids=["a", "b"],
        valid_from=5,
        valid_to=-1,
        vector=(0.5, -0.25, 0.125),
        event_time=-1,
        entities=["北京"],
    )
    _commit(
        store,
        "default:小明",
        [Upsert("episodic", row), Upsert("messages", message("default:小明", "m", "x", (1.0, 0.0, 0.0)))],
        1,
    )
    assert store.rows("episodic", "default:小明") == [row]
    assert store.load_owner("default:小明").count(row) == 1


def test_a_message_keeps_the_speakers_utc_offset(store: MemoryStore) -> None:
    rows = [
        dataclasses.replace(message("default:小明", "m1", "我周六去爬山了", (1.0, 0.0, 0.0)), utc_offset_minutes=480),  # type: ignore[type-var]
        dataclasses.replace(message("default:小明", "m2", "I went hiking", (0.0, 1.0, 0.0)), utc_offset_minutes=-300),  # type: ignore[type-var]
        message("default:小明", "m3", "no offset stated", (0.0, 0.0, 1.0)),
    ]
    _commit(store, "default:小明", [Upsert("messages", r) for r in rows], 1)
    got = store.rows("messages", "default:小明")
    assert got == rows
    assert [r.utc_offset_minutes for r in got] == [480, -300, None]  # type: ignore[union-attr]


def test_owners_are_isolated(store: MemoryStore) -> None:
    _commit(
        store,
        "default:alice",
        [Upsert("messages", message("default:alice", "a1", "secret of alice", (1.0, 0.0, 0.0)))],
        1,
    )
    _commit(
        store, "default:bob", [Upsert("messages", message("default:bob", "b1", "secret of bob", (1.0, 0.0, 0.0)))], 1
    )
    assert [r.id for r in store.rows("messages", "default:bob")] == ["b1"]
    assert [h.row.id for h in store.vector_search("messages", "default:bob", (1.0, 0.0, 0.0), 10)] == ["b1"]
    assert [h.row.id for h in store.text_search("messages", "default:bob", "secret", 10)] == ["b1"]


def test_vector_search_ranks_by_cosine(store: MemoryStore) -> None:
    rows = [
        message("default:alice", "near", "a", (1.0, 0.1, 0.0)),
        message("default:alice", "mid", "b", (0.6, 0.8, 0.0)),
        message("default:alice", "far", "c", (0.0, 0.0, 1.0)),
    ]
    _commit(store, "default:alice", [Upsert("messages", r) for r in rows], 1)
    hits = store.vector_search("messages", "default:alice", (1.0, 0.0, 0.0), 2)
    assert [h.row.id for h in hits] == ["near", "mid"]
    assert hits[0].score == pytest.approx(1 / (1.01**0.5), abs=1e-5)
    assert hits[1].score == pytest.approx(0.6, abs=1e-5)


def test_text_search_is_bm25_over_english_and_chinese(store: MemoryStore) -> None:
    rows = [
        message("default:alice", "gym", "I went to the gym yesterday", (1.0, 0.0, 0.0)),
        message("default:alice", "lipids", "My check-up showed high blood lipids", (1.0, 0.0, 0.0)),
        message("default:alice", "zh", "体检报告显示我血脂偏高", (1.0, 0.0, 0.0)),
        message("default:alice", "other", "The weather is nice", (1.0, 0.0, 0.0)),
    ]
    _commit(store, "default:alice", [Upsert("messages", r) for r in rows], 1)
    assert [h.row.id for h in store.text_search("messages", "default:alice", "blood lipid levels", 5)] == ["lipids"]
    assert [h.row.id for h in store.text_search("messages", "default:alice", "我的血脂", 5)] == ["zh"]
    assert store.text_search("messages", "default:alice", "nothing matches here", 5) == []
    with pytest.raises(StoreError):
        store.text_search("owners", "default:alice", "x", 5)


def test_a_message_is_found_by_the_words_of_its_extraction(store: MemoryStore) -> None:
    """Full-text search reads a message's speaker, text and extraction (``text_parts``): a new job said without the
    word, in English and Chinese, is found by what was extracted from it; BM25 counts the extraction's words."""
    facts = {
        "start": ("Guess where I start on Monday!", "Alice joined Acme as a designer"),
        "zh": ("下周一我就去报到了！", "Alice 加入了 星辰科技"),
        "other": ("The weather is nice", ""),
    }
    rows = [
        dataclasses.replace(
            message("default:alice", id_, text, (1.0, 0.0, 0.0)),
            extraction_json=json.dumps({"facts": [{"content": fact}]}) if fact else "",
        )
        for id_, (text, fact) in facts.items()
    ]
    _commit(store, "default:alice", [Upsert("messages", r) for r in rows], 1)
    assert [h.row.id for h in store.text_search("messages", "default:alice", "Acme designer", 5)] == ["start"]
    assert [h.row.id for h in store.text_search("messages", "default:alice", "星辰科技", 5)] == ["zh"]
    assert [h.row.id for h in store.text_search("messages", "default:alice", "weather", 5)] == ["other"]


def test_checkpoint_is_recorded_with_the_data(store: MemoryStore) -> None:
    p = partition_for("alice", PARTITIONS)
    assert store.checkpoint(p) == {}
    _commit(store, "default:alice", [Upsert("messages", message("default:alice", "m1", "x", (1.0, 0.0, 0.0)))], 7)
    store.commit(p, [], {"control": 3})
    assert store.checkpoint(p) == {"analyses": 7, "control": 3}


def test_the_analysis_generation_is_recorded_with_the_store(store: MemoryStore) -> None:
    assert store.generation() == {}
    store.record_generation({"name": "g2", "extractor": "none", "embedder": "e5"})
    assert store.generation() == {"name": "g2", "extractor": "none", "embedder": "e5"}
    store.record_generation({"name": "g3", "extractor": "rules", "embedder": "e5"})
    assert store.generation()["name"] == "g3"
    assert store.checkpoint(0) == {}  # recording a generation commits nothing


def test_lancedb_views_keep_their_own_generation(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    main = LanceStore(root)
    main.bind(PARTITIONS)
    main.record_generation({"name": "g1"})
    other = LanceStore(root, view="g2")
    other.bind(PARTITIONS)
    other.record_generation({"name": "g2"})
    assert LanceStore(root, read_only=True).generation() == {"name": "g1"}
    from adamem.projections.store.lance import switch_view

    switch_view(root, "g2")
    assert main.generation() == {"name": "g2"}  # an unpinned store follows the switch


def test_a_different_partition_count_is_refused(store: MemoryStore) -> None:
    _commit(store, "default:alice", [Upsert("messages", message("default:alice", "m1", "x", (1.0, 0.0, 0.0)))], 1)
    with pytest.raises(StoreError, match="rebuild"):
        store.bind(PARTITIONS + 1)


def _crash_before_the_checkpoint(store: LanceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next commit of shard 0 fail after its table writes, before its checkpoint row."""
    shard = store._shard(0, create=True)
    assert shard is not None
    original = shard.table

    def crash_on_checkpoint(name: str) -> Any:
        if name == "checkpoints":
            raise OSError("simulated crash before the checkpoint")
        return original(name)

    monkeypatch.setattr(shard, "table", crash_on_checkpoint)


def test_lancedb_rolls_back_a_commit_torn_before_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between the table writes and the checkpoint row: on reopen the shard is as of the checkpoint."""
    root = str(tmp_path / "store")
    store = LanceStore(root)
    store.bind(1)
    store.commit(0, [Upsert("messages", message("default:alice", "m1", "kept", (1.0, 0.0, 0.0)))], {"analyses": 1})
    _crash_before_the_checkpoint(store, monkeypatch)
    with pytest.raises(StoreError, match="simulated crash"):
        store.commit(
            0,
            [Upsert("messages", message("default:alice", "m2", "lost", (0.0, 1.0, 0.0))), Delete("messages", "m1")],
            {"analyses": 2},
        )
    store.close()

    early_reader = LanceStore(root, read_only=True)  # before any writer recovered the shard
    assert [(r.id, r.text) for r in early_reader.rows("messages", "default:alice")] == [("m1", "kept")]  # type: ignore[union-attr]

    reopened = LanceStore(root)
    assert reopened.checkpoint(0) == {"analyses": 1}  # opening as the writer recovers the shard
    assert [r.text for r in reopened.rows("messages", "default:alice")] == ["kept"]  # type: ignore[union-attr]
    reader = LanceStore(root, read_only=True)
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1"]

    # the torn commit's change-log entry went with it: the next commit's changes are exactly its own
    reopened.commit(0, [Upsert("messages", message("default:alice", "m3", "new", (0.0, 0.0, 1.0)))], {"analyses": 2})
    changes = reader.owner_changes("default:alice", "main/1")
    assert changes is not None and [r.id for r in changes.rows] == ["m3"] and not changes.gone


def test_lancedb_indexes_vectors_of_large_tables_and_still_finds_the_nearest(tmp_path: Path) -> None:
    store = LanceStore(str(tmp_path / "store"), vector_index_min_rows=300)
    store.bind(1)
    rows = [
        message("default:alice", f"m{i:04d}", f"text {i}", (1.0, (i % 97) / 97.0, (i % 13) / 13.0, (i % 7) / 7.0))
        for i in range(400)
    ]
    bob = [message("default:bob", f"b{i:02d}", "bob's", (0.0, 1.0, 0.0, 0.0)) for i in range(20)]
    store.commit(0, [Upsert("messages", r) for r in rows + bob], {"analyses": 1})
    store.optimize()
    shard = store._shard(0, create=False)
    assert shard is not None
    kinds = {tuple(ix.columns): ix.index_type for ix in shard.tables["messages"].list_indices()}
    assert kinds == {
        ("vector",): "IvfPq",
        ("tokens",): "FTS",
        ("context",): "FTS",
        ("owner_id",): "BTree",
        ("id",): "BTree",
    }
    late = message("default:bob", "b99", "after the index", (0.0, 1.0, 0.0, 0.0))
    store.commit(0, [Upsert("messages", late)], {"analyses": 2})  # the next checkpoint covers the indexed version
    reader = LanceStore(str(tmp_path / "store"), read_only=True)
    hits = reader.vector_search("messages", "default:alice", rows[123].vector, 3)  # type: ignore[union-attr]
    assert hits[0].row.id == "m0123"
    assert [r.id for r in reader.rows("messages", "default:bob")] == [r.id for r in bob] + [
        "b99"
    ]  # indexed, and not yet
    assert len(reader.rows("messages", "default:alice")) == 400
    by_id = reader.messages_by_id("default:bob", ["b99", "b03", "m0007"])  # through the id index, and past it
    assert [m.id for m in by_id] == ["b03", "b99"]  # not alice's m0007


def _bulk_history() -> list[list[Any]]:
    """Commits of inserts, updates of earlier rows, deletes and a re-insert of a deleted id."""
    a = message("default:alice", "m1", "I love hiking", (1.0, 0.0, 0.0))
    b = message("default:alice", "m2", "My dog is called Rex", (0.0, 1.0, 0.0))
    c = message("default:bob", "m3", "我喜欢吃辣的", (0.0, 0.0, 1.0))
    owner = make(OwnerRow, id="default:alice", owner_id="default:alice")
    return [
        [Upsert("messages", a), Upsert("messages", b), Upsert("owners", owner), Upsert("messages", c)],
        [
            Upsert("messages", dataclasses.replace(a, text="I love climbing")),  # type: ignore[type-var]
            Delete("messages", "m2"),
            Upsert("messages", message("default:alice", "m4", "new in the second commit", (0.6, 0.8, 0.0))),
        ],
        [Upsert("messages", dataclasses.replace(b, text="Rex is back")), Delete("messages", "m3")],  # type: ignore[type-var]
    ]


def test_lancedb_bulk_mode_stores_the_rows_merging_stores(tmp_path: Path) -> None:
    """A rebuild's bulk writer (appends new ids, indexes at optimize) ends with the same rows and search."""
    stores = {bulk: LanceStore(str(tmp_path / f"store-{bulk}"), bulk=bulk) for bulk in (False, True)}
    for store in stores.values():
        store.bind(1)
        for n, changes in enumerate(_bulk_history(), start=1):
            store.commit(0, changes, {"analyses": n})
        store.optimize()
    merged, bulk = stores[False], stores[True]
    assert bulk.checkpoint(0) == merged.checkpoint(0) == {"analyses": 3}
    for user in ("default:alice", "default:bob"):
        assert bulk.load_owner(user) == merged.load_owner(user)
    assert [r.text for r in bulk.rows("messages", "default:alice")] == [
        "I love climbing",
        "Rex is back",
        "new in the second commit",
    ]  # type: ignore[union-attr]
    assert [h.row.id for h in bulk.text_search("messages", "default:alice", "Rex", 5)] == ["m2"]


def test_lancedb_bulk_view_leaves_its_vector_index_and_change_log_to_the_writer_after_the_switch(
    tmp_path: Path,
) -> None:
    """A rebuild neither logs changes nor indexes the vectors of a small table; the first regular writer after the
    switch does both. Its full-text and owner indexes are there from the switch on."""
    root = str(tmp_path / "store")
    live = LanceStore(root)
    live.bind(1)
    live.commit(0, [Upsert("messages", message("default:alice", "m0", "old", (1.0, 0.0, 0.0, 0.0)))], {"analyses": 1})
    rows = [
        message("default:alice", f"m{i:03d}", f"text {i}", (1.0, i / 300.0, (i % 7) / 7.0, 0.5)) for i in range(300)
    ]
    bulk = LanceStore(root, view="r1", bulk=True, optimize_every=0, vector_index_min_rows=100)
    bulk.bind(1)
    bulk.commit(0, [Upsert("messages", r) for r in rows[:150]], {"analyses": 150})
    bulk.commit(0, [Upsert("messages", r) for r in rows[150:]], {"analyses": 300})
    bulk.optimize()
    shard = bulk._shard(0, create=False)
    assert shard is not None
    assert lance_tables.CHANGES not in shard.tables  # no change log for a view nobody reads yet
    assert {ix.index_type for ix in shard.tables["messages"].list_indices()} == {"FTS", "BTree"}
    switch_view(root, "r1")
    reader = LanceStore(root, read_only=True)
    token = reader.change_token(0)
    assert token == "r1/3"  # two commits, and the checkpoint of the optimised versions
    assert reader.vector_search("messages", "default:alice", rows[42].vector, 1)[0].row.id == "m042"  # exact, unindexed
    table = reader._owner_shard("default:alice").visible("messages")  # type: ignore[union-attr]
    assert {ix.index_type for ix in table.list_indices()} == {"FTS", "BTree"}
    assert reader.owner_changes("default:alice", "r1/1") is None  # not logged: the reader loads the owner again

    writer = LanceStore(root, optimize_every=1, vector_index_min_rows=100)  # the worker, after the switch
    late = message("default:alice", "m999", "after the switch", (0.0, 1.0, 0.0, 0.0))
    writer.commit(0, [Upsert("messages", late)], {"analyses": 301})
    changes = reader.owner_changes("default:alice", token)
    assert changes is not None and [r.id for r in changes.rows] == ["m999"]
    table = reader._owner_shard("default:alice").visible("messages")  # type: ignore[union-attr]
    assert {ix.index_type for ix in table.list_indices()} == {"IvfPq", "FTS", "BTree"}
    assert reader.vector_search("messages", "default:alice", rows[42].vector, 1)[0].row.id == "m042"


def test_lancedb_bulk_view_indexes_the_vectors_of_a_large_table_before_the_switch(tmp_path: Path) -> None:
    """Past ``bulk_vector_index_min_rows`` a rebuild's final optimize builds the vector index: the view is
    switched to with it, and a search below a seq still finds the nearest older message first."""
    root = str(tmp_path / "store")
    rows = [
        message("default:alice", f"m{i:03d}", f"text {i}", (1.0, i / 300.0, (i % 7) / 7.0, 0.5)) for i in range(300)
    ]
    rows = [dataclasses.replace(r, seq=i) for i, r in enumerate(rows)]  # type: ignore[type-var]
    small = LanceStore(root, view="r0", bulk=True, optimize_every=0, bulk_vector_index_min_rows=301)
    small.bind(1)
    small.commit(0, [Upsert("messages", r) for r in rows], {"analyses": 300})
    small.optimize()
    table = small._shard(0, create=False).tables["messages"]  # type: ignore[union-attr]
    assert "IvfPq" not in {ix.index_type for ix in table.list_indices()}  # below the threshold: left to the writer
    bulk = LanceStore(root, view="r1", bulk=True, optimize_every=0, bulk_vector_index_min_rows=300)
    bulk.bind(1)
    bulk.commit(0, [Upsert("messages", r) for r in rows], {"analyses": 300})
    bulk.optimize()
    switch_view(root, "r1")
    reader = LanceStore(root, read_only=True)
    table = reader._owner_shard("default:alice").visible("messages")  # type: ignore[union-attr]
    assert {ix.index_type for ix in table.list_indices()} == {"IvfPq", "FTS", "BTree"}
    hits = reader.vector_search("messages", "default:alice", rows[42].vector, 3, below_seq=200)
    assert hits[0].row.id == "m042" and all(h.row.seq < 200 for h in hits)  # type: ignore[attr-defined]


def test_lancedb_bulk_view_of_several_shards_has_every_row_indexed_after_each_optimize(tmp_path: Path) -> None:
    """A rebuild's shards are optimised side by side: each one's indexes cover all of its rows and its checkpoint
    names the optimised versions, after the optimize that makes the indexes and after one that brings them up to
    date with rows committed since."""
    root = str(tmp_path / "store")
    owners = {owner_partition(f"default:u{i}", 3): f"default:u{i}" for i in range(40)}
    assert sorted(owners) == [0, 1, 2]
    bulk = LanceStore(root, view="r1", bulk=True, optimize_every=0)
    bulk.bind(3)

    def commit(start: int) -> None:
        for p, owner in owners.items():
            rows = [
                message(owner, f"{owner}-m{i}", f"walk {i} in the park", (1.0, i / 10, 0.5))
                for i in range(start, start + 5)
            ]
            bulk.commit(p, [Upsert("messages", r) for r in rows], {"analyses": start + 5})

    def unindexed(p: int) -> dict[str, int]:
        table = bulk._shard(p, create=False).tables["messages"]  # type: ignore[union-attr]
        return {ix.name: table.index_stats(ix.name).num_unindexed_rows for ix in table.list_indices()}

    for start in (0, 5):
        commit(start)
        bulk.optimize()
        for p, owner in owners.items():
            gaps = unindexed(p)
            assert len(gaps) == 4 and set(gaps.values()) == {0}  # full text of tokens and context, owner and id
            assert bulk.change_token(p) == f"r1/{start // 5 * 2 + 2}"  # each commit, each optimised checkpoint
            hits = bulk.text_search("messages", owner, "park walk", 20)
            assert sorted(h.row.id for h in hits) == sorted(f"{owner}-m{i}" for i in range(start + 5))


def test_lancedb_bulk_mode_merges_into_tables_it_found_filled(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    first = LanceStore(root)
    first.bind(1)
    first.commit(0, _bulk_history()[0], {"analyses": 1})
    first.close()
    again = LanceStore(root, bulk=True)
    again.commit(
        0, [Upsert("messages", message("default:alice", "m1", "written twice", (1.0, 0.0, 0.0)))], {"analyses": 2}
    )
    assert [(r.id, r.text) for r in again.rows("messages", "default:alice")] == [
        ("m1", "written twice"),
        ("m2", "My dog is called Rex"),
    ]  # type: ignore[union-attr]


def test_lancedb_bulk_mode_rolls_back_a_commit_torn_before_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "store")
    store = LanceStore(root, bulk=True)
    store.bind(1)
    store.commit(0, _bulk_history()[0], {"analyses": 1})
    _crash_before_the_checkpoint(store, monkeypatch)
    with pytest.raises(StoreError, match="simulated crash"):
        store.commit(0, _bulk_history()[1], {"analyses": 2})  # appends m4, merges m1, deletes m2
    store.close()
    reopened = LanceStore(root, bulk=True)
    assert reopened.checkpoint(0) == {"analyses": 1}
    assert [(r.id, r.text) for r in reopened.rows("messages", "default:alice")] == [
        ("m1", "I love hiking"),
        ("m2", "My dog is called Rex"),
    ]  # type: ignore[union-attr]


def test_lancedb_a_failed_table_write_fails_the_commit_before_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables are written side by side: one failing table fails the commit, and the others roll back."""
    from adamem.projections.store.lance import _Shard

    root = str(tmp_path / "store")
    store = LanceStore(root)
    store.bind(1)
    store.commit(0, _bulk_history()[0], {"analyses": 1})
    real = _Shard._write

    def failing(shard: _Shard, name: str, *args: Any) -> None:
        if name == "messages":
            raise OSError("simulated disk error")
        real(shard, name, *args)

    monkeypatch.setattr(_Shard, "_write", failing)
    owner = make(OwnerRow, id="default:alice", owner_id="default:alice", next_seq=9)
    changes = [Upsert("owners", owner), *_bulk_history()[1]]
    with pytest.raises(StoreError, match="simulated disk error"):
        store.commit(0, changes, {"analyses": 2})
    assert store.checkpoint(0) == {"analyses": 1}
    store.close()
    monkeypatch.setattr(_Shard, "_write", real)
    reopened = LanceStore(root)
    assert [r.next_seq for r in reopened.rows("owners", "default:alice")] == [0]  # type: ignore[union-attr]
    assert [r.text for r in reopened.rows("messages", "default:alice")] == ["I love hiking", "My dog is called Rex"]  # type: ignore[union-attr]


def test_lancedb_bulk_mode_loads_an_owner_it_never_wrote_without_a_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild meets most owners for the first time: their (absent) rows need no table scan."""
    bulk = LanceStore(str(tmp_path / "store"), bulk=True)
    bulk.bind(1)
    bulk.commit(0, _bulk_history()[0], {"analyses": 1})
    written = bulk.load_owner("default:alice")
    assert sorted((r.TABLE, r.id) for r in written) == [
        ("messages", "m1"),
        ("messages", "m2"),
        ("owners", "default:alice"),
    ]

    def no_query(table: str, user_id: str) -> list[Row]:
        raise AssertionError(f"queried {table} for {user_id}")

    monkeypatch.setattr(bulk, "rows", no_query)
    assert bulk.load_owner("default:carol") == []
    filled = LanceStore(str(tmp_path / "store"), bulk=True)  # tables found filled: owners are looked up
    assert [r.id for r in filled.load_owner("default:bob")] == ["m3"]


def _same_shard_as(user: str) -> str:
    """Another owner living in the same shard as ``user``."""
    return next(
        u
        for u in (f"default:other{i}" for i in range(100))
        if owner_partition(u, PARTITIONS) == owner_partition(user, PARTITIONS)
    )


def _applied(held: list[Row], changes: OwnerChanges) -> list[Row]:
    """An owner's rows after applying changes: drop what is gone, put what was written."""
    rows = {(r.TABLE, r.id): r for r in held if r.id not in changes.gone.get(r.TABLE, frozenset())}
    rows.update({(r.TABLE, r.id): r for r in changes.rows})
    return sorted(rows.values(), key=lambda r: (r.TABLE, r.id))


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.TABLE, r.id))


def test_the_change_token_moves_on_every_commit_and_only_then(store: MemoryStore) -> None:
    p = partition_for("alice", PARTITIONS)
    assert store.partition_count() == PARTITIONS
    first = store.change_token(p)
    assert store.change_token(p) == first
    _commit(store, "default:alice", [Upsert("messages", message("default:alice", "m1", "x", (1.0, 0.0, 0.0)))], 1)
    second = store.change_token(p)
    assert second != first and store.change_token(p) == second
    store.commit(p, [], {"control": 1})  # offsets only: the shard's checkpoint still moved
    assert store.change_token(p) not in (first, second)


def test_owner_changes_bring_an_owner_held_at_an_old_token_up_to_date(store: MemoryStore) -> None:
    p, neighbour = partition_for("alice", PARTITIONS), _same_shard_as("default:alice")
    a1, a2 = (
        message("default:alice", "a1", "one", (1.0, 0.0, 0.0)),
        message("default:alice", "a2", "two", (0.0, 1.0, 0.0)),
    )
    owner = make(OwnerRow, id="default:alice", owner_id="default:alice", last_event_time=1)
    _commit(store, "default:alice", [Upsert("messages", a1), Upsert("messages", a2), Upsert("owners", owner)], 1)
    _commit(store, neighbour, [Upsert("messages", message(neighbour, "n1", "theirs", (1.0, 0.0, 0.0)))], 2)
    token, held = store.change_token(p), store.load_owner("default:alice")
    held_neighbour = store.load_owner(neighbour)

    _commit(store, "default:alice", [Upsert("messages", dataclasses.replace(a1, text="one, edited"))], 3)  # type: ignore[type-var]
    _commit(store, "default:alice", [Upsert("messages", message("default:alice", "a3", "three", (0.0, 0.0, 1.0)))], 4)
    _commit(
        store,
        "default:alice",
        [Delete("messages", "a2"), Upsert("owners", dataclasses.replace(owner, last_event_time=9))],
        5,
    )  # type: ignore[type-var]
    _commit(
        store, "default:alice", [Upsert("messages", message("default:alice", "a4", "short-lived", (1.0, 1.0, 0.0)))], 6
    )
    _commit(store, "default:alice", [Delete("messages", "a4")], 7)

    changes = store.owner_changes("default:alice", token)
    assert changes is not None and changes.token == store.change_token(p)
    assert _applied(held, changes) == _sorted(store.load_owner("default:alice"))
    assert {r.id for r in changes.rows} == {"a1", "a3", "default:alice"}  # only what was written, as it is now
    assert {"a2", "a4"} <= changes.gone["messages"]

    theirs = store.owner_changes(neighbour, token)  # the neighbour's rows did not change
    assert theirs is not None and not theirs.rows
    assert _applied(held_neighbour, theirs) == _sorted(held_neighbour)
    assert store.owner_changes("default:alice", changes.token) == OwnerChanges(changes.token)  # nothing since


def test_owner_changes_cannot_resolve_a_foreign_or_forgotten_token(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_store, "CHANGE_HISTORY", 2)
    monkeypatch.setattr(lance_writes, "CHANGE_HISTORY", 2)  # (the writer trims its change log)
    _commit(store, "default:alice", [Upsert("messages", message("default:alice", "a1", "x", (1.0, 0.0, 0.0)))], 1)
    p = partition_for("alice", PARTITIONS)
    old = store.change_token(p)
    assert store.owner_changes("default:alice", "no such token") is None
    for offset in range(2, 6):
        _commit(
            store,
            "default:alice",
            [Upsert("messages", message("default:alice", f"a{offset}", "x", (1.0, 0.0, 0.0)))],
            offset,
        )
    if isinstance(store, LanceStore):
        store.optimize()  # the change log is trimmed when the shard is optimised
    assert store.owner_changes("default:alice", old) is None  # older than the kept history: load the owner again
    recent = store.change_token(p)
    _commit(store, "default:alice", [Upsert("messages", message("default:alice", "a9", "x", (1.0, 0.0, 0.0)))], 9)
    found = store.owner_changes("default:alice", recent)
    assert found is not None and [r.id for r in found.rows] == ["a9"]


def test_lancedb_readers_see_a_commit_in_the_change_token_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "store")
    writer = LanceStore(root)
    writer.bind(1)
    writer.commit(0, [Upsert("messages", message("default:alice", "m1", "x", (1.0, 0.0, 0.0)))], {"analyses": 1})
    reader = LanceStore(root, read_only=True)
    seen = [reader.change_token(0)]
    for trust_after in (lance_reads._TRUST_STAMP_NS, 0):  # racy-timestamp guard on, then trusting every stamp
        monkeypatch.setattr(lance_reads, "_TRUST_STAMP_NS", trust_after)
        for offset in (2, 3):
            writer.commit(
                0,
                [Upsert("messages", message("default:alice", f"m{offset}", "x", (1.0, 0.0, 0.0)))],
                {"analyses": offset},
            )
            seen.append(reader.change_token(0))
            assert seen[-1] == writer.change_token(0) and seen.count(seen[-1]) == 1
            assert reader.change_token(0) == seen[-1]
    assert seen == [f"main/{n}" for n in range(1, 6)]


def test_lancedb_readers_searches_see_a_new_message_and_a_forget_with_the_checkpoint_held(tmp_path: Path) -> None:
    """A reader keeps the checkpoint row it read while the checkpoint's version folder is unchanged: a
    commit after it (a new message, a forget) is still seen by the very next search and read."""
    root = str(tmp_path / "store")
    writer = LanceStore(root)
    writer.bind(1)
    near = (1.0, 0.0, 0.0)
    writer.commit(0, [Upsert("messages", message("default:alice", "m1", "hiking", near))], {"analyses": 1})
    reader = LanceStore(root, read_only=True)
    folder = tmp_path / "store" / "views" / "main" / "p0" / "checkpoints.lance" / "_versions"

    def searched() -> tuple[list[str], list[str], list[str]]:
        old = folder.stat().st_mtime_ns - 10**10  # the folder as if written 10 s ago: its stamp is trusted
        os.utime(folder, ns=(old, old))
        vector = [h.row.id for h in reader.vector_search("messages", "default:alice", near, 5)]
        text = [h.row.id for h in reader.text_search("messages", "default:alice", "hiking", 5)]
        return vector, text, sorted(r.id for r in reader.load_owner("default:alice"))

    assert searched() == (["m1"], ["m1"], ["m1"])
    shard = reader._owner_shard("default:alice")
    assert shard is not None and shard._checkpoint_seen is not None  # held, and used by the next pin
    writer.commit(0, [Upsert("messages", message("default:alice", "m2", "hiking again", near))], {"analyses": 2})
    assert searched() == (["m1", "m2"], ["m1", "m2"], ["m1", "m2"])
    assert searched() == (["m1", "m2"], ["m1", "m2"], ["m1", "m2"])  # from the held checkpoint
    writer.commit(0, [Delete("messages", "m1")], {"analyses": 3})  # a forget
    assert searched() == (["m2"], ["m2"], ["m2"])
    assert reader.change_token(0) == writer.change_token(0) == "main/3"


def test_lancedb_owner_changes_do_not_cross_a_view_switch(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    for view in ("main", "rebuilt"):
        s = LanceStore(root, view=view)
        s.bind(1)
        s.commit(0, [Upsert("messages", message("default:alice", "m1", view, (1.0, 0.0, 0.0)))], {"analyses": 1})
    reader = LanceStore(root, read_only=True)
    token = reader.change_token(0)
    assert reader.owner_changes("default:alice", token) == OwnerChanges(token)
    switch_view(root, "rebuilt")
    assert reader.change_token(0) == "rebuilt/1" != token  # the same commit count in another view
    assert reader.owner_changes("default:alice", token) is None


def test_lancedb_readers_see_a_periodic_optimize_at_once(tmp_path: Path) -> None:
    store = LanceStore(str(tmp_path / "store"), optimize_every=2)
    store.bind(1)
    for i in range(2):
        store.commit(
            0, [Upsert("messages", message("default:alice", f"m{i}", "x", (1.0, 0.0, 0.0)))], {"analyses": i + 1}
        )
    reader = LanceStore(str(tmp_path / "store"), read_only=True)
    table = reader._owner_shard("default:alice").visible("messages")  # type: ignore[union-attr]
    assert {ix.index_type for ix in table.list_indices()} == {"FTS", "BTree"}  # the checkpoint covers the optimize
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m0", "m1"]


# ---- the archive of a large owner: its newest messages held hot, older ones reached through the store --

BOB_BESIDE_ALICE = next(
    f"default:u{i}"
    for i in range(100)
    if owner_partition(f"default:u{i}", PARTITIONS) == owner_partition("default:alice", PARTITIONS)
)
"""Another owner in alice's shard: its messages must count for nothing of hers."""


def _numbered(user: str, seq: int, **values: Any) -> Row:
    """Message ``seq`` of ``user`` (id ``<user's first letter>NN``), with the given fields."""
    fields: dict[str, Any] = {"speaker": "Ann", "role": "user", "text": f"message {seq}", "vector": (1.0, 0.0, 0.0)}
    fields.update(values)
    prefix = "m" if user == "default:alice" else "b"
    return make(MessageRow, id=f"{prefix}{seq:02d}", owner_id=user, seq=seq, **fields)


def _archive(store: MemoryStore, alice: list[Row], others: Sequence[Row] = ()) -> None:
    """Alice's owner row and an episodic row, her messages in two commits (newest first), and other rows."""
    owner = make(OwnerRow, id="default:alice", owner_id="default:alice", next_seq=len(alice))
    fact = make(EpisodicRow, id="e1", owner_id="default:alice", content="a fact", vector=(0.0, 1.0, 0.0))
    half = len(alice) // 2
    _commit(store, "default:alice", [Upsert("messages", r) for r in alice[half:]], 1)
    _commit(
        store,
        "default:alice",
        [Upsert("owners", owner), Upsert("episodic", fact), *(Upsert("messages", r) for r in [*alice[:half], *others])],
        2,
    )


def test_archive_split_counts_the_cold_messages_and_every_speaker(store: MemoryStore) -> None:
    alice = [
        _numbered("default:alice", s, speaker="Bot", role="assistant") if s % 2 else _numbered("default:alice", s)
        for s in range(12)
    ]
    alice[0] = _numbered("default:alice", 0, speaker="Zed", role="other")  # a speaker of a cold message only
    bob = [_numbered(BOB_BESIDE_ALICE, s, speaker="Eve") for s in range(3, 40)]  # same shard, seqs of its own
    _archive(store, alice, bob)
    assert store.archive_split("default:alice", 5) == ArchiveSplit(
        cold_below_seq=7,
        cold_messages=7,
        messages=12,
        speakers=(("Ann", "user"), ("Bot", "assistant"), ("Zed", "other")),
    )
    assert store.archive_split("default:alice", 11) == ArchiveSplit(
        1, 1, 12, (("Ann", "user"), ("Bot", "assistant"), ("Zed", "other"))
    )
    assert store.archive_split("default:alice", 12) is None  # at most ``hot``: load it whole
    assert store.archive_split("default:alice", 50) is None
    assert store.archive_split("default:nobody", 5) is None
    split = store.archive_split(BOB_BESIDE_ALICE, 30)
    assert split is not None and (split.cold_below_seq, split.cold_messages, split.messages) == (10, 7, 37)
    assert split.speakers == (("Eve", "user"),)


def test_load_owner_from_a_seq_keeps_the_other_tables_whole(store: MemoryStore) -> None:
    _archive(store, [_numbered("default:alice", s) for s in range(12)], [_numbered(BOB_BESIDE_ALICE, 9)])
    hot = store.load_owner("default:alice", messages_from_seq=7)
    assert sorted(r.id for r in hot) == ["default:alice", "e1", "m07", "m08", "m09", "m10", "m11"]
    whole = store.load_owner("default:alice")
    assert sorted(r.id for r in whole) == sorted(["default:alice", "e1", *(f"m{s:02d}" for s in range(12))])
    assert sorted(r.id for r in store.load_owner("default:alice", 0)) == sorted(r.id for r in whole)


def test_searches_below_a_seq_find_only_the_owners_older_messages_best_first(store: MemoryStore) -> None:
    vectors = {3: (1.0, 0.25, 0.0), 5: (1.0, 0.5, 0.0), 9: (1.0, 0.0, 0.0), 10: (1.0, 0.125, 0.0)}
    alice = [
        _numbered(
            "default:alice", s, vector=vectors.get(s, (0.0, 0.0, 1.0)), text="hiking" if s in (2, 5, 9) else "rain"
        )
        for s in range(12)
    ]
    alice[2] = _numbered("default:alice", 2, text="hiking hiking in the hills", vector=(0.0, 0.5, 0.5))
    bob = [_numbered(BOB_BESIDE_ALICE, 0, text="hiking", vector=(1.0, 0.0, 0.0))]
    _archive(store, alice, bob)
    near = store.vector_search("messages", "default:alice", (1.0, 0.0, 0.0), 3, below_seq=7)
    assert [h.row.id for h in near][:2] == ["m03", "m05"]
    assert all(h.row.seq < 7 for h in near)  # type: ignore[union-attr]
    assert [h.row.vector for h in near][:2] == [vectors[3], vectors[5]]  # type: ignore[union-attr]
    assert near[0].score > near[1].score
    anywhere = store.vector_search("messages", "default:alice", (1.0, 0.0, 0.0), 2)
    assert [h.row.id for h in anywhere] == ["m09", "m10"]  # without below_seq: hot messages as well

    found = store.text_search("messages", "default:alice", "hiking", 5, below_seq=7)
    assert [h.row.id for h in found] == ["m02", "m05"]  # the word twice ranks first; m09 is hot, b00 bob's
    assert found[0].score > found[1].score
    assert [h.row.vector for h in found] == [(0.0, 0.5, 0.5), vectors[5]]  # type: ignore[union-attr]
    assert {h.row.id for h in store.text_search("messages", "default:alice", "hiking", 5)} == {"m02", "m05", "m09"}
    assert store.text_search("messages", "default:alice", "hiking", 5, below_seq=0) == []
    with pytest.raises(StoreError, match="below_seq"):
        store.vector_search("episodic", "default:alice", (0.0, 1.0, 0.0), 3, below_seq=7)
    with pytest.raises(StoreError, match="below_seq"):
        store.text_search("episodic", "default:alice", "fact", 3, below_seq=7)


@pytest.mark.parametrize(
    ("asked", "said", "reply", "other"),
    [
        ("Where did you go hiking?", "hiking", "To the Yellow Mountains, last spring.", "The weather is cold."),
        ("你上周去哪里徒步了？", "徒步", "去了黄山，风景很美。", "今天天气很冷。"),
    ],
    ids=["en", "zh"],
)
def test_with_context_a_message_is_found_by_the_words_of_the_one_before_it(
    store: MemoryStore, asked: str, said: str, reply: str, other: str
) -> None:
    """``text_search(..., context=True)``: a message matches by its own words and by its ``context`` (the words of the
    owner's message before it) alike: the reply is found by the question that asked it. Without: by its own only."""
    alice = [
        _numbered("default:alice", 0, text=asked, context=""),
        _numbered("default:alice", 1, text=reply, context=search_text(asked)),
        _numbered("default:alice", 2, text=other, context=search_text(reply)),
    ]
    _archive(store, alice)
    assert set(search_text(said).split()) <= set(search_text(asked).split())
    plain = store.text_search("messages", "default:alice", said, 5)
    assert [h.row.id for h in plain] == ["m00"]
    wide = store.text_search("messages", "default:alice", said, 5, context=True)
    assert {h.row.id for h in wide} == {"m00", "m01"}
    assert {h.row.context for h in wide} == {"", search_text(asked)}  # type: ignore[union-attr]
    assert [h.row.id for h in store.text_search("messages", "default:alice", said, 5, context=True, below_seq=1)] == [
        "m00"
    ]


def test_messages_by_id_reads_the_owners_messages_in_id_order(store: MemoryStore) -> None:
    _archive(store, [_numbered("default:alice", s) for s in range(12)], [_numbered(BOB_BESIDE_ALICE, 1)])
    found = store.messages_by_id("default:alice", ["m09", "m02", "absent", "b01", "e1", "m05", "m02"])
    assert [m.id for m in found] == ["m02", "m05", "m09"]
    assert found[0] == _numbered("default:alice", 2)  # the whole row, vector and all
    assert store.messages_by_id("default:alice", []) == []
    assert store.messages_by_id("default:nobody", ["m02"]) == []
    assert [m.id for m in store.messages_by_id(BOB_BESIDE_ALICE, ["b01", "m01"])] == ["b01"]


def test_message_ids_lists_the_owners_message_ids_below_a_seq(store: MemoryStore) -> None:
    _archive(store, [_numbered("default:alice", s) for s in range(12)], [_numbered(BOB_BESIDE_ALICE, 1)])
    assert store.message_ids("default:alice") == [f"m{s:02d}" for s in range(12)]
    assert store.message_ids("default:alice", below_seq=5) == [f"m{s:02d}" for s in range(5)]
    assert store.message_ids("default:alice", below_seq=0) == []
    assert store.message_ids(BOB_BESIDE_ALICE) == ["b01"]  # the other owner's, not alice's
    assert store.message_ids("default:nobody") == []


def test_message_columns_reads_a_range_of_the_owners_messages_as_the_tables_arrow(store: MemoryStore) -> None:
    """Every field of each message in the range (its vector as the table holds it, zeros for none), the full-text
    ``tokens`` the LanceDB table indexes, or only the columns asked for; another owner's messages never."""
    alice = [_numbered("default:alice", s, text=f"hiking day {s}", vector=(float(s), 1.0, 0.5)) for s in range(12)]
    alice[3] = _numbered("default:alice", 3, vector=())
    _archive(store, alice, [_numbered(BOB_BESIDE_ALICE, 4)])
    data = store.message_columns("default:alice", from_seq=2, below_seq=7)
    assert data is not None
    got = sorted(lance_arrow.rows_from_arrow("messages", data), key=lambda r: r.id)
    assert got == alice[2:7]  # the whole rows, vectors included; the one without stays without
    tokens = dict(zip(data.column("id").to_pylist(), data.column("tokens").to_pylist(), strict=True))
    assert tokens == {r.id: lance_arrow.row_tokens("messages", r) for r in alice[2:7]}
    assert sorted(r.id for r in lance_arrow.rows_from_arrow("messages", store.message_columns("default:alice"))) == [
        r.id for r in alice
    ]  # the whole owner by default
    seqs = store.message_columns("default:alice", below_seq=5, columns=("seq",))
    assert (
        seqs is not None and seqs.column_names == ["seq"] and sorted(seqs.column("seq").to_pylist()) == list(range(5))
    )
    empty = store.message_columns("default:alice", from_seq=40)
    assert empty is None or empty.num_rows == 0
    bob = store.message_columns(BOB_BESIDE_ALICE)
    assert bob is not None and bob.column("id").to_pylist() == ["b04"]


def _columns(
    loaded: OwnerColumns,
) -> tuple[list[Row], dict[str, dict[str, list[float]]], list[dict[str, Any]], list[dict[str, Any]]]:
    """What ``OwnerColumns`` hold, comparable across adapters: rows by table and id, each row's vector, edges and
    nodes by id."""
    vectors = {
        t: {i: m.tolist() for i, m in zip(ids, matrix, strict=True)} for t, (ids, matrix) in loaded.vectors.items()
    }
    edges = sorted(loaded.edges.to_pylist(), key=lambda e: e["id"])
    nodes = sorted(loaded.nodes.select(list(NODE_COLUMNS)).to_pylist(), key=lambda n: n["id"])
    return _sorted(loaded.rows), vectors, edges, nodes


def test_load_owner_columns_holds_the_rows_load_owner_reads(store: MemoryStore) -> None:
    """Every row of the owner as ``load_owner`` reads it (hot messages only with ``messages_from_seq``), the graph
    nodes and edges as columns, the vectors as matrices (zeros where a row has none), another owner's rows never."""
    alice = [_numbered("default:alice", s, vector=(float(s), 1.0, 0.5)) for s in range(8)]
    alice[3] = _numbered("default:alice", 3, vector=())  # no vector
    bob = [_numbered(BOB_BESIDE_ALICE, 1)]
    trait = make(PersonaRow, id="p1", owner_id="default:alice", value="tea", vector=(0.0, 0.0, 2.0))
    node = make(GraphNodeRow, id="n1", owner_id="default:alice", node_type="topic", ref_id="tea", label="tea")
    node_of_bob = make(GraphNodeRow, id="n9", owner_id=BOB_BESIDE_ALICE, node_type="topic", ref_id="tea", label="tea")
    edges = [
        make(GraphEdgeRow, id=f"g{i}", owner_id=user, src="n1", dst=f"n{i + 2}", edge_type="mentions", weight=0.5)
        for i, user in enumerate(["default:alice", "default:alice", BOB_BESIDE_ALICE])
    ]
    _archive(store, alice, bob)
    _commit(store, "default:alice", [Upsert(r.TABLE, r) for r in [trait, node, node_of_bob, *edges]], 3)
    for since in (0, 5):
        loaded = store.load_owner_columns("default:alice", messages_from_seq=since)
        rows, vectors, edge_columns, node_columns = _columns(loaded)
        expected = _columns(owner_columns(store.load_owner("default:alice", since)))
        assert (rows, vectors, edge_columns, node_columns) == expected
        assert [r.id for r in rows if isinstance(r, MessageRow)] == [f"m{s:02d}" for s in range(since, 8)]
        assert all(not getattr(r, "vector", ()) for r in rows)  # the vectors are in the matrices only
        assert vectors["messages"]["m07"] == [7.0, 1.0, 0.5] and vectors["persona"] == {"p1": [0.0, 0.0, 2.0]}
        assert vectors["messages"].get("m03", [0.0] * 3) == [0.0] * 3
        assert [e["id"] for e in edge_columns] == ["g0", "g1"]  # bob's edge is bob's
        assert node_columns == [{c: getattr(node, c) for c in NODE_COLUMNS}]  # and so is his node
        assert not [r for r in rows if isinstance(r, GraphNodeRow | GraphEdgeRow)]  # the graph in columns only
        held = {
            "episodic": {r.id: r for r in rows if isinstance(r, EpisodicRow)},
            "messages": {r.id: r for r in rows if isinstance(r, MessageRow)},
        }
        for table, tokens in loaded.tokens.items():  # where the store hands them: the texts' own, cut as stored
            assert table in held and set(tokens) <= set(held[table])
            assert tokens == {i: lance_arrow.row_tokens(table, held[table][i]) for i in tokens}
    empty = store.load_owner_columns("default:nobody")
    assert empty.rows == [] and empty.edges.num_rows == 0 and empty.nodes.num_rows == 0
    assert all(not ids for ids, _ in empty.vectors.values())
    if not isinstance(store, memory_store.InMemoryStore):  # the LanceDB tables hold them: every record's, message's
        assert loaded.tokens == {
            "episodic": {"e1": search_text("a fact")},
            "messages": {m.id: lance_arrow.row_tokens("messages", m) for m in alice[5:8]},
        }


def test_lancedb_hands_no_message_tokens_from_a_table_made_before_they_held_the_extraction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A messages table made without ``TOKENS_MARK`` (by a version whose tokens were the speaker's and text's only)
    keeps its schema when rows are appended since, so its tokens are never taken for the reader's index: the reader
    cuts those messages itself. A table made now is marked, and its tokens are handed over."""
    from adamem.projections.store import lance_fencing, lance_writes

    def unmarked(table: str, dim: int) -> pa.Schema:
        schema = lance_arrow.arrow_schema(table, dim)
        return (
            schema.set(schema.get_field_index("tokens"), pa.field("tokens", pa.string()))
            if table == "messages"
            else schema
        )

    rows = [_numbered("default:alice", s, text=f"hiking day {s}") for s in range(3)]
    for name, marked in (("old", False), ("new", True)):
        with monkeypatch.context() as patch:
            if not marked:
                patch.setattr(lance_fencing, "arrow_schema", unmarked)
                patch.setattr(lance_writes, "arrow_schema", unmarked)
            store = open_store(str(tmp_path / name))
            store.bind(PARTITIONS)
            _commit(store, "default:alice", [Upsert("messages", r) for r in rows[:2]], 1)
        _commit(store, "default:alice", [Upsert("messages", rows[2])], 2)  # appended by this version
        loaded = store.load_owner_columns("default:alice")
        assert sorted(r.id for r in loaded.rows if isinstance(r, MessageRow)) == ["m00", "m01", "m02"]
        assert ("messages" in loaded.tokens) is marked, name
        if marked:
            assert loaded.tokens["messages"] == {r.id: lance_arrow.row_tokens("messages", r) for r in rows}
        store.close()


def test_lancedb_an_ivf_pq_index_still_finds_the_nearest_cold_message_first(tmp_path: Path) -> None:
    """Past ``vector_index_min_rows`` the messages table gets an IVF_PQ index; a search below a seq,
    re-ranked by exact distance, still returns the planted nearest cold message first."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(700, 16)).astype(np.float32)
    root = str(tmp_path / "store")
    store = LanceStore(root, vector_index_min_rows=256)
    store.bind(1)
    alice = [_numbered("default:alice", s, vector=tuple(float(x) for x in vectors[s])) for s in range(600)]
    bob = [_numbered(BOB_BESIDE_ALICE, s, vector=tuple(float(x) for x in vectors[600 + s])) for s in range(100)]
    query = vectors[123] + 0.05 * rng.normal(size=16).astype(np.float32)
    alice[580] = _numbered("default:alice", 580, vector=tuple(float(x) for x in query))  # hot, nearer still
    bob[5] = _numbered(BOB_BESIDE_ALICE, 5, vector=tuple(float(x) for x in query))  # nearer, another owner
    store.commit(0, [Upsert("messages", r) for r in alice + bob], {"analyses": 1})
    store.optimize()
    store.commit(0, [], {"analyses": 2})  # the checkpoint covers the indexed version
    shard = store._shard(0, create=False)
    assert shard is not None
    assert {tuple(ix.columns): ix.index_type for ix in shard.tables["messages"].list_indices()}[("vector",)] == "IvfPq"
    reader = LanceStore(root, read_only=True)
    hits = reader.vector_search("messages", "default:alice", query.tolist(), 10, below_seq=500)
    assert hits[0].row.id == "m123"
    assert all(h.row.owner_id == "default:alice" and h.row.seq < 500 for h in hits)  # type: ignore[union-attr]
    assert hits[0].score == pytest.approx(
        float(np.dot(query, vectors[123]) / np.linalg.norm(query) / np.linalg.norm(vectors[123])), abs=1e-4
    )
    assert reader.vector_search("messages", "default:alice", query.tolist(), 1)[0].row.id == "m580"
    split = reader.archive_split("default:alice", 100)
    assert split is not None and (split.cold_below_seq, split.cold_messages, split.messages) == (500, 500, 600)


def test_lancedb_full_text_index_tokens_read_back_exactly(tmp_path: Path) -> None:
    """The FST of an index's token dictionary reads back as exactly the indexed words: every ASCII
    character and non-ASCII ones, shared prefixes, nodes of one and of more than 32 transitions."""
    rng = np.random.default_rng(5)
    alphabet = [chr(c) for c in range(33, 127) if chr(c) != "'"] + ["é", "中", "文"]
    words = {"".join(rng.choice(alphabet, size=int(rng.integers(1, 12)))) for _ in range(2000)}
    words |= {"a", "ab", "abc", "b", *alphabet}
    ordered = sorted(words)
    db = lancedb.connect(str(tmp_path / "db"))
    texts = [" ".join(ordered[i : i + 7]) for i in range(0, len(ordered), 7)]
    table = db.create_table("t", data=[{"id": str(i), "tokens": t} for i, t in enumerate(texts)])
    table.create_index("tokens", config=lance_tables.FTS_INDEX)
    files = list(lance_scan.index_token_files(tmp_path / "db" / "t.lance"))
    read = [t for f in files for t in lance_scan.index_tokens(f)]
    assert files and sorted(read) == sorted({w.lower().encode() for w in words})  # (lower-cased by the index)


def test_lancedb_erasure_leaves_no_token_of_a_deleted_row_in_the_full_text_index(tmp_path: Path) -> None:
    """A word of a forgotten message is gone from the full-text index's dictionary after ``erase_history``,
    also when the index was folded forward over several commits and the row sits among others."""
    root = tmp_path / "store"
    store = LanceStore(str(root), optimize_every=2)
    store.bind(1)
    words = ["alpha", "zanzibarquokka", "gamma", "delta", "epsilon"]
    for n, word in enumerate(words, start=1):  # the index is made at the first commit, folded forward at every 2nd
        store.commit(
            0, [Upsert("messages", message("default:alice", f"m{n}", f"{word} words", (1.0, 0.0, 0.0)))], {"a": n}
        )
    store.optimize()
    folder = root / "views" / "main" / "p0" / "messages.lance"

    def tokens() -> set[bytes]:
        return {t for path in lance_scan.index_token_files(folder) for t in lance_scan.index_tokens(path)}

    assert {b"alpha", b"zanzibarquokka", b"epsilon", b"word"} <= tokens()
    store.commit(0, [Delete("messages", "m2")], {"a": 6})
    store.erase_history(0)
    assert b"zanzibarquokka" not in tokens() and {b"alpha", b"gamma", b"epsilon", b"word"} <= tokens()
    assert [h.row.id for h in store.text_search("messages", "default:alice", "gamma", 5)] == ["m3"]


def test_a_bulk_store_indexes_its_few_files_as_written_and_erasure_still_rewrites_them(tmp_path: Path) -> None:
    """A rebuild's ``optimize`` makes every index over the files it wrote, without rewriting them; a later
    erasure rewrites files and indexes, and no word of the deleted row is left in the full-text index."""
    root = tmp_path / "store"
    store = LanceStore(str(root), optimize_every=0, view="r1", bulk=True)
    store.bind(1)
    words = ["alpha", "zanzibarquokka", "gamma"]
    for n, word in enumerate(words, start=1):  # three commits: three files a table
        store.commit(
            0, [Upsert("messages", message("default:alice", f"m{n}", f"{word} words", (1.0, 0.0, 0.0)))], {"a": n}
        )
    store.optimize()
    folder = root / "views" / "r1" / "p0" / "messages.lance"
    table = lancedb.connect(str(folder.parent)).open_table("messages")
    assert len(table.to_lance().get_fragments()) == len(words)  # not compacted
    assert {ix.index_type for ix in table.list_indices()} >= {"FTS", "BTree"}
    assert [h.row.id for h in store.text_search("messages", "default:alice", "zanzibarquokka", 5)] == ["m2"]

    def tokens() -> set[bytes]:
        return {t for path in lance_scan.index_token_files(folder) for t in lance_scan.index_tokens(path)}

    assert b"zanzibarquokka" in tokens()
    store.commit(0, [Delete("messages", "m2")], {"a": 4})
    store.erase_history(0)
    assert b"zanzibarquokka" not in tokens() and {b"alpha", b"gamma", b"word"} <= tokens()
    assert [h.row.id for h in store.text_search("messages", "default:alice", "gamma", 5)] == ["m3"]
    store.commit(0, [Delete("messages", "m1"), Delete("messages", "m3")], {"a": 5})
    store.erase_history(0)
    assert tokens() == set() and store.text_search("messages", "default:alice", "gamma", 5) == []


# ---- fencing: one writer per shard at a time ------------------------------------------------------


def _checkpoint_row(root: StoreLocation) -> dict[str, Any]:
    reader = open_store(root, read_only=True)
    assert isinstance(reader, LanceStore)
    shard = reader._shard(0, create=False)
    assert shard is not None
    row = shard.checkpoint_row()
    assert row is not None
    return row


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lance_root(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StoreLocation:
    """A LanceDB store root: a folder, or a prefix on the S3-compatible server with its settings."""
    return _s3_url(request, monkeypatch) if request.param == "s3" else StoreLocation.parse(str(tmp_path / "store"))


def test_lancedb_a_writer_that_lost_its_shard_cannot_commit_to_it(lance_root: StoreLocation) -> None:
    """Also on an object store: the compare-and-set of the checkpoint is Lance's commit there too."""
    root = lance_root
    old = open_store(root)
    assert isinstance(old, LanceStore)
    old.bind(1)
    old.commit(0, [Upsert("messages", message("default:alice", "m1", "first", (1.0, 0.0, 0.0)))], {"analyses": 1})
    old_epoch = _checkpoint_row(root)["epoch"]
    assert old.owns(0)
    new = open_store(root)  # the partition moved: the new owner opens (claims) the shard
    assert new.checkpoint(0) == {"analyses": 1}
    assert _checkpoint_row(root)["epoch"] == old_epoch + 1
    assert new.owns(0) and not old.owns(0)  # a refused commit of the old writer is a lost claim: not folded again
    with pytest.raises(StoreFenced, match="may no longer commit"):
        old.commit(0, [Upsert("messages", message("default:alice", "m2", "stale", (0.0, 1.0, 0.0)))], {"analyses": 2})
    new.commit(0, [Upsert("messages", message("default:alice", "m2", "owner", (0.0, 1.0, 0.0)))], {"analyses": 2})
    with pytest.raises(StoreFenced):  # and it stays fenced: it never gets the shard back by committing
        old.commit(0, [], {"analyses": 3})
    reader = open_store(root, read_only=True)
    assert [(r.id, r.text) for r in reader.rows("messages", "default:alice")] == [("m1", "first"), ("m2", "owner")]  # type: ignore[union-attr]
    assert reader.checkpoint(0) == {"analyses": 2}
    row = _checkpoint_row(root)
    assert row["epoch"] == old_epoch + 1 and row["writer"].endswith(f":{os.getpid()}")


def test_lancedb_a_table_write_of_a_fenced_writer_is_rolled_back_by_the_owner(tmp_path: Path) -> None:
    """The old writer passed its fence check, then was paused; it writes a table after the claim."""
    root = str(tmp_path / "store")
    old = LanceStore(root)
    old.bind(1)
    old.commit(0, [Upsert("messages", message("default:alice", "m1", "first", (1.0, 0.0, 0.0)))], {"analyses": 1})
    new = LanceStore(root)
    new.checkpoint(0)  # claimed
    shard = old._shard(0, create=False)
    assert shard is not None
    shard.table("messages").add(  # the late write (what the old writer's commit would do after its check)
        lance_arrow.rows_to_arrow(
            "messages", [message("default:alice", "zombie", "late", (0.0, 0.0, 1.0))], shard._schema("messages")
        )
    )
    reader = LanceStore(root, read_only=True)
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1"]  # never visible: not checkpointed
    new.commit(0, [Upsert("messages", message("default:alice", "m2", "owner", (0.0, 1.0, 0.0)))], {"analyses": 2})
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1", "m2"]
    assert [r.id for r in LanceStore(root).rows("messages", "default:alice")] == ["m1", "m2"]


def test_lancedb_the_owner_never_folds_from_a_table_a_fenced_writer_made_after_the_claim(tmp_path: Path) -> None:
    """The new owner claimed an empty shard; the old writer's commit then made its tables (its checkpoint
    refused). Before the fix the owner read those rows into the state it folds from, found its message
    there already, wrote nothing, and its guard then deleted the old writer's rows: the message was lost
    (seen in the group test as a message's missing graph nodes). bob lives in shard 0 of 2, alice in 1."""
    root = str(tmp_path / "store")
    old = LanceStore(root)
    old.bind(2)  # a first commit (to shard 1) sets the vector dimension
    old.commit(1, [Upsert("messages", message("default:alice", "a1", "x", (1.0, 0.0, 0.0)))], {"analyses": 1})
    old.checkpoint(0)  # claims the empty shard
    new = LanceStore(root)
    new.checkpoint(0)  # the partition moved: claimed again, no table made yet
    shard = old._shard(0, create=False)
    assert shard is not None
    late = message("default:bob", "m1", "late", (0.0, 0.0, 1.0))
    shard.table("messages").add(lance_arrow.rows_to_arrow("messages", [late], shard._schema("messages")))
    with pytest.raises(StoreFenced):
        old.commit(0, [], {"analyses": 1})  # its checkpoint is refused
    assert new.load_owner("default:bob") == []  # nothing of it counts, so nothing of it is seen
    mine = message("default:bob", "m1", "owner", (1.0, 0.0, 0.0))
    new.commit(0, [Upsert("messages", mine)], {"analyses": 1})
    reader = LanceStore(root, read_only=True)
    assert [(r.id, r.text) for r in reader.rows("messages", "default:bob")] == [("m1", "owner")]  # type: ignore[union-attr]
    with pytest.raises(StoreFenced):  # and a writer that lost the shard learns it when it reads a new table
        again = LanceStore(root)
        again.checkpoint(0)
        new_shard = new._shard(0, create=False)
        assert new_shard is not None
        new_shard.tables.pop("messages")
        new.load_owner("default:bob")


def test_lancedb_a_foreign_write_interleaved_with_a_commit_is_caught_and_the_commit_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "store")
    owner = LanceStore(root)
    owner.bind(1)
    owner.commit(0, [Upsert("messages", message("default:alice", "m1", "first", (1.0, 0.0, 0.0)))], {"analyses": 1})
    shard = owner._shard(0, create=False)
    assert shard is not None
    original = shard.table
    foreign = lancedb.connect(str(Path(root) / "views" / "main" / "p0")).open_table("messages")
    late = lance_arrow.rows_to_arrow(
        "messages", [message("default:alice", "zombie", "late", (0.0, 0.0, 1.0))], shard._schema("messages")
    )
    interleaved = []

    def write_between(name: str) -> Any:
        table = original(name)
        if name == "messages" and not interleaved:  # once: after the owner's guard, before its own write
            foreign.add(late)
            interleaved.append(name)
        return table

    monkeypatch.setattr(shard, "table", write_between)
    owner.commit(0, [Upsert("messages", message("default:alice", "m2", "owner", (0.0, 1.0, 0.0)))], {"analyses": 2})
    assert interleaved == ["messages"]
    reader = LanceStore(root, read_only=True)
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1", "m2"]
    assert reader.checkpoint(0) == {"analyses": 2}


def test_a_reader_that_read_a_checkpoint_just_before_history_was_erased_reads_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``erase_history`` (after a forget) removes every older table version; a reader that had just read
    the checkpoint naming one of them reads the newer checkpoint instead of failing ("Version N no
    longer exists", seen from an agent's read right after a forget on a real worker)."""
    root = str(tmp_path / "store")
    writer = LanceStore(root)
    writer.bind(1)
    writer.commit(0, [Upsert("messages", message("default:alice", "m1", "I love hiking", (1.0, 0.0, 0.0)))], {"a": 1})
    reader = LanceStore(root, read_only=True)
    shard = reader._shard(0, create=False)
    assert shard is not None
    stale = shard.checkpoint_row()  # what a reader read ...
    writer.commit(0, [Upsert("messages", message("default:alice", "m2", "secret", (0.0, 1.0, 0.0)))], {"a": 2})
    writer.commit(0, [Delete("messages", "m2")], {"a": 3})
    writer.erase_history(0)  # ... before the writer removed the versions it names
    real = shard.checkpoint_row
    reads = iter([stale])
    monkeypatch.setattr(shard, "checkpoint_row", lambda: next(reads, None) or real())
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1"]


@pytest.mark.parametrize("cached", [True, False], ids=["dataset-open", "dataset-not-open"])
def test_a_reader_whose_versions_are_erased_while_it_reads_them_reads_the_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool
) -> None:
    """The reader pinned the checkpoint's versions; before it read their files, the writer's ``erase_history``
    (after a forget) removed them. The read is answered from the rewritten versions, not failed ("Dataset at
    path .../owners.lance/_versions/....manifest was not found", seen when an agent asked right after a forget
    while the worker erased)."""
    root = str(tmp_path / "store")
    writer = LanceStore(root)
    writer.bind(1)
    writer.commit(0, [Upsert("messages", message("default:alice", "m1", "I love hiking", (1.0, 0.0, 0.0)))], {"a": 1})
    writer.commit(0, [Upsert("messages", message("default:alice", "m2", "secret", (0.0, 1.0, 0.0)))], {"a": 2})
    reader = LanceStore(root, read_only=True)
    if cached:
        assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1", "m2"]
    shard = reader._shard(0, create=False)
    assert shard is not None
    original, erased = shard._dataset, []

    def erase_then_read(name: str, table: Any) -> Any:
        if not erased:  # once: after the reader pinned, before it read
            writer.commit(0, [Delete("messages", "m2")], {"a": 3})
            writer.erase_history(0)
            erased.append(name)
        return original(name, table)

    monkeypatch.setattr(shard, "_dataset", erase_then_read)
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1"]
    assert erased == ["messages"]


# -- One contract per port: a StoreWriter, a StoreReader beside it, and the ViewCatalog ---------------
#
# Each test below runs over the in-memory store and LanceDB in a temp folder, reaching both through
# the ports only: a catalog (``open_store("memory://")`` or ``open_views(folder)``) and the handles
# it opens.

PORT_ADAPTERS = ["memory", "lancedb"]


@pytest.fixture(params=PORT_ADAPTERS)
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> ViewCatalog:
    """The view catalog of a fresh store of each adapter."""
    if request.param == "memory":
        found = open_store("memory://")
        assert isinstance(found, memory_store.InMemoryStore)
        return found
    return open_views(str(tmp_path / "store"))


@pytest.fixture
def writer(catalog: ViewCatalog) -> StoreWriter:
    """A writer of the active view, bound to ``PARTITIONS`` shards."""
    w = catalog.open_view()
    w.bind(PARTITIONS)
    return w


@pytest.fixture
def reader(catalog: ViewCatalog, writer: StoreWriter) -> StoreReader:
    """A read-only handle on the view ``writer`` writes, opened beside it."""
    return catalog.open_view(read_only=True)


def _alice(text: str = "I love hiking", id_: str = "m1") -> list[Any]:
    return [
        Upsert("owners", make(OwnerRow, id="default:alice", owner_id="default:alice")),
        Upsert("messages", message("default:alice", id_, text, (1.0, 0.0, 0.0))),
    ]


ALICE = partition_for("alice", PARTITIONS)


# StoreReader


def test_reader_of_an_empty_store_finds_nothing(catalog: ViewCatalog) -> None:
    r: StoreReader = catalog.open_view(read_only=True)
    assert (r.partition_count(), r.owners(), r.generation(), r.checkpoint(0)) == (0, [], {}, {})
    assert r.load_owner("default:alice") == [] and r.rows("messages", "default:alice") == []
    assert r.vector_search("messages", "default:alice", (1.0, 0.0, 0.0), 5) == []
    assert r.text_search("messages", "default:alice", "hiking", 5) == []
    assert r.archive_split("default:alice", 5) is None and r.messages_by_id("default:alice", ["m1"]) == []


def test_reader_sees_a_commit_of_the_writer_beside_it_at_once(
    catalog: ViewCatalog, writer: StoreWriter, reader: StoreReader
) -> None:
    before = reader.change_token(ALICE)
    writer.commit(ALICE, _alice(), {"analyses": 4})
    writer.record_generation({"name": "g1"})  # (a LanceDB reader reads it when opened: it holds the view's meta)
    assert catalog.open_view(read_only=True).generation() == {"name": "g1"}
    assert reader.partition_count() == PARTITIONS and reader.owners() == ["default:alice"]
    assert reader.checkpoint(ALICE) == {"analyses": 4}
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m1"]
    assert sorted(r.id for r in reader.load_owner("default:alice")) == ["default:alice", "m1"]
    assert [h.row.id for h in reader.vector_search("messages", "default:alice", (1.0, 0.0, 0.0), 5)] == ["m1"]
    assert [h.row.id for h in reader.text_search("messages", "default:alice", "hiking", 5)] == ["m1"]
    assert reader.change_token(ALICE) != before
    changes = reader.owner_changes("default:alice", before)
    assert changes is not None and changes.token == reader.change_token(ALICE)
    assert sorted(r.id for r in changes.rows) == ["default:alice", "m1"]


def test_reader_opened_read_only_refuses_to_write(writer: StoreWriter, catalog: ViewCatalog) -> None:
    writer.commit(ALICE, _alice(), {"analyses": 1})
    r = catalog.open_view(read_only=True)
    with pytest.raises(StoreError):
        r.commit(ALICE, [Delete("messages", "m1")], {"analyses": 2})
    with pytest.raises(StoreError):
        r.erase_history(ALICE)
    assert [row.id for row in r.rows("messages", "default:alice")] == ["m1"]


# StoreWriter


def test_writer_refuses_a_commit_before_bind(catalog: ViewCatalog) -> None:
    with pytest.raises(StoreError):
        catalog.open_view().commit(0, _alice(), {"analyses": 1})


def test_writer_commits_merge_offsets_and_net_changes(writer: StoreWriter, reader: StoreReader) -> None:
    writer.commit(ALICE, [*_alice("first"), Upsert("messages", message("default:alice", "m1", "last", ()))], {"a": 1})
    writer.commit(ALICE, [], {"b": 7})
    assert reader.checkpoint(ALICE) == {"a": 1, "b": 7}
    assert [r.text for r in reader.rows("messages", "default:alice")] == ["last"]  # type: ignore[attr-defined]


def test_writer_erases_history_keeping_the_rest_and_keeps_working_after_optimize_and_release(
    writer: StoreWriter, reader: StoreReader
) -> None:
    writer.commit(ALICE, [*_alice(), *_alice("second", "m2")[1:]], {"analyses": 1})
    writer.commit(ALICE, [Delete("messages", "m1")], {"analyses": 2})
    assert writer.erase_history(ALICE) == []  # no other view to remove
    writer.optimize()
    assert writer.owns(ALICE)
    writer.release([ALICE])
    writer.commit(ALICE, _alice("third", "m3")[1:], {"analyses": 3})
    assert [r.id for r in reader.rows("messages", "default:alice")] == ["m2", "m3"]
    assert reader.checkpoint(ALICE) == {"analyses": 3}


# ViewCatalog


def test_catalog_of_a_fresh_store_holds_no_view_until_one_is_written(catalog: ViewCatalog) -> None:
    assert catalog.views() == [] and catalog.active_view() == "main"
    catalog.open_view("r1").record_generation({"name": "g2"})
    catalog.open_view().bind(PARTITIONS)
    assert catalog.views() == ["main", "r1"] and catalog.active_view() == "main"


def _view_with(catalog: ViewCatalog, name: str | None, text: str) -> MemoryStore:
    store = catalog.open_view(name)
    store.bind(PARTITIONS)
    store.record_generation({"name": text})
    store.commit(ALICE, _alice(text), {"analyses": 1})
    return store


def _texts(store: StoreReader) -> list[str]:
    return [r.text for r in store.rows("messages", "default:alice")]  # type: ignore[attr-defined]


def test_catalog_switch_moves_followers_and_leaves_named_handles_on_their_view(catalog: ViewCatalog) -> None:
    _view_with(catalog, None, "old")
    _view_with(catalog, "r1", "new")
    follower, pinned = catalog.open_view(read_only=True), catalog.open_view("main", read_only=True)
    token = follower.change_token(ALICE)
    assert _texts(follower) == ["old"] and follower.generation() == {"name": "old"}
    catalog.switch_view("r1")
    assert catalog.active_view() == "r1"
    assert _texts(follower) == ["new"] and follower.generation() == {"name": "new"}
    assert _texts(pinned) == ["old"]
    assert follower.change_token(ALICE) != token  # the same commit count, in another view
    assert follower.owner_changes("default:alice", token) is None  # a token of another view: load again


def test_catalog_a_held_view_is_kept_through_a_switch_and_the_switch_followed_after(catalog: ViewCatalog) -> None:
    """A unit of work (a checkpoint read, then a commit past it) sees one view, however the catalog switches."""
    _view_with(catalog, None, "old")
    _view_with(catalog, "r1", "new")
    follower = catalog.open_view()
    with follower.held_view() as name:
        assert name == "main"
        catalog.switch_view("r1")
        assert follower.view == "main" and _texts(follower) == ["old"] and follower.generation() == {"name": "old"}
        with follower.held_view() as inner:  # blocks nest: the outer one's view
            assert inner == "main" and follower.checkpoint(ALICE) == {"analyses": 1}
        follower.commit(ALICE, _alice("later", "m2"), {"analyses": 2})
        assert sorted(_texts(follower)) == ["later", "old"]
    assert _texts(follower) == ["new"] and follower.generation() == {"name": "new"}  # followed after the block
    assert follower.checkpoint(ALICE) == {"analyses": 1}
    with follower.held_view() as name:
        assert name == "r1"
    assert sorted(_texts(catalog.open_view("main", read_only=True))) == ["later", "old"]


def test_catalog_refuses_to_switch_to_a_view_it_does_not_hold(catalog: ViewCatalog) -> None:
    _view_with(catalog, None, "old")
    with pytest.raises(StoreError, match="no view 'nope'"):
        catalog.switch_view("nope")
    assert catalog.active_view() == "main"


def test_catalog_removes_every_other_view(catalog: ViewCatalog) -> None:
    for name in ("main", "r1", "r2"):
        _view_with(catalog, name, name)
    assert catalog.remove_other_views("r1") == ["main", "r2"]
    assert catalog.views() == ["r1"]
    assert _texts(catalog.open_view("r1", read_only=True)) == ["r1"]


def test_catalog_erasure_in_the_active_view_removes_the_other_views_and_a_rebuild_removes_none(
    catalog: ViewCatalog,
) -> None:
    live = _view_with(catalog, None, "secret")
    _view_with(catalog, "then", "secret")
    rebuild = catalog.open_view("r1", bulk=True, optimize_every=0)
    rebuild.bind(PARTITIONS)
    rebuild.commit(ALICE, _alice("kept"), {"analyses": 1})
    rebuild.commit(ALICE, [Delete("messages", "m1")], {"analyses": 2})
    assert rebuild.erase_history(ALICE) == []  # a view nobody reads yet: the views it replaces are left to the switch
    rebuild.optimize()
    live.commit(ALICE, [Delete("messages", "m1")], {"analyses": 2})
    assert live.erase_history(ALICE) == ["r1", "then"]
    assert catalog.views() == ["main"] and _texts(catalog.open_view(read_only=True)) == []


def test_catalog_views_keep_their_rebuild_job_and_the_partitions_a_rebuild_erased_in(catalog: ViewCatalog) -> None:
    _view_with(catalog, None, "live")
    job = {"group": "t-rebuild-r1", "topic": "analyses", "targets": {"0": 3, "1": 0}, "until_time": None}
    rebuild = catalog.open_view("r1", bulk=True, optimize_every=0)
    rebuild.bind(PARTITIONS)
    rebuild.record_rebuild_job(job)
    reader = catalog.open_view("r1", read_only=True)
    assert reader.rebuild_job() == {**job, "erased": [], "erasing": []}
    assert catalog.open_view("main", read_only=True).rebuild_job() == {}  # only the view it was recorded in
    rebuild.commit(ALICE, _alice("kept"), {"analyses": 1})
    rebuild.commit(ALICE, [Delete("messages", "m1")], {"analyses": 2})
    rebuild.erase_history(ALICE)
    assert catalog.open_view("r1", read_only=True).rebuild_job() == {**job, "erased": [ALICE], "erasing": []}
    assert rebuild.checkpoint(ALICE) == {"analyses": 2}  # recording the job and the erasure commits nothing


def test_catalog_a_shard_owes_its_erasure_from_before_its_commit_of_forgets_until_it_is_erased(
    catalog: ViewCatalog,
) -> None:
    """``note_forgets`` comes before the commit: whoever sees the checkpoint reach past a forget also sees the
    erasure owed (and, in a rebuild, the partition among those the switch must treat as erased)."""
    _view_with(catalog, None, "live")
    job = {"group": "t-rebuild-r1", "topic": "analyses", "targets": {"0": 2, "1": 0}, "until_time": None}
    rebuild = catalog.open_view("r1", bulk=True, optimize_every=0)
    rebuild.bind(PARTITIONS)
    rebuild.record_rebuild_job(job)
    rebuild.commit(ALICE, _alice("kept"), {"analyses": 1})
    reader = catalog.open_view("r1", read_only=True)
    rebuild.note_forgets(ALICE)
    assert reader.rebuild_job() == {**job, "erased": [ALICE], "erasing": [ALICE]}
    rebuild.commit(ALICE, [Delete("messages", "m1")], {"analyses": 2})
    assert reader.rebuild_job()["erasing"] == [ALICE] and reader.checkpoint(ALICE) == {"analyses": 2}
    assert rebuild.erase_history(ALICE) == []
    assert reader.rebuild_job() == {**job, "erased": [ALICE], "erasing": []}
    with pytest.raises(StoreError, match="read-only"):
        reader.note_forgets(ALICE)


def test_lancedb_a_writer_that_claims_a_shard_owing_its_erasure_erases_it_first(lance_root: StoreLocation) -> None:
    """A writer that committed a forget and stopped before ``erase_history`` leaves the deleted row in an old
    version; the next writer to claim the shard erases it before anything else, and removes the other views."""
    root = lance_root
    views = open_views(root)
    then = views.open_view("then", optimize_every=0)
    then.bind(1)
    then.commit(0, [Upsert("messages", message("default:alice", "m1", "zanzibarquokka", (1.0, 0.0, 0.0)))], {"a": 1})
    first = views.open_view("main", optimize_every=0)
    first.bind(1)
    first.commit(0, [Upsert("messages", message("default:alice", "m1", "zanzibarquokka", (1.0, 0.0, 0.0)))], {"a": 1})
    first.commit(0, [Upsert("messages", message("default:alice", "m2", "kept words", (0.0, 1.0, 0.0)))], {"a": 2})
    first.note_forgets(0)
    first.commit(0, [Delete("messages", "m1")], {"a": 3})
    first.close()  # stopped before its erasure

    def versions() -> int:
        reader = open_store(root, read_only=True)
        assert isinstance(reader, LanceStore)
        shard = reader._shard(0, create=False)
        assert shard is not None
        return len(shard.get("messages").list_versions())

    assert versions() > 1 and views.views() == ["main", "then"]
    second = views.open_view("main", optimize_every=0)
    assert second.checkpoint(0) == {"a": 3}  # claiming the shard erased it first
    assert versions() == 1 and views.views() == ["main"]
    assert [h.row.id for h in second.text_search("messages", "default:alice", "kept", 5)] == ["m2"]
    assert second.text_search("messages", "default:alice", "zanzibarquokka", 5) == []
    second.commit(0, [Upsert("messages", message("default:alice", "m3", "more words", (0.0, 0.0, 1.0)))], {"a": 4})
    second.close()
    third = views.open_view("main", optimize_every=0)
    assert third.checkpoint(0) == {"a": 4} and versions() > 1  # nothing owed: the next claim erases nothing
    third.close()


def test_catalog_views_keep_their_own_generation_and_checkpoints(catalog: ViewCatalog) -> None:
    _view_with(catalog, None, "g1")
    g2 = catalog.open_view("g2", optimize_every=0)
    g2.bind(PARTITIONS)
    g2.record_generation({"name": "g2"})
    g2.commit(ALICE, [], {"analyses.g2": 9})
    main = catalog.open_view("main", read_only=True)
    assert main.generation() == {"name": "g1"} and main.checkpoint(ALICE) == {"analyses": 1}
    assert catalog.open_view("g2", read_only=True).checkpoint(ALICE) == {"analyses.g2": 9}
