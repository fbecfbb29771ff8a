"""Projection stores: where the folds' rows live, sharded by log partition.

A store holds one shard per log partition; a shard has one writer (the worker that owns the
partition) and records, with every commit, the log offsets its rows reflect. Adapters are chosen
by URL: a folder is LanceDB, ``memory://`` is an in-process dict for unit tests. Both pass the
contract suite in ``tests/projections/test_store_contract.py``.
"""

from adamem.projections.store.base import Hit, MemoryStore
from adamem.projections.store.factory import open_store

__all__ = ["Hit", "MemoryStore", "open_store"]
