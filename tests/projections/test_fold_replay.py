"""Replay properties: apply twice changes nothing, no clock is read, a restarted fold equals a live one."""

from __future__ import annotations

import ast
import datetime
import os
import random
import subprocess
import sys
import time
import uuid
from array import array
from pathlib import Path

import pytest

import adamem.projections.folds as folds_pkg
from adamem.events import MessageAnalyzed
from adamem.projections.folds import Delete, OwnerMemory, Upsert, apply
from adamem.projections.folds.ids import record_id
from adamem.projections.folds.testing import T0, Chat, fold, replay_changes, scenario


def rows_of(state: OwnerMemory) -> list[object]:
    return list(state.rows())


def test_the_scenario_exercises_every_layer() -> None:
    state, _ = fold(scenario())
    t = state.tables
    assert len(t["messages"]) > 60 and len(state.working_ids()) <= 20
    assert {r.status for r in t["episodic"].values()} == {"active", "superseded"}  # type: ignore[union-attr]
    assert {r.kind for r in t["persona"].values()} >= {"preference", "habit"}  # type: ignore[union-attr]
    assert {e.edge_type for e in t["graph_edges"].values()} == {  # type: ignore[union-attr]
        "mentions",
        "supports",
        "temporal_next",
        "same_topic",
        "speaker_related",
        "similar",
        "supersedes",
    }
    assert {r.router for r in t["episodic"].values()} == {"ADD", "UPDATE", "CORRECT"}  # type: ignore[union-attr]
    assert len(t["messages"]) == sum(isinstance(e.event, MessageAnalyzed) for e in scenario()) - 1  # one forgotten
    first_tea = scenario()[4].event
    assert isinstance(first_tea, MessageAnalyzed)
    assert record_id("alice", first_tea.message.event_id, "attribute", "likes|green tea") not in t["episodic"]


def test_applying_each_event_twice_changes_nothing_the_second_time() -> None:
    once, _ = fold(scenario())
    state = OwnerMemory("default:alice")
    for e in scenario():
        state, _ = apply(state, e)
        state, again = apply(state, e)
        assert again == [], e
    assert rows_of(state) == rows_of(once)


def test_replaying_the_whole_stream_onto_the_final_state_changes_nothing() -> None:
    events = scenario()
    state, _ = fold(events)
    before = rows_of(state)
    state, changes = fold(events, state)
    assert changes == []
    assert rows_of(state) == before


def test_the_changes_are_exactly_the_rows() -> None:
    state, changes = fold(scenario())
    assert replay_changes(changes) == {(r.TABLE, r.id): r for r in state.rows()}
    # and no change re-writes a row with its current value
    seen: dict[tuple[str, str], object] = {}
    for c in changes:
        if isinstance(c, Upsert):
            assert seen.get((c.table, c.id)) != c.row
            seen[(c.table, c.id)] = c.row
        else:
            assert isinstance(c, Delete) and (c.table, c.id) in seen
            seen.pop((c.table, c.id))


def test_folds_read_no_clock_and_no_randomness(monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = fold(scenario())

    def forbidden(*_: object, **__: object) -> object:
        raise AssertionError("a fold read the clock or a random source")

    class FrozenDateTime(datetime.datetime):
        now = utcnow = today = classmethod(forbidden)  # type: ignore[assignment]

    for module, name in [
        (time, "time"),
        (time, "time_ns"),
        (time, "monotonic"),
        (time, "perf_counter"),
        (random, "random"),
        (random, "randint"),
        (uuid, "uuid1"),
        (uuid, "uuid4"),
    ]:
        monkeypatch.setattr(module, name, forbidden)
    monkeypatch.setattr(datetime, "datetime", FrozenDateTime)
    second, _ = fold(scenario())
    assert rows_of(second) == rows_of(first)


def test_fold_modules_import_nothing_but_the_standard_library_and_adamem() -> None:
    allowed_roots = {
        "adamem",
        "projections",
        "__future__",
        "collections",
        "dataclasses",
        "functools",
        "heapq",
        "json",
        "math",
        "re",
        "typing",
        "unicodedata",
        "uuid",
        "hashlib",
        "itertools",
        "operator",
        "array",
        "struct",
        "bisect",
        "numpy",  # vector arithmetic only: a test below forbids its random generators
    }
    for path in Path(folds_pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            for name in names:
                assert name.split(".")[0] in allowed_roots, f"{path.name} imports {name}"
                assert name.split(".")[0] not in {"time", "datetime", "random", "os"}
                assert not name.startswith("numpy.random"), f"{path.name} imports {name}"
            if isinstance(node, ast.Attribute):
                assert node.attr != "random", f"{path.name} reads .random (line {node.lineno})"


@pytest.mark.parametrize("cut", [1, 7, 20, 33, 47, 55, 58, 63, 70, 80])
def test_a_restarted_fold_equals_an_uninterrupted_one(cut: int) -> None:
    events = scenario()
    live, live_changes = fold(events)
    head, head_changes = fold(events[:cut])
    restarted = OwnerMemory.from_rows("default:alice", [r for r in head.rows()])
    restarted, tail_changes = fold(events[cut:], restarted)
    assert rows_of(restarted) == rows_of(live)
    assert head_changes + tail_changes == live_changes


def test_every_cut_point_restarts_identically() -> None:
    events = scenario()
    live, _ = fold(events)
    expected = rows_of(live)
    for cut in range(len(events)):
        head, _ = fold(events[:cut])
        restarted, _ = fold(events[cut:], OwnerMemory.from_rows("default:alice", head.rows()))
        assert rows_of(restarted) == expected, cut


def test_an_event_of_another_owner_is_refused() -> None:
    from adamem.projections.folds import ForeignOwnerError

    with pytest.raises(ForeignOwnerError, match="bob"):
        apply(OwnerMemory("default:alice"), Chat(user="bob").say("hi", at=T0))


_DIGEST = """
import hashlib
from adamem.projections.folds.testing import fold, scenario
state, changes = fold(scenario())
print(hashlib.sha256(repr((state.rows(), changes)).encode()).hexdigest())
"""


def test_two_processes_with_different_hash_seeds_produce_identical_rows_and_changes() -> None:
    root = Path(folds_pkg.__file__).resolve().parents[2]  # the checkout (the folder is linked into adamem/)
    digests = {
        subprocess.run(
            [sys.executable, "-c", _DIGEST],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2", "12345")
    }
    assert len(digests) == 1


def test_every_vector_is_float32_exact_so_a_float32_column_round_trips_it() -> None:
    state, _ = fold(scenario())
    vectors = [r.vector for r in state.rows() if getattr(r, "vector", ())]
    assert len(vectors) > 80
    assert all(list(v) == array("f", v).tolist() for v in vectors)
