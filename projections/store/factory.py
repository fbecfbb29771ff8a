"""Choose the projection-store adapter for a URL: the one place that names the store ports' adapters.

The ports (``ports.py``) never import their adapters; each is imported only when its URL is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adamem.errors import ConfigError

if TYPE_CHECKING:
    from adamem.projections.store.ports import MemoryStore, ViewCatalog

__all__ = ["open_store", "open_views"]


def open_store(url: str, *, read_only: bool = False) -> MemoryStore:
    """The store for ``url``: ``memory://``, a folder or ``s3://bucket/prefix`` (LanceDB).

    An ``s3://`` store takes its endpoint, region, keys and ``allow_http`` from the settings
    (``ADAMEM_STORE_ENDPOINT`` …, ``Settings.store_options``).
    """
    if url.startswith("memory://"):
        from adamem.projections.store.memory import InMemoryStore

        return InMemoryStore()
    if url.startswith("s3://"):
        from adamem.projections.store.lance import LanceStore
        from adamem.settings import Settings

        return LanceStore(url, read_only=read_only, storage_options=Settings.from_env().store_options())
    if "://" in url and not url.startswith(("file://", "lancedb://")):
        raise ConfigError(f"store URL {url!r} is not memory://, s3://BUCKET/PREFIX, lancedb://PATH or a folder path")
    from adamem.projections.store.lance import LanceStore

    return LanceStore(url.removeprefix("lancedb://").removeprefix("file://"), read_only=read_only)


def open_views(url: str | ViewCatalog) -> ViewCatalog:
    """The view catalog of the store at ``url`` (a folder, ``lancedb://PATH``, ``s3://``), or ``url`` if it is one.

    A catalog by URL is LanceDB's: its views are switched by replacing a file beside them.
    ``memory://`` is refused (an in-memory store's views live and die with it: use its ``open_view``).
    """
    if not isinstance(url, str):
        return url
    from adamem.projections.store.base import store_folder
    from adamem.projections.store.lance import LanceStore

    if url.startswith("s3://"):
        from adamem.settings import Settings

        return LanceStore(url, read_only=True, storage_options=Settings.from_env().store_options())
    return LanceStore(store_folder(url), read_only=True)
