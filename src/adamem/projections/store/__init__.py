"""Projection stores: where the folds' rows live, sharded by log partition.

A store holds one shard per log partition; a shard has one writer (the worker that owns the
partition) and records, with every commit, the log offsets its rows reflect. Adapters are chosen
by URL: a folder is LanceDB, ``memory://`` is an in-process dict for unit tests. Callers take the
port they use (``ports.py``): a ``StoreReader``, a ``StoreWriter``, both (``MemoryStore``), or the
``ViewCatalog`` of a store's views. Both adapters pass the contract suite of each port in
``tests/projections/test_store_contract.py``.
"""

from adamem.projections.store.factory import open_store, open_views
from adamem.projections.store.ports import Hit, MemoryStore, StoreReader, StoreWriter, ViewCatalog

__all__ = ["Hit", "MemoryStore", "StoreReader", "StoreWriter", "ViewCatalog", "open_store", "open_views"]
