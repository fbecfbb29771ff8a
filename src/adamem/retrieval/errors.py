"""Errors of the query side; they live in ``adamem.errors`` with the rest of the tree."""

from __future__ import annotations

from adamem.errors import UnknownOwner

__all__ = ["UnknownOwner"]
