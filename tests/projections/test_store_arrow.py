"""The store's Arrow fast path: column-built tables equal the row-dict tables the store used to write."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pyarrow as pa
import pytest

from adamem.projections.folds.rows import TABLES, MessageRow, Row
from adamem.projections.folds.testing import fold, scenario
from adamem.projections.store.base import TEXT_FIELDS, text_parts
from adamem.projections.store.lance_arrow import arrow_schema, row_from_dict, row_tokens, rows_from_arrow, rows_to_arrow
from adamem.text import search_text

DIM = 4


def reference(table: str, rows: list[Row], dim: int) -> pa.Table:
    """The table as the store built it before: one dict per row, vectors as lists, tokens from the joined text."""
    out = []
    for row in rows:
        d: dict[str, Any] = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}  # type: ignore[arg-type]
        if "vector" in d:
            d["vector"] = list(d["vector"]) if d["vector"] else [0.0] * dim
        if table in TEXT_FIELDS:
            d["tokens"] = search_text(" ".join(text_parts(table, row)))
        out.append(d)
    return pa.Table.from_pylist(out, schema=arrow_schema(table, dim))


def scenario_rows() -> dict[str, list[Row]]:
    state, _ = fold(scenario())
    return {t: [state.tables[t][i] for i in sorted(state.tables[t])] for t in TABLES}


@pytest.mark.parametrize("table", TABLES)
def test_column_built_tables_equal_row_dict_tables(table: str) -> None:
    rows = scenario_rows()[table]
    assert rows
    built = rows_to_arrow(table, rows, arrow_schema(table, DIM))
    assert built.equals(reference(table, rows, DIM))


def test_empty_vectors_become_zeros_and_a_wrong_dimension_is_refused() -> None:
    msg = scenario_rows()["messages"][0]
    assert isinstance(msg, MessageRow)
    wide = (1e300, -1e300, 3.4028235e38, -0.0)  # beyond float32: infinity, as Arrow rounds a Python float
    rows: list[Row] = [dataclasses.replace(msg, id="a", vector=()), msg, dataclasses.replace(msg, id="b", vector=wide)]
    assert rows_to_arrow("messages", rows, arrow_schema("messages", DIM)).equals(reference("messages", rows, DIM))
    with pytest.raises(ValueError, match="3 values"):
        rows_to_arrow("messages", [dataclasses.replace(msg, vector=(1.0, 0.0, 0.0))], arrow_schema("messages", DIM))


def test_tokens_of_long_and_repeated_texts_are_the_search_text() -> None:
    msg = scenario_rows()["messages"][0]
    assert isinstance(msg, MessageRow)
    for text in ("I went hiking with my dogs — 我喜欢吃辣的", "running shoes " * 400):
        row = dataclasses.replace(msg, text=text, extraction_json="")
        assert row_tokens("messages", row) == row_tokens("messages", row) == search_text(f"{row.speaker} {text}")


def test_tokens_field_by_field_are_the_tokens_of_the_joined_fields() -> None:
    msg = scenario_rows()["messages"][0]
    assert isinstance(msg, MessageRow)
    pieces = [
        "",
        " ",
        "Alice",
        "rock'",
        "n roll",
        "'s",
        "it's",
        "我喜欢",
        "吃辣的",
        "ΟΔΟΣ Σ",
        "İstanbul",
        "x y ",
        "the",
    ]
    for speaker in pieces:
        for text in pieces:
            row = dataclasses.replace(msg, speaker=speaker, text=text, extraction_json="")
            assert row_tokens("messages", row) == search_text(f"{speaker} {text}"), (speaker, text)


@pytest.mark.parametrize(
    ("text", "fact", "attribute", "event"),
    [
        (
            "Guess where I start on Monday!",
            "Alice joined Acme as a designer",
            ("employer", "Acme"),
            "started a new job",
        ),
        ("下周一我就去报到了！", "Alice 加入了 星辰科技", ("employer", "星辰科技"), "开始新工作"),
    ],
)
def test_a_messages_tokens_hold_the_words_of_its_extraction(
    text: str, fact: str, attribute: tuple[str, str], event: str
) -> None:
    """A message is found by the store's full-text index through what was extracted from it, as by the query
    process's own index: the words of its facts, attributes and events follow its speaker's and text's."""
    msg = scenario_rows()["messages"][0]
    assert isinstance(msg, MessageRow)
    extraction = {
        "facts": [{"content": fact}],
        "attributes": [{"key": attribute[0], "value": attribute[1]}],
        "events": [{"content": event}],
    }
    row = dataclasses.replace(msg, speaker="Alice", text=text, extraction_json=json.dumps(extraction))
    said = search_text(f"Alice {text}")
    extracted = search_text(f"{fact} {attribute[0]} {attribute[1]} {event}")
    assert row_tokens("messages", row) == f"{said} {extracted}"
    assert not set(extracted.split()) <= set(said.split())  # the extraction adds words the text does not hold
    assert row_tokens("messages", dataclasses.replace(row, extraction_json="")) == said


def test_vectors_read_from_the_log_are_written_from_their_kept_bytes() -> None:
    from adamem.events import Float32Vector, MessageAnalyzed
    from adamem.projections.folds.apply import Positioned
    from adamem.schemas.serde import decode_event, encode_event

    events = [  # the analyses as read from the log (the scenario's control events have no UUID ids)
        Positioned(decode_event(encode_event(p.event)), p.topic, p.partition, p.offset)
        if isinstance(p.event, MessageAnalyzed)
        else p
        for p in scenario()
    ]
    state, _ = fold(events)
    for table in ("messages", "episodic"):
        rows = [state.tables[table][i] for i in sorted(state.tables[table])]
        assert all(type(r.vector) is Float32Vector and r.vector.packed for r in rows)  # type: ignore[union-attr]
        assert rows_to_arrow(table, rows, arrow_schema(table, DIM)).equals(reference(table, rows, DIM))


def test_a_table_made_before_the_utc_offset_column_reads_it_as_null(tmp_path: Any) -> None:
    """A messages table of an older store (no ``utc_offset_minutes`` column) is written and read as it is."""
    import lancedb

    rows = scenario_rows()["messages"]
    assert rows
    old = pa.schema([f for f in arrow_schema("messages", DIM) if f.name != "utc_offset_minutes"])
    table = lancedb.connect(str(tmp_path)).create_table("messages", schema=old)
    table.add(rows_to_arrow("messages", [dataclasses.replace(r, utc_offset_minutes=480) for r in rows], old))  # type: ignore[type-var]
    read = rows_from_arrow("messages", table.to_arrow())
    assert sorted(read, key=lambda r: r.id) == sorted(rows, key=lambda r: r.id)
    assert {r.utc_offset_minutes for r in read} == {None}  # type: ignore[union-attr]
    assert row_from_dict("messages", table.to_arrow().to_pylist()[0]).utc_offset_minutes is None  # type: ignore[union-attr]
