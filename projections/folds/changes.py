"""What a fold hands to a store: upserts of new or changed rows and deletes of removed rows."""

from __future__ import annotations

from dataclasses import dataclass

from adamem.projections.folds.rows import Row

__all__ = ["Change", "Delete", "Upsert"]


@dataclass(frozen=True, slots=True)
class Upsert:
    """Insert or replace ``row`` (by ``row.id``) in ``table``."""

    table: str
    row: Row

    @property
    def id(self) -> str:
        """Id of the row written."""
        return self.row.id


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove the row ``id`` from ``table``."""

    table: str
    id: str


Change = Upsert | Delete
