"""Row helpers on the folds' hot path give exactly what the standard library gives."""

from __future__ import annotations

import dataclasses
import random
import struct
from array import array

import pytest

from adamem.projections.folds.rows import TABLES, evolve, float32_vector
from adamem.projections.folds.testing import fold, scenario


@pytest.mark.parametrize("table", TABLES)
def test_evolve_is_dataclasses_replace(table: str) -> None:
    state, _ = fold(scenario())
    for row in list(state.tables[table].values())[:20]:
        fields = [f.name for f in dataclasses.fields(row)]  # type: ignore[arg-type]
        changes = {name: getattr(row, name) for name in fields[1::3]} | {"id": row.id + "-copy"}
        assert evolve(row, **changes) == dataclasses.replace(row, **changes)  # type: ignore[type-var]
        assert type(evolve(row)) is type(row) and evolve(row) == row
        with pytest.raises(TypeError, match="no field 'colour'"):
            evolve(row, colour="red")


def test_float32_vector_rounds_as_an_array_of_floats_does() -> None:
    rng = random.Random(7)
    cases = [
        [rng.gauss(0.0, 1.0) for _ in range(384)],
        [-0.0, 1e-46, 1e-40, 3.4028235e38, 3.5e38, -1e300, float("inf"), 1, 2**30],
        [],
    ]
    for values in cases:
        expected = tuple(array("f", values))
        for given in (values, tuple(values), iter(values)):
            got = float32_vector(given)
            assert type(got) is tuple
            assert [struct.pack("<d", x) for x in got] == [struct.pack("<d", x) for x in expected]


def test_an_embedding_read_from_the_log_is_float32_already_and_kept_as_it_is() -> None:
    from adamem.events import Float32Vector, MessageAnalyzed
    from adamem.schemas.serde import decode_event, encode_event

    event = scenario()[0].event
    assert isinstance(event, MessageAnalyzed)
    rng = random.Random(3)
    wide = dataclasses.replace(event.embedding, vector=tuple(rng.gauss(0.0, 1.0) for _ in range(384)))
    decoded = decode_event(encode_event(dataclasses.replace(event, embedding=wide)))
    assert isinstance(decoded, MessageAnalyzed)
    vector = decoded.embedding.vector
    assert type(vector) is Float32Vector
    assert float32_vector(vector) is vector
    assert vector.packed == struct.pack("<384f", *vector)
    assert float32_vector(vector) == tuple(array("f", wide.vector)) == float32_vector(wide.vector)
