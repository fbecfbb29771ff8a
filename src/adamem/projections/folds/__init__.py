"""Pure folds of the four memory layers (working, episodic, persona, graph) for one memory owner.

``apply(state, Positioned(event, topic, partition, offset))`` returns the state and the exact row
changes; ``OwnerMemory.from_rows`` rebuilds a state from the rows it emitted. No I/O, no clock,
no randomness: time is event time and every id is derived from content and event ids.
"""

from __future__ import annotations

from adamem.projections.folds.apply import ForeignOwnerError, Positioned, apply
from adamem.projections.folds.changes import Change, Delete, Upsert
from adamem.projections.folds.params import PAPER_V2, SEED_DEFAULT, MemoryParameters
from adamem.projections.folds.persona import is_healthy_stability, stability_index, strength_at
from adamem.projections.folds.rows import (
    TABLES,
    EpisodicRow,
    GrantRow,
    GraphEdgeRow,
    GraphNodeRow,
    MessageRow,
    OwnerRow,
    PersonaRow,
    Row,
    row_types,
)
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.folds.summary import owner_summary

__all__ = [
    "PAPER_V2",
    "SEED_DEFAULT",
    "TABLES",
    "Change",
    "Delete",
    "EpisodicRow",
    "ForeignOwnerError",
    "GrantRow",
    "GraphEdgeRow",
    "GraphNodeRow",
    "MemoryParameters",
    "MessageRow",
    "OwnerMemory",
    "OwnerRow",
    "PersonaRow",
    "Positioned",
    "Row",
    "Upsert",
    "apply",
    "is_healthy_stability",
    "owner_summary",
    "row_types",
    "stability_index",
    "strength_at",
]
