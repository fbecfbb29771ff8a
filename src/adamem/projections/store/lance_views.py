"""The views of a LanceDB store: generations of its tables side by side, one named active by ``CURRENT``.

Layout: ``ROOT/CURRENT`` names the active view; ``ROOT/views/<view>/`` holds a view (its
``meta.json`` and one folder per shard). A rebuild writes a new view beside the active one and
switches by replacing ``CURRENT`` atomically: readers keep reading the old view until the switch
and follow it on their next call.
"""

from __future__ import annotations

from pathlib import Path

from adamem.errors import StoreError
from adamem.projections.store.location import Location
from adamem.projections.store.ports import DEFAULT_VIEW

__all__ = ["DEFAULT_VIEW", "current_view", "list_views", "remove_other_views", "switch_view"]


def _loc(root: str | Path | Location) -> Location:
    return root if isinstance(root, Location) else Location(root)


def current_view(root: str | Path | Location) -> str:
    """Name of the active view of a store (``main`` when none was switched to)."""
    name = (_loc(root).read_text("CURRENT") or "").strip()
    return name or DEFAULT_VIEW


def list_views(root: str | Path | Location) -> list[str]:
    """Views present in a store."""
    return _loc(root).dirs("views")


def switch_view(root: str | Path | Location, name: str) -> None:
    """Make ``name`` the active view, atomically (a local temp file fsynced and renamed, or one PUT)."""
    if name not in list_views(root):
        raise StoreError(f"store {root} has no view {name!r}; views: {list_views(root)}")
    _loc(root).write_text("CURRENT", name + "\n")


def remove_other_views(root: str | Path | Location, keep: str) -> list[str]:
    """Delete every view but ``keep`` (after a forget they may hold what was forgotten); their names."""
    removed = []
    for name in list_views(root):
        if name != keep:
            _loc(root).remove_tree(f"views/{name}")
            removed.append(name)
    return removed
