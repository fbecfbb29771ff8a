"""What a fold hands to a store: upserts of new or changed rows and deletes of removed rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from adamem.projections.folds.rows import Row

__all__ = ["Change", "Delete", "Upsert"]


@dataclass(frozen=True, slots=True)
class Upsert:
    """Insert or replace ``row`` (by ``row.id``) in ``table``.

    ``previous`` is the row as it was before the event that wrote this one (None: the id was not
    there), as the fold's own state had it; the change feed reads the kind of change from it. It
    does not take part in equality: two upserts writing the same row are the same change.
    """

    table: str
    row: Row
    previous: Row | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        """Id of the row written."""
        return self.row.id


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove the row ``id`` from ``table``."""

    table: str
    id: str
    previous: Row | None = field(default=None, compare=False, repr=False)


Change = Upsert | Delete
