"""Adaptive retrieval over the four memory layers: whose memory, routing, base retrieval, graph expansion, fusion.

Pure where possible; the only I/O is through the ``MemoryStore`` port and the ``Embedder`` port.
Entry point: ``Retriever(store, embedder, config=SEED_DEFAULT).query(user_id, question)``.
"""

from retrieval.answer import Answer, Item, PathStep, Provenance, Timing
from retrieval.config import (
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
from retrieval.errors import UnknownOwner
from retrieval.fusion import Breakdown
from retrieval.route import RoutePlan, route_query
from retrieval.service import Retriever
from retrieval.snapshot import AsOf
from retrieval.whose import WhoseDecision, whose_memory

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
