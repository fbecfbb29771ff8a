"""Deterministic ids: UUIDv5 of the owner, the kind of thing, and the content or event ids it stands for."""

from __future__ import annotations

import hashlib
import uuid
from functools import lru_cache

__all__ = ["FOLDS_NAMESPACE", "edge_id", "grant_row_id", "node_id", "record_id", "trait_id"]

FOLDS_NAMESPACE = uuid.UUID("5f0f3c1e-6a3b-4c59-9d1e-ada0e0000002")
"""Namespace of every id the folds derive (the events use ``...0001``)."""


_NS = FOLDS_NAMESPACE.bytes


def _id(*parts: str) -> str:
    # uuid.uuid5 spelled out: the same ids, without building a UUID object per row (a hot path)
    b = bytearray(hashlib.sha1(_NS + "\x1f".join(parts).encode()).digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x50
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def record_id(owner_id: str, origin: str, record_type: str, content_key: str) -> str:
    """Episodic record made from ``origin`` (a message or control event id) for one extracted item."""
    return _id("episodic", owner_id, origin, record_type, content_key)


def grant_row_id(owner_id: str, grant_id: str) -> str:
    """Row of one owner's grant: a grant id another owner also used never reaches this owner's row."""
    return _id("grant", owner_id, grant_id)


def trait_id(owner_id: str, kind: str, key: str, value: str) -> str:
    """Persona trait of a kind, key and normalised value (corrections derive theirs from the event)."""
    return _id("persona", owner_id, kind, key, value)


@lru_cache(maxsize=1 << 16)
def node_id(owner_id: str, node_type: str, ref_id: str) -> str:
    """Graph node standing for a message, a record or a normalised topic."""
    return _id("node", owner_id, node_type, ref_id)


def edge_id(owner_id: str, edge_type: str, src: str, dst: str) -> str:
    """Graph edge of a type between two nodes (directed: ``src`` → ``dst``)."""
    return _id("edge", owner_id, edge_type, src, dst)
