"""Errors of the query service; ``UnknownOwner`` is meant to move into ``adamem.errors`` (under ``AdaMemError``)."""

from __future__ import annotations

from adamem.errors import AdaMemError

__all__ = ["UnknownOwner"]


class UnknownOwner(AdaMemError):
    """A query named a memory owner the store holds no memory for."""

    def __init__(self, user_id: str, store_url: str, known: list[str]) -> None:
        self.user_id = user_id
        shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
        super().__init__(
            f"no memory for user {user_id!r} in {store_url}; known owners: {shown or 'none'}. "
            "Check the user_id, or publish and project that user's messages first"
        )
