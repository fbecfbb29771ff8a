"""The Memory Agent: extractor + embedder, recording each message's analysis as an event."""

from __future__ import annotations

from collections.abc import Sequence

from adamem.analysis import Embedder, Extractor
from adamem.events import Analyzer, ChatMessage, Embedding, MessageAnalyzed, analysis_event_id

__all__ = ["MemoryAgent", "embedding_text"]


def embedding_text(message: ChatMessage) -> str:
    """What is embedded for a message: speaker and text, plus an image caption if one came with it."""
    text = f"{message.speaker.name}: {message.text}"
    caption = message.metadata.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


class MemoryAgent:
    """Analyses messages into ``MessageAnalyzed`` events (the only place models are called)."""

    def __init__(self, extractor: Extractor, embedder: Embedder, generation: str = "g1") -> None:
        self.extractor = extractor
        self.embedder = embedder
        self.generation = generation
        self.analyzer = Analyzer(extractor.name, extractor.version, extractor.model)

    def analyze(self, messages: Sequence[ChatMessage]) -> list[MessageAnalyzed]:
        """One analysis per message, in order; the texts are embedded as one batch."""
        vectors = self.embedder.embed([embedding_text(m) for m in messages]) if messages else []
        out = []
        for message, vector in zip(messages, vectors, strict=True):
            z = self.extractor.extract(message)
            out.append(
                MessageAnalyzed(
                    event_id=analysis_event_id(
                        message.event_id, self.analyzer.name, self.analyzer.version, self.generation
                    ),
                    message=message,
                    analyzer=self.analyzer,
                    embedding=Embedding(self.embedder.name, tuple(vector)),
                    generation=self.generation,
                    summary=z.summary,
                    topics=z.topics,
                    sentiment=z.sentiment,
                    dialog_act=z.dialog_act,
                    certainty=z.certainty,
                    facts=z.facts,
                    attributes=z.attributes,
                    events=z.events,
                    entities=z.entities,
                )
            )
        return out
