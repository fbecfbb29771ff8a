"""Errors of the query side; they live in ``adamem.errors`` with the rest of the tree."""

from __future__ import annotations

from adamem.errors import ItemNotFound, UnknownOwner

__all__ = ["ItemNotFound", "UnknownOwner"]
