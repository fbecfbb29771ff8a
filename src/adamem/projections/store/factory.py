"""Choose the projection-store adapter for a URL: the one place that names the store ports' adapters.

The ports (``ports.py``) never import their adapters; each is imported only when its URL is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adamem.errors import ConfigError
from adamem.locations import StoreLocation

if TYPE_CHECKING:
    from adamem.projections.store.ports import MemoryStore, ViewCatalog

__all__ = ["open_store", "open_views"]


def open_store(where: str | StoreLocation, *, read_only: bool = False) -> MemoryStore:
    """The store at a location (``settings.store``) or URL: ``memory://``, a folder or ``s3://bucket/prefix``.

    An ``s3://`` store reaches its object store with the location's options (endpoint, region,
    keys, ``allow_http``: ``Settings.store_options``); a bare URL carries none.
    """
    location = where if isinstance(where, StoreLocation) else StoreLocation.parse(where)
    if location.kind == "memory":
        from adamem.projections.store.memory import InMemoryStore

        return InMemoryStore()
    from adamem.projections.store.lance import LanceStore

    return LanceStore(location.root, read_only=read_only, storage_options=dict(location.options) or None)


def open_views(where: str | StoreLocation | ViewCatalog) -> ViewCatalog:
    """The view catalog of the store at a location or URL (a folder, ``lancedb://PATH``, ``s3://``), or ``where``
    if it is one.

    A catalog by URL is LanceDB's: its views are switched by replacing a file beside them.
    ``memory://`` is refused (an in-memory store's views live and die with it: use its ``open_view``).
    """
    if not isinstance(where, str | StoreLocation):
        return where
    from adamem.projections.store.lance import LanceStore

    location = where if isinstance(where, StoreLocation) else StoreLocation.parse(where)
    if location.kind == "memory":
        raise ConfigError("views (replay, reanalyze) need a store folder, not memory://; set ADAMEM_STORE to a folder")
    return LanceStore(location.root, read_only=True, storage_options=dict(location.options) or None)
