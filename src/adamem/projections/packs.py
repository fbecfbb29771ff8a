"""The fold-side parts of domain packs: each tenant's ``MemoryParameters`` (pace overrides and relations).

The projector reads them from the packs the store's analysis generation recorded
(``streams.generations``), never from the environment or a file, so replay equals live.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from adamem.errors import ConfigError
from adamem.owners import split_owner
from adamem.packs import PackSelection
from adamem.projections.folds.params import MemoryParameters
from adamem.projections.store.ports import MemoryStore

__all__ = ["PACE_FIELDS", "owner_parameters", "pack_parameters", "recorded_parameters"]

PACE_FIELDS: dict[str, type] = {
    f.name: type(f.default)
    for f in dataclasses.fields(MemoryParameters)
    if isinstance(f.default, (int, float)) and not isinstance(f.default, bool)
}
"""The ``MemoryParameters`` a pack's ``[pace]`` may set, and their kinds (int or float)."""


def pack_parameters(selection: PackSelection, base: MemoryParameters) -> dict[str, MemoryParameters]:
    """``base`` with each tenant's pace overrides and relations (a later pack wins on a shared field).

    A pace key that is not a numeric memory parameter, or a float for an integer one, is a
    ``ConfigError`` naming the pack and the key.
    """
    out = {}
    for tenant, packs in selection.by_tenant:
        pace: dict[str, Any] = {}
        relations: list[tuple[str, str, str, float]] = []
        for pack in packs:
            for key, value in pack.pace:
                kind = PACE_FIELDS.get(key)
                if kind is None:
                    raise ConfigError(
                        f"domain pack {pack.name}: pace.{key}: not a memory parameter; one of {', '.join(PACE_FIELDS)}"
                    )
                if kind is int and not isinstance(value, int):
                    raise ConfigError(f"domain pack {pack.name}: pace.{key}: must be an integer")
                pace[key] = kind(value)
            relations += [(r.from_type, r.to_type, r.name, r.weight) for r in pack.relations]
        out[tenant] = dataclasses.replace(base, **pace, relations=tuple(dict.fromkeys(relations)))
    return out


def recorded_parameters(store: MemoryStore, base: MemoryParameters) -> dict[str, MemoryParameters]:
    """Per-tenant fold parameters from the domain packs the store's generation records (``{}``: none)."""
    recorded = (store.generation() or {}).get("packs_content", "")
    return pack_parameters(PackSelection.from_record(recorded), base) if recorded else {}


def owner_parameters(table: Mapping[str, MemoryParameters], owner_id: str, base: MemoryParameters) -> MemoryParameters:
    """An owner's parameters from a ``recorded_parameters`` table: its tenant's, else those of ``*``, else ``base``."""
    if not table:
        return base
    return table.get(split_owner(owner_id)[0]) or table.get("*") or base
