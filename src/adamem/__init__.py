"""AdaMem Stream: four-layer conversational memory as an event-sourced stream processor.

    from adamem import Memory

    with Memory() as m:
        m.add("alice", "I moved to Lisbon last week.")
        answer = m.query("alice", "Where do I live?")

``__all__`` is the public API; every other name is internal. ``Memory`` and the names that come
with it are loaded on first use, so that importing a small part of the package (its settings, its
errors) does not load the stores and models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from adamem.errors import AdaMemError, InputError, InvalidArgument, NotFound, NotVisible
from adamem.settings import Settings

if TYPE_CHECKING:
    from adamem.memory import (
        AsyncMemory,
        Memory,
        PersonaTrait,
        RebuildReport,
        Remembered,
        TimelineEntry,
        TraitEvidence,
        UnknownUser,
    )
    from adamem.retrieval.answer import Answer
    from adamem.retrieval.research import Research

__version__ = "0.1.0"

__all__ = [
    "AdaMemError",
    "Answer",
    "AsyncMemory",
    "InputError",
    "InvalidArgument",
    "Memory",
    "NotFound",
    "NotVisible",
    "PersonaTrait",
    "RebuildReport",
    "Remembered",
    "Research",
    "Settings",
    "TimelineEntry",
    "TraitEvidence",
    "UnknownUser",
]

_LAZY = {
    "AsyncMemory": "adamem.memory",
    "Memory": "adamem.memory",
    "Remembered": "adamem.memory",
    "UnknownUser": "adamem.memory",
    "Answer": "adamem.retrieval.answer",
    "Research": "adamem.retrieval.research",
    "RebuildReport": "adamem.memory",
    "PersonaTrait": "adamem.memory",
    "TraitEvidence": "adamem.memory",
    "TimelineEntry": "adamem.memory",
}


def __getattr__(name: str) -> Any:
    """The facade's names, imported when first asked for."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'adamem' has no attribute {name!r}")
