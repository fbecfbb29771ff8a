"""Adaptive retrieval over the four memory layers: whose memory, routing, base retrieval, graph expansion, fusion.

Pure where possible; the only I/O is through the ``MemoryStore`` port and the ``Embedder`` port.
Entry point: ``Retriever(store, embedder, config=SEED_DEFAULT).query(owner_id, question)``.
"""

from adamem.retrieval.answer import Answer, Item, PathStep, Provenance, Timing
from adamem.retrieval.config import (
    PAPER_V2,
    SEED_DEFAULT,
    BaseFusion,
    CacheSettings,
    Direction,
    FusionWeights,
    Layer,
    RetrievalConfig,
    Route,
    SearchSource,
    Subject,
)
from adamem.retrieval.errors import UnknownOwner
from adamem.retrieval.fusion import Breakdown
from adamem.retrieval.route import RoutePlan, route_query
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.retrieval.whose import WhoseDecision, whose_memory

__all__ = [
    "PAPER_V2",
    "SEED_DEFAULT",
    "Answer",
    "AsOf",
    "BaseFusion",
    "Breakdown",
    "CacheSettings",
    "Direction",
    "FusionWeights",
    "Item",
    "Layer",
    "PathStep",
    "Provenance",
    "RetrievalConfig",
    "Retriever",
    "Route",
    "RoutePlan",
    "SearchSource",
    "Subject",
    "Timing",
    "UnknownOwner",
    "WhoseDecision",
    "route_query",
    "whose_memory",
]
