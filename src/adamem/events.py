"""Frozen Python models of the events on the log, one per Avro schema in ``schemas/``.

Each model converts to and from the Avro record (``to_record`` / ``from_record``) and knows its
schema's full name. Time is always ``occurred_at`` in integer milliseconds since the epoch (UTC).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from adamem.owners import owner_key
from adamem.quick import quick_constructor

__all__ = [
    "Analyzer",
    "AnswerFeedback",
    "ChatMessage",
    "ControlEvent",
    "Embedding",
    "Event",
    "ExtractedAttribute",
    "ExtractedEvent",
    "ExtractedFact",
    "Float32Vector",
    "GrantAction",
    "GrantChanged",
    "JudgedItem",
    "MemoryCompressed",
    "MemoryCorrected",
    "MemoryForgotten",
    "MemoryRead",
    "MessageAnalyzed",
    "Sealed",
    "Speaker",
    "analysis_event_id",
    "grant_event_id",
    "message_event_id",
    "ms_to_iso",
]

Role = Literal["user", "assistant", "other"]
NAMESPACE = uuid.UUID("5f0f3c1e-6a3b-4c59-9d1e-ada0e0000001")


def message_event_id(tenant: str, user_id: str, conversation_id: str, message_id: str) -> str:
    """Deterministic event id of a message: publishing it twice gives the same id."""
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(("msg", tenant, user_id, conversation_id, message_id))))


def analysis_event_id(message_event: str, analyzer: str, version: str, generation: str) -> str:
    """Deterministic event id of an analysis of one message by one analyzer generation."""
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(("ana", message_event, analyzer, version, generation))))


def grant_event_id(tenant: str, user_id: str, action: str, grant_id: str, detail: str = "") -> str:
    """Deterministic event id of a grant's change: the same request twice is the same event."""
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(("grant", tenant, user_id, action, grant_id, detail))))


def ms_to_iso(ms: int, utc_offset_minutes: int | None = None) -> str:
    """Milliseconds since the epoch as an ISO-8601 string: in UTC (``Z``), or on the clock of ``utc_offset_minutes``.

    ``ms_to_iso(1709254800000, 480)`` is ``2024-03-01T09:00:00+08:00``; an offset of None or 0 gives ``…Z``.
    """
    zone = dt.UTC if not utc_offset_minutes else dt.timezone(dt.timedelta(minutes=utc_offset_minutes))
    return dt.datetime.fromtimestamp(ms / 1000, tz=zone).isoformat().replace("+00:00", "Z")


def _ms(value: Any) -> int:
    """fastavro hands timestamp-millis back as aware datetimes; the models keep integers."""
    if isinstance(value, dt.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who said a message: their role towards the memory owner and their name."""

    role: Role
    name: str


@dataclass(frozen=True, slots=True)
class Sealed:
    """An AEAD ciphertext of an event's free text, as it is on the log (see ``adamem.schemas.sealing``)."""

    scheme: str
    nonce: bytes
    ciphertext: bytes

    def to_record(self) -> dict[str, Any]:
        """The Avro record of the ciphertext."""
        return {"scheme": self.scheme, "nonce": self.nonce, "ciphertext": self.ciphertext}

    @classmethod
    def from_record(cls, r: dict[str, Any] | None) -> Sealed | None:
        """Build from a decoded Avro record (None stays None)."""
        return None if r is None else _SEALED(str(r["scheme"]), bytes(r["nonce"]), bytes(r["ciphertext"]))


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """A chat message, appended to the messages topic keyed by ``user_id``."""

    SCHEMA: ClassVar[str] = "adamem.events.ChatMessage"

    event_id: str
    user_id: str
    conversation_id: str
    message_id: str
    speaker: Speaker
    text: str
    occurred_at: int
    tenant: str = "default"
    metadata: dict[str, str] = field(default_factory=dict)
    schema_version: int = 1
    # The ciphertext of text, speaker name and metadata as on the log (None: written in the clear).
    sealed: Sealed | None = None
    # Sealed, and its key was not there to open it (forgotten, lost, or no keystore given): the
    # text, speaker name and metadata are empty and unknowable.
    shredded: bool = False
    # The speaker's offset from UTC in minutes as the producer stated it; None: not stated (shown in UTC).
    utc_offset_minutes: int | None = None

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event; a sealed message's free text is only in its ciphertext."""
        sealed = self.sealed is not None
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "conversation_id": self.conversation_id,
            "message_id": self.message_id,
            "speaker": {"role": self.speaker.role, "name": "" if sealed else self.speaker.name},
            "text": "" if sealed else self.text,
            "occurred_at": self.occurred_at,
            "metadata": {} if sealed else dict(self.metadata),
            "sealed": None if self.sealed is None else self.sealed.to_record(),
            "utc_offset_minutes": self.utc_offset_minutes,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> ChatMessage:
        """Build from a decoded Avro record."""
        return _CHAT_MESSAGE(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            conversation_id=r["conversation_id"],
            message_id=r["message_id"],
            speaker=_SPEAKER(role=r["speaker"]["role"], name=r["speaker"]["name"]),
            text=r["text"],
            occurred_at=_ms(r["occurred_at"]),
            metadata=dict(r.get("metadata") or {}),
            schema_version=int(r.get("schema_version", 1)),
            sealed=Sealed.from_record(r.get("sealed")),
            # sealed on the log: shredded unless ``sealing.open_message_record`` opened it (and said so)
            shredded=bool(r.get("shredded", r.get("sealed") is not None)),
            utc_offset_minutes=r.get("utc_offset_minutes"),
        )


@dataclass(frozen=True, slots=True)
class Analyzer:
    """Name, version and model of the extractor that made an analysis."""

    name: str
    version: str
    model: str = ""


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    """A fact stated in a message; facts with the same non-empty ``key`` conflict."""

    content: str
    confidence: float
    type: str = "general"
    key: str = ""


@dataclass(frozen=True, slots=True)
class ExtractedAttribute:
    """An attribute of the speaker, e.g. ``likes`` = ``spicy food``."""

    key: str
    value: str
    confidence: float


@dataclass(frozen=True, slots=True)
class ExtractedEvent:
    """An event bounded in time, with its time expression resolved against ``occurred_at``."""

    content: str
    confidence: float
    when: int | None = None
    when_text: str = ""


class Float32Vector(tuple[float, ...]):
    """A vector whose values are float32 already: read from an Avro ``float`` array (rounding it again is a no-op).

    ``projections.folds.rows.float32_vector`` returns such a vector as it is instead of copying it.
    ``packed`` holds the values' little-endian float32 bytes when the decoder kept them (else
    None), so a float32 column can take them as they are.
    """

    packed: bytes | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Float32Vector:
        """The vector of decoded Avro floats, with their bytes if the decoder kept them."""
        vector = cls(values)
        packed = getattr(values, "packed", None)
        if packed is not None:
            vector.packed = packed
        return vector


@dataclass(frozen=True, slots=True)
class Embedding:
    """A vector and the embedder (name and version) that made it."""

    model: str
    vector: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class MessageAnalyzed:
    """z_t: the Memory Agent's recorded analysis of one message (carries the message)."""

    SCHEMA: ClassVar[str] = "adamem.events.MessageAnalyzed"

    event_id: str
    message: ChatMessage
    analyzer: Analyzer
    embedding: Embedding
    generation: str = "g1"
    summary: str = ""
    topics: tuple[str, ...] = ()
    sentiment: float = 0.0
    dialog_act: str = "statement"
    certainty: str = "certain"
    facts: tuple[ExtractedFact, ...] = ()
    attributes: tuple[ExtractedAttribute, ...] = ()
    events: tuple[ExtractedEvent, ...] = ()
    entities: tuple[str, ...] = ()
    schema_version: int = 1
    # The ciphertext of the derived fields and the vector as on the log (None: written in the clear).
    sealed: Sealed | None = None

    @property
    def shredded(self) -> bool:
        """Sealed content that could not be opened: the message and what was derived from it are unknowable."""
        return self.message.shredded

    @property
    def user_id(self) -> str:
        """Memory owner (partition key)."""
        return self.message.user_id

    @property
    def owner_id(self) -> str:
        """The memory owner's key, that of the analysed message."""
        return self.message.owner_id

    @property
    def tenant(self) -> str:
        """The tenant of the analysed message."""
        return self.message.tenant

    @property
    def causation_id(self) -> str:
        """Event id of the analysed message."""
        return self.message.event_id

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event; a sealed analysis's derived fields are only in its ciphertext."""
        if self.sealed is not None:
            return {
                **self.content_record(),
                "summary": "",
                "topics": [],
                "facts": [],
                "attributes": [],
                "events": [],
                "entities": [],
                "embedding": {"model": self.embedding.model, "vector": []},
                "sealed": self.sealed.to_record(),
            }
        return {**self.content_record(), "sealed": None}

    def content_record(self) -> dict[str, Any]:
        """The Avro record of this event with its derived fields in the clear (never the wire form of a sealed one)."""
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "causation_id": self.message.event_id,
            "generation": self.generation,
            "message": self.message.to_record(),
            "analyzer": {"name": self.analyzer.name, "version": self.analyzer.version, "model": self.analyzer.model},
            "summary": self.summary,
            "topics": list(self.topics),
            "sentiment": self.sentiment,
            "dialog_act": self.dialog_act,
            "certainty": self.certainty,
            "facts": [
                {"content": f.content, "type": f.type, "key": f.key, "confidence": f.confidence} for f in self.facts
            ],
            "attributes": [{"key": a.key, "value": a.value, "confidence": a.confidence} for a in self.attributes],
            "events": [
                {"content": e.content, "when": e.when, "when_text": e.when_text, "confidence": e.confidence}
                for e in self.events
            ],
            "entities": list(self.entities),
            "embedding": {"model": self.embedding.model, "vector": list(self.embedding.vector)},
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> MessageAnalyzed:
        """Build from a decoded Avro record."""
        return _MESSAGE_ANALYZED(
            event_id=str(r["event_id"]),
            message=ChatMessage.from_record(r["message"]),
            analyzer=_ANALYZER(**r["analyzer"]),
            embedding=_EMBEDDING(model=r["embedding"]["model"], vector=Float32Vector.of(r["embedding"]["vector"])),
            generation=r.get("generation", "g1"),
            summary=r.get("summary", ""),
            topics=tuple(r.get("topics", ())),
            sentiment=float(r.get("sentiment", 0.0)),
            dialog_act=r.get("dialog_act", "statement"),
            certainty=r.get("certainty", "certain"),
            facts=tuple(_FACT(**f) for f in r.get("facts", ())),
            attributes=tuple(_ATTRIBUTE(**a) for a in r.get("attributes", ())),
            events=tuple(
                _EVENT(
                    content=e["content"],
                    confidence=e["confidence"],
                    when=None if e.get("when") is None else _ms(e["when"]),
                    when_text=e.get("when_text", ""),
                )
                for e in r.get("events", ())
            ),
            entities=tuple(r.get("entities", ())),
            schema_version=int(r.get("schema_version", 1)),
            sealed=Sealed.from_record(r.get("sealed")),
        )


@dataclass(frozen=True, slots=True)
class MemoryForgotten:
    """The owner asked to forget one item, one message, or everything (``scope='user'``)."""

    SCHEMA: ClassVar[str] = "adamem.events.MemoryForgotten"

    event_id: str
    user_id: str
    scope: Literal["item", "message", "user"]
    occurred_at: int
    target_id: str | None = None
    reason: str = ""
    tenant: str = "default"
    schema_version: int = 1

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event."""
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "scope": self.scope,
            "target_id": self.target_id,
            "reason": self.reason,
            "occurred_at": self.occurred_at,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> MemoryForgotten:
        """Build from a decoded Avro record."""
        return cls(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            scope=r["scope"],
            target_id=r.get("target_id"),
            reason=r.get("reason", ""),
            occurred_at=_ms(r["occurred_at"]),
            schema_version=int(r.get("schema_version", 1)),
        )


@dataclass(frozen=True, slots=True)
class MemoryCorrected:
    """A memory item was corrected; the old value stays as superseded history."""

    SCHEMA: ClassVar[str] = "adamem.events.MemoryCorrected"

    event_id: str
    user_id: str
    item_id: str
    content: str
    occurred_at: int
    confidence: float = 1.0
    reason: str = ""
    tenant: str = "default"
    schema_version: int = 1

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event."""
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "item_id": self.item_id,
            "content": self.content,
            "confidence": self.confidence,
            "reason": self.reason,
            "occurred_at": self.occurred_at,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> MemoryCorrected:
        """Build from a decoded Avro record."""
        return cls(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            item_id=r["item_id"],
            content=r["content"],
            confidence=float(r.get("confidence", 1.0)),
            reason=r.get("reason", ""),
            occurred_at=_ms(r["occurred_at"]),
            schema_version=int(r.get("schema_version", 1)),
        )


@dataclass(frozen=True, slots=True)
class JudgedItem:
    """One item of an answer, and whether it helped the owner's side."""

    item_id: str
    layer: str  # working | archive | episodic | persona | graph
    kind: str  # message | event | fact | attribute | preference | preference_cluster | trait | habit
    helped: bool


@dataclass(frozen=True, slots=True)
class AnswerFeedback:
    """Which items of an answer helped and which did not; the owner's answer style is folded from these."""

    SCHEMA: ClassVar[str] = "adamem.events.AnswerFeedback"

    event_id: str
    user_id: str
    items: tuple[JudgedItem, ...]
    occurred_at: int
    tenant: str = "default"
    schema_version: int = 1

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event."""
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "items": [{"item_id": i.item_id, "layer": i.layer, "kind": i.kind, "helped": i.helped} for i in self.items],
            "occurred_at": self.occurred_at,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> AnswerFeedback:
        """Build from a decoded Avro record."""
        return cls(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            items=tuple(
                JudgedItem(str(i["item_id"]), str(i["layer"]), str(i["kind"]), bool(i["helped"])) for i in r["items"]
            ),
            occurred_at=_ms(r["occurred_at"]),
            schema_version=int(r.get("schema_version", 1)),
        )


@dataclass(frozen=True, slots=True)
class MemoryCompressed:
    """A cluster of the owner's episodic records was distilled into one summary record (``adamem.compression``).

    Recorded like an analysis: replay folds the summary from this event and never runs the
    compressor again. ``source_record_ids`` are the distilled records (they stay, marked
    ``compressed``), ``source_message_ids`` the union of their messages (the summary's provenance).
    ``occurred_at`` is the latest source record's event time, never a clock.
    """

    SCHEMA: ClassVar[str] = "adamem.events.MemoryCompressed"

    event_id: str
    user_id: str
    key: str
    content: str
    source_record_ids: tuple[str, ...]
    source_message_ids: tuple[str, ...]
    span_from: int
    span_to: int
    occurred_at: int
    compressor: str
    compressor_version: str
    vector: tuple[float, ...] = ()
    embedding_model: str = ""
    tenant: str = "default"
    schema_version: int = 1
    # The ciphertext of key, content and vector as on the log (None: written in the clear).
    sealed: Sealed | None = None
    # Sealed, and a source message's key was not there to open it: key, content and vector are empty.
    shredded: bool = False

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event; a sealed one's key, content and vector are only in its ciphertext."""
        sealed = self.sealed is not None
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "key": "" if sealed else self.key,
            "content": "" if sealed else self.content,
            "source_record_ids": list(self.source_record_ids),
            "source_message_ids": list(self.source_message_ids),
            "span_from": self.span_from,
            "span_to": self.span_to,
            "occurred_at": self.occurred_at,
            "compressor": self.compressor,
            "compressor_version": self.compressor_version,
            "vector": [] if sealed else list(self.vector),
            "embedding_model": self.embedding_model,
            "sealed": None if self.sealed is None else self.sealed.to_record(),
        }

    def content_record(self) -> dict[str, Any]:
        """This event with key, content and vector in the clear, ``sealed`` a flag (for display, never the wire)."""
        opened = {**self.to_record(), "key": self.key, "content": self.content, "vector": list(self.vector)}
        return {**opened, "sealed": self.sealed is not None}

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> MemoryCompressed:
        """Build from a decoded Avro record."""
        return cls(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            key=r["key"],
            content=r["content"],
            source_record_ids=tuple(r["source_record_ids"]),
            source_message_ids=tuple(r["source_message_ids"]),
            span_from=_ms(r["span_from"]),
            span_to=_ms(r["span_to"]),
            occurred_at=_ms(r["occurred_at"]),
            compressor=r["compressor"],
            compressor_version=r["compressor_version"],
            vector=Float32Vector.of(r.get("vector") or ()),
            embedding_model=r.get("embedding_model", ""),
            schema_version=int(r.get("schema_version", 1)),
            sealed=Sealed.from_record(r.get("sealed")),
            # sealed on the log: shredded unless ``sealing.open_compression_record`` opened it (and said so)
            shredded=bool(r.get("shredded", r.get("sealed") is not None)),
        )


GrantAction = Literal["granted", "confirmed", "revoked"]


@dataclass(frozen=True, slots=True)
class GrantChanged:
    """The owner granted another tenant read access to a scope of their memory, confirmed it, or revoked it.

    Only ``granted`` carries the scope (``grantee_tenant``, ``layers``, ``topics``, ``scope_from``,
    ``scope_until``, ``include_sensitive``, ``expires_at``); the other actions name the grant alone.
    """

    SCHEMA: ClassVar[str] = "adamem.events.MemoryGrantChanged"

    event_id: str
    user_id: str
    grant_id: str
    action: GrantAction
    occurred_at: int
    grantee_tenant: str = ""
    layers: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    scope_from: int | None = None
    scope_until: int | None = None
    include_sensitive: bool = False
    expires_at: int | None = None
    reason: str = ""
    tenant: str = "default"
    schema_version: int = 1

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event."""
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "grant_id": self.grant_id,
            "action": self.action,
            "grantee_tenant": self.grantee_tenant,
            "layers": list(self.layers),
            "topics": list(self.topics),
            "scope_from": self.scope_from,
            "scope_until": self.scope_until,
            "include_sensitive": self.include_sensitive,
            "expires_at": self.expires_at,
            "reason": self.reason,
            "occurred_at": self.occurred_at,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> GrantChanged:
        """Build from a decoded Avro record."""

        def optional(value: Any) -> int | None:
            return None if value is None else _ms(value)

        return cls(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            grant_id=r["grant_id"],
            action=r["action"],
            grantee_tenant=r.get("grantee_tenant", ""),
            layers=tuple(r.get("layers", ())),
            topics=tuple(r.get("topics", ())),
            scope_from=optional(r.get("scope_from")),
            scope_until=optional(r.get("scope_until")),
            include_sensitive=bool(r.get("include_sensitive", False)),
            expires_at=optional(r.get("expires_at")),
            reason=r.get("reason", ""),
            occurred_at=_ms(r["occurred_at"]),
            schema_version=int(r.get("schema_version", 1)),
        )


@dataclass(frozen=True, slots=True)
class MemoryRead:
    """Another tenant read the owner's memory under a grant: one entry of the owner's audit trail.

    Written to the audit topic keyed by the owner, never folded into memory; ``occurred_at`` is the
    service's clock when the read was answered.
    """

    SCHEMA: ClassVar[str] = "adamem.events.MemoryRead"

    event_id: str
    user_id: str
    grant_id: str
    grantee_tenant: str
    endpoint: str
    occurred_at: int
    item_ids: tuple[str, ...] = ()
    tenant: str = "default"
    schema_version: int = 1

    @property
    def owner_id(self) -> str:
        """The memory owner's key, ``tenant:user_id`` (see ``adamem.owners``)."""
        return owner_key(self.tenant, self.user_id)

    def to_record(self) -> dict[str, Any]:
        """The Avro record of this event."""
        return {
            "schema_version": self.schema_version,
            "event_id": self.event_id,
            "tenant": self.tenant,
            "user_id": self.user_id,
            "grant_id": self.grant_id,
            "grantee_tenant": self.grantee_tenant,
            "endpoint": self.endpoint,
            "item_ids": list(self.item_ids),
            "occurred_at": self.occurred_at,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> MemoryRead:
        """Build from a decoded Avro record."""
        return cls(
            event_id=str(r["event_id"]),
            tenant=r["tenant"],
            user_id=r["user_id"],
            grant_id=r["grant_id"],
            grantee_tenant=r["grantee_tenant"],
            endpoint=r["endpoint"],
            item_ids=tuple(r.get("item_ids", ())),
            occurred_at=_ms(r["occurred_at"]),
            schema_version=int(r.get("schema_version", 1)),
        )


ControlEvent = MemoryForgotten | MemoryCorrected | GrantChanged | AnswerFeedback | MemoryCompressed
Event = (
    ChatMessage | MessageAnalyzed | MemoryForgotten | MemoryCorrected | GrantChanged | AnswerFeedback | MemoryCompressed
)

# How ``from_record`` builds the models an analysis is made of: the same objects, without the frozen ``__init__``'s
# cost (``adamem.quick``); a replay builds ten of them an event.
_SEALED = quick_constructor(Sealed)
_SPEAKER = quick_constructor(Speaker)
_CHAT_MESSAGE = quick_constructor(ChatMessage)
_ANALYZER = quick_constructor(Analyzer)
_EMBEDDING = quick_constructor(Embedding)
_FACT = quick_constructor(ExtractedFact)
_ATTRIBUTE = quick_constructor(ExtractedAttribute)
_EVENT = quick_constructor(ExtractedEvent)
_MESSAGE_ANALYZED = quick_constructor(MessageAnalyzed)
