"""A tenant's domain packs around any extractor: terms expanded before extraction, typed mentions after.

For a message of a tenant with packs (``adamem.packs.PackSelection``), the text the wrapped
extractor reads has each pack's terms expanded (``BP`` → ``blood pressure``; in Chinese text
``BP`` → ``血压``), and the analysis gains one fact of type ``term:<type>`` per lexicon term the
expanded text mentions (``term:symptom`` ``headache``), whose terms also join the entities. The
event keeps the message as it was sent; what the packs changed is in the recorded analysis, so
replay reproduces it without the packs.
"""

from __future__ import annotations

import dataclasses

from adamem.analysis import Extraction, Extractor
from adamem.analysis.timeexpr_zh import has_cjk
from adamem.events import ChatMessage, ExtractedFact
from adamem.packs import TERM_PREFIX, PackSelection

__all__ = ["PackExtractor"]

MENTION_CONFIDENCE = 0.9
"""Confidence of a typed mention: a lexicon term found as written."""


class PackExtractor:
    """Wraps an extractor with the domain packs of each message's tenant (others pass through unchanged)."""

    def __init__(self, extractor: Extractor, selection: PackSelection) -> None:
        self.extractor = extractor
        self.selection = selection
        self.name = extractor.name
        # The packs are part of the analyzer: another selection is another analysis (and other event ids).
        self.version = f"{extractor.version}+packs.{selection.digest[:12]}"
        self.model = extractor.model

    def extract(self, message: ChatMessage) -> Extraction:
        """The wrapped extractor's analysis of the expanded text, with the packs' typed mentions."""
        packs = self.selection.packs_for(message.tenant)
        if not packs:
            return self.extractor.extract(message)
        chinese = has_cjk(message.text)
        text = message.text
        for pack in packs:
            text = pack.expand(text, chinese)
        z = self.extractor.extract(dataclasses.replace(message, text=text) if text != message.text else message)
        mentions: dict[tuple[str, str], None] = {}
        for pack in packs:
            for found in pack.mentions(text):
                mentions.setdefault(found, None)
        if not mentions:
            return z
        typed = tuple(ExtractedFact(term, MENTION_CONFIDENCE, f"{TERM_PREFIX}{kind}") for kind, term in mentions)
        entities = tuple(dict.fromkeys([*z.entities, *(term for _, term in mentions)]))
        return dataclasses.replace(z, facts=z.facts + typed, entities=entities)
