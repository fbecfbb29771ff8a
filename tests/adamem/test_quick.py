"""Quick constructors (``adamem.quick``) make the same frozen objects as their classes."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from adamem.events import ChatMessage, ExtractedFact, Speaker
from adamem.projections.folds.rows import GraphEdgeRow, MessageRow, edge_row, evolve, message_row
from adamem.quick import quick_constructor


def test_a_quick_row_is_the_classes_row() -> None:
    values = ("e1", "o", "n1", "n2", "mentions", 0.5, "forward", 7, "m1")
    quick, made = edge_row(*values), GraphEdgeRow(*values)
    assert type(quick) is GraphEdgeRow
    assert quick == made and hash(quick) == hash(made) and repr(quick) == repr(made)
    assert pickle.loads(pickle.dumps(quick)) == made
    assert dataclasses.replace(quick, weight=0.7) == evolve(made, weight=0.7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.weight = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        edge_row(*values[:-1])  # every field is required, as in the class


def test_keywords_and_evolve_give_the_classes_row() -> None:
    fields = {f.name: f"v{i}" for i, f in enumerate(dataclasses.fields(MessageRow))}
    quick = message_row(**fields)
    assert type(quick) is MessageRow and quick == MessageRow(**fields)
    assert type(evolve(quick, text="t")) is MessageRow and evolve(quick, text="t").text == "t"


def test_defaults_and_default_factories_are_the_classes() -> None:
    make = quick_constructor(ChatMessage)
    args = {"event_id": "e", "user_id": "u", "conversation_id": "c", "message_id": "m", "text": "t", "occurred_at": 1}
    a, b = make(speaker=Speaker("user", "A"), **args), make(speaker=Speaker("user", "A"), **args)
    assert a == ChatMessage(speaker=Speaker("user", "A"), **args)
    assert a.tenant == "default" and a.metadata == {} and a.metadata is not b.metadata
    assert quick_constructor(ExtractedFact)("c", 0.5) == ExtractedFact("c", 0.5)


def test_only_frozen_slotted_dataclasses_without_post_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        x: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, PostInit):
        with pytest.raises(TypeError):
            quick_constructor(cls)
