"""The Memory Agent's write path: extractor and embedder ports, and what they produce."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from adamem.events import ChatMessage, ExtractedAttribute, ExtractedEvent, ExtractedFact

__all__ = ["Embedder", "Extraction", "Extractor"]


@dataclass(frozen=True, slots=True)
class Extraction:
    """What an extractor found in one message (z_t without the vector)."""

    summary: str = ""
    topics: tuple[str, ...] = ()
    sentiment: float = 0.0
    dialog_act: str = "statement"  # statement | question | request | other
    certainty: str = "certain"  # certain | possible | guess
    facts: tuple[ExtractedFact, ...] = ()
    attributes: tuple[ExtractedAttribute, ...] = ()
    events: tuple[ExtractedEvent, ...] = ()
    entities: tuple[str, ...] = ()


class Extractor(Protocol):
    """Turns a message into an ``Extraction``; ``name``/``version`` are recorded with every analysis."""

    name: str
    version: str
    model: str

    def extract(self, message: ChatMessage) -> Extraction:
        """Analyse one message."""


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per stored text (message, record), in order."""

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per question; asymmetric models (e5) embed queries differently."""
