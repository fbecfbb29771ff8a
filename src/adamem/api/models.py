"""Typed request bodies and the one error body of the HTTP API (pydantic); responses are the domain's JSON forms.

Every body is strict: a JSON value of the wrong type is refused rather than coerced (``"10"`` and
``true`` are not integers; ``10.0`` is one, as JSON Schema has it, and ``10.5`` is not), unknown
fields are refused, and every number has bounds. What the OpenAPI description says is what the
service enforces: the description is generated from these models, and the same models validate
each request.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    create_model,
    model_validator,
)

from adamem.retrieval.research import MAX_DEPTH as MAX_RESEARCH_DEPTH

__all__ = [
    "MAX_BODY",
    "MAX_CONTEXT_CHARS",
    "MAX_QUESTION_CHARS",
    "MAX_TIME_MS",
    "MIN_TIME_MS",
    "AsOfBody",
    "ErrorBody",
    "ErrorKind",
    "FeedbackAnswer",
    "FeedbackBody",
    "ForgetAnswer",
    "ForgetBody",
    "HealthAnswer",
    "LogPosition",
    "MessageBody",
    "PublishAnswer",
    "PublishBody",
    "QueryBody",
    "ResearchBody",
    "Time",
    "WaitAnswer",
    "WaitBody",
    "publish_body",
    "to_millis",
    "utc_offset_of",
]

# The times ISO-8601 writes with a four-digit year: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z,
# as milliseconds since the Unix epoch (each fits an Avro timestamp-millis).
MIN_TIME_MS = -62_135_596_800_000
MAX_TIME_MS = 253_402_300_799_999
MAX_BODY = 1 << 20  # a request body, in bytes (api.body.BodyLimit)
MAX_QUESTION_CHARS = 2_000  # a question's length, in characters (the CLI and MCP allow the same)
MAX_CONTEXT_CHARS = 8_000  # a research request's context, in characters
MAX_WAIT_MS = 5_000  # the longest one request waits for the projections (ask again to wait longer)
MAX_OFFSET = (1 << 53) - 1  # exact as a JSON number; a Kafka offset (int64) never gets this far in practice

# A string with at least one character that is not whitespace in Python's sense (``str.isspace``,
# which is what the ingest checks use): spelt out, because ``\s`` differs between regex dialects.
NOT_BLANK = r"[^\t\n\u000b\u000c\r\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)

ErrorKind = Literal[
    "invalid_json",
    "invalid_request",
    "invalid_messages",
    "unauthenticated",
    "forbidden",
    "unknown_user",
    "unknown_item",
    "not_found",
    "method_not_allowed",
    "too_large",
    "unsupported_media_type",
    "bad_request",
    "not_visible",
    "not_written",
    "log_unavailable",
    "unavailable",
    "internal",
]


class ErrorBody(BaseModel):
    """The one shape of every error answer (4xx and 5xx): a stable kind and a sentence for a person."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorKind = Field(..., description="What went wrong, as a stable machine-readable kind.")
    detail: str = Field(..., description="What went wrong and how to fix it, for a person.")


def _json_integer(value: Any) -> Any:
    """A JSON integer: an integral number (``10`` or ``10.0``, as JSON Schema has it), never a string or a bool."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value  # anything else goes on to the strict integer check (which refuses "10", true and 10.5)


# JSON Schema's integer: any number without a fractional part; strict otherwise. Each integer's
# bounds stand before the validator in its Annotated list, so that its description keeps them.
TopK = Annotated[int, Field(ge=1, le=100), BeforeValidator(_json_integer)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET), BeforeValidator(_json_integer)]
Partition = Annotated[int, Field(ge=0, le=100_000), BeforeValidator(_json_integer)]
WaitMs = Annotated[int, Field(ge=0, le=MAX_WAIT_MS), BeforeValidator(_json_integer)]


def _parse_rfc3339(value: str) -> int:
    """Milliseconds since the epoch of an RFC 3339 date-time; ValueError when it is not one."""
    m = _RFC3339.fullmatch(value)
    if m is None:
        raise ValueError("is not an RFC 3339 date-time such as 2024-03-01T09:30:00Z")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, sign, off_h, off_m = m.group(7), m.group(8), m.group(9), m.group(10)
    try:
        when = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)  # ValueError: no such date
    except ValueError as exc:
        raise ValueError(f"is not a valid date-time ({exc})") from None
    offset = 0
    if sign is not None:
        if int(off_h) > 23 or int(off_m) > 59:
            raise ValueError("has an offset out of range (-23:59 to +23:59)")
        offset = (int(off_h) * 60 + int(off_m)) * 60_000 * (1 if sign == "+" else -1)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    millis = (when - epoch) // dt.timedelta(milliseconds=1) + int((fraction or "0")[:3].ljust(3, "0"))
    return millis - offset


def _rfc3339(value: str) -> str:
    _parse_rfc3339(value)
    return value


EpochMillis = Annotated[
    int,
    Field(
        ge=MIN_TIME_MS, le=MAX_TIME_MS, description="Milliseconds since the Unix epoch (UTC), 0001-01-01 to 9999-12-31."
    ),
    BeforeValidator(_json_integer),
]
DateTimeText = Annotated[
    str,
    Field(
        max_length=64,
        json_schema_extra={"format": "date-time"},
        description="An RFC 3339 date-time with its offset, e.g. 2024-03-01T09:30:00Z (years 0001-9999).",
    ),
    AfterValidator(_rfc3339),
]


def _time_kind(value: Any) -> str:
    return "rfc3339" if isinstance(value, str) else "millis"


def _as_of_kind(value: Any) -> str:
    return "point" if isinstance(value, dict) else _time_kind(value)


# The JSON type picks the branch, so that an error names one branch, not every one it is not.
Time = Annotated[
    Annotated[EpochMillis, Tag("millis")] | Annotated[DateTimeText, Tag("rfc3339")],
    Discriminator(_time_kind),
]


def to_millis(value: int | str) -> int:
    """Milliseconds since the epoch of a validated ``Time``."""
    return value if isinstance(value, int) else _parse_rfc3339(value)


def utc_offset_of(value: int | str) -> int | None:
    """The UTC offset in minutes a validated ``Time`` states: ``Z`` 0, ``+08:00`` 480; None for milliseconds
    and for RFC 3339's "local offset unknown" ``-00:00``."""
    m = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        return None
    sign, hours, minutes = m.group(8), m.group(9), m.group(10)
    if sign is None:
        return 0
    offset = int(hours) * 60 + int(minutes)
    return None if sign == "-" and offset == 0 else offset if sign == "+" else -offset


def _no_null(schema: dict[str, Any]) -> None:
    """The field may be absent but not null: drop the null branch and the null default from its schema."""
    schema.pop("default", None)
    branches = [s for s in schema.pop("anyOf", []) if s.get("type") != "null"]
    if len(branches) == 1:
        schema.update(branches[0])
    elif branches:
        schema["anyOf"] = branches


class AsOfBody(BaseModel):
    """A point in the owner's history: exactly one of an event time or a log offset of the owner's partition."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"minProperties": 1, "maxProperties": 1})

    time: Time | None = Field(None, json_schema_extra=_no_null, description="Event time: RFC 3339 or integer ms.")
    offset: Offset | None = Field(
        None, json_schema_extra=_no_null, description="Offset on the owner's analyses partition."
    )

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: Any) -> Any:
        if isinstance(data, dict):
            given = [k for k in ("time", "offset") if k in data]
            if len(given) != 1:
                raise ValueError("as_of needs exactly one of time or offset")
            if data[given[0]] is None:
                raise ValueError(f"as_of.{given[0]} may not be null")
        return data


AsOfPoint = Annotated[
    Annotated[EpochMillis, Tag("millis")] | Annotated[DateTimeText, Tag("rfc3339")] | Annotated[AsOfBody, Tag("point")],
    Discriminator(_as_of_kind),
]


class LogPosition(BaseModel):
    """A message's place on the log: its partition of the messages topic and its offset there."""

    model_config = ConfigDict(extra="forbid", strict=True)

    partition: Partition = Field(..., description="Partition of the messages topic.")
    offset: Offset = Field(..., description="Offset of the message on that partition.")


class PublishAnswer(BaseModel):
    """What ``POST /v1/messages`` wrote, and where: pass ``positions`` to a query as ``min_position``."""

    published: int = Field(..., description="Messages appended to the log.")
    owners: int = Field(..., description="Distinct memory owners among them.")
    topic: str = Field(..., description="The messages topic they were appended to.")
    event_ids: list[str] = Field(..., description="Each message's event id, in the order sent.")
    positions: list[LogPosition] = Field(
        ...,
        description="Per partition written, the offset of the last message appended there. A query with "
        "min_position set to these answers only once all of them are in memory (read your writes).",
    )


class WaitBody(BaseModel):
    """Positions to wait for: answered once the messages there are in memory (read your writes)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    positions: list[LogPosition] = Field(
        ..., min_length=1, max_length=1000, description="The `positions` POST /v1/messages returned."
    )
    wait_ms: WaitMs = Field(5000, description=f"How long to wait, in milliseconds (at most {MAX_WAIT_MS}).")


class WaitAnswer(BaseModel):
    """The positions waited for are in memory."""

    visible: Literal[True] = Field(..., description="Always true: otherwise the answer is 409 not_visible.")
    waited_ms: float = Field(..., description="How long the service waited, in milliseconds.")


class _ForgetOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field("", max_length=500, description="Why, kept with the control event (not shown to queries).")
    wait_ms: WaitMs = Field(
        5000, description=f"How long to wait until memory no longer holds it, in milliseconds (at most {MAX_WAIT_MS})."
    )


class ForgetItem(_ForgetOptions):
    """Forget one memory item (a record, a trait, a node or edge, a message row) by its id."""

    item: str = Field(..., min_length=1, max_length=200, description="A memory item's id (from a query).")


class ForgetMessage(_ForgetOptions):
    """Forget one message: its rows in every layer, and its text on the log (its key is destroyed)."""

    message: str = Field(..., min_length=1, max_length=200, description="The message's event id.")


class ForgetEverything(_ForgetOptions):
    """Forget the whole owner: every layer, every message."""

    everything: Literal[True] = Field(..., description="Must be true.")


ForgetBody = ForgetItem | ForgetMessage | ForgetEverything
"""What to forget: exactly one of ``item``, ``message`` or ``everything``."""


class ForgetAnswer(BaseModel):
    """The forget is on the log and memory reflects it: queries no longer answer with what was forgotten."""

    event_id: str = Field(..., description="The control event's id.")
    scope: Literal["item", "message", "user"] = Field(..., description="What was forgotten.")
    positions: list[LogPosition] = Field(..., description="Where the control event was appended.")
    visible: Literal[True] = Field(..., description="Always true: otherwise the answer is 409 not_visible.")
    waited_ms: float = Field(..., description="How long the service waited, in milliseconds.")


ItemId = Annotated[str, Field(min_length=1, max_length=200)]


class FeedbackBody(BaseModel):
    """Which items of an answer helped and which did not (ids from the answer's items)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"helped": ["<an item id>"], "unhelpful": ["<another item id>"]}],
            # at least one item, in either list
            "anyOf": [
                {"required": ["helped"], "properties": {"helped": {"minItems": 1}}},
                {"required": ["unhelpful"], "properties": {"unhelpful": {"minItems": 1}}},
            ],
        },
    )

    helped: list[ItemId] = Field(
        [], max_length=100, json_schema_extra={"uniqueItems": True}, description="Ids of answer items that helped."
    )
    unhelpful: list[ItemId] = Field(
        [],
        max_length=100,
        json_schema_extra={"uniqueItems": True},
        description="Ids of answer items that did not help.",
    )
    wait_ms: WaitMs = Field(
        5000, description=f"How long to wait until memory holds the feedback, in milliseconds (at most {MAX_WAIT_MS})."
    )

    @model_validator(mode="after")
    def _judges_each_item_once(self) -> FeedbackBody:
        if not self.helped and not self.unhelpful:
            raise ValueError("name at least one answer item, in helped or unhelpful")
        for name, ids in (("helped", self.helped), ("unhelpful", self.unhelpful)):
            if len(set(ids)) != len(ids):
                raise ValueError(f"{name} names an item twice")
        return self


class FeedbackAnswer(BaseModel):
    """The feedback is on the log and folded: the owner's next answers are ranked with it."""

    event_id: str = Field(..., description="The control event's id.")
    judged: int = Field(..., description="Items the feedback judged.")
    answer_style: Literal["summaries", "examples", "either"] = Field(
        ...,
        description="What this owner's feedback says now: records and traits help more (summaries), messages "
        "do (examples), or neither yet (either).",
    )
    feedback: int = Field(..., description="Feedback events folded for this owner, this one included.")
    ranks_answers: bool = Field(
        ..., description="Whether the style now ranks this owner's answers (enough feedback, leaning one way)."
    )
    positions: list[LogPosition] = Field(..., description="Where the control event was appended.")
    waited_ms: float = Field(..., description="How long the service waited, in milliseconds.")


class HealthAnswer(BaseModel):
    """Readiness, which mode the service runs in, and how far the projections are behind the log."""

    status: Literal["ok", "degraded"] = Field(
        ...,
        description="ok; degraded: the log cannot be read, or the in-process write path stopped or its last "
        "pass failed (see detail).",
    )
    mode: Literal["embedded", "read-only"] = Field(
        ...,
        description="embedded: this process ingests, analyses and projects (the embedded log's one writer); "
        "read-only: it only reads the store, which other processes project (Kafka workers, adamem project).",
    )
    store: str = Field(..., description="The store the service reads.")
    log: str | None = Field(None, description="The log it publishes to and measures lag against (absent: none).")
    auth: Literal["open", "keys"] | None = Field(None, description="open: no API key needed; keys: one is.")
    writer: dict[str, Any] | None = Field(
        None, description="Embedded mode: {running, last_error} of the in-process write path."
    )
    lag: dict[str, Any] | None = Field(None, description="Events not projected and messages not analysed yet.")
    detail: str | None = Field(None, description="Why the status is degraded.")


def _not_blank(value: str) -> str:
    if not value.strip():  # the same test as NOT_BLANK, and as the ingest checks
        raise ValueError("is blank")
    return value


# Enforced by the validator (with a readable message), described by the pattern: the two agree.
NotBlank = Annotated[str, Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK}), AfterValidator(_not_blank)]


class QueryBody(BaseModel):
    """A question about one owner's memory."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"question": "What food does Alice like?", "top_k": 5}]},
    )

    question: NotBlank = Field(
        ..., max_length=MAX_QUESTION_CHARS, description="The question, English or Chinese (not blank)."
    )
    top_k: TopK = Field(10, description="How many ranked items to return.")
    as_of: AsOfPoint | None = Field(
        None, description="Answer from memory as it was then: an RFC 3339 time, integer ms, or {time} or {offset}."
    )
    min_position: list[LogPosition] | None = Field(
        None,
        max_length=1000,
        json_schema_extra=_no_null,
        description="Read your writes: answer only once the messages at these positions (the `positions` that "
        "POST /v1/messages returned) are in memory; waits up to wait_ms, else answers 409 not_visible (409 "
        "not_written, at once, for a position no message was written at).",
    )
    wait_ms: WaitMs = Field(
        5000, description=f"How long to wait for min_position, in milliseconds (at most {MAX_WAIT_MS})."
    )


class ResearchBody(BaseModel):
    """A research request (``ResearchRequest{query, context, memory_hints, depth}``) about one owner's memory."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"query": "Where does Omar live now?", "memory_hints": ["Porto"], "depth": 2, "top_k": 5}]
        },
    )

    query: NotBlank = Field(..., max_length=MAX_QUESTION_CHARS, description="The question, English or Chinese.")
    context: str = Field(
        "",
        max_length=MAX_CONTEXT_CHARS,
        description="Text around the question (the agent's conversation); its rarest words help.",
    )
    memory_hints: list[Annotated[str, Field(max_length=200)]] = Field(
        default_factory=list, max_length=20, description="Words or names known to matter, searched for in round 1."
    )
    depth: Annotated[int, Field(ge=1, le=MAX_RESEARCH_DEPTH), BeforeValidator(_json_integer)] = Field(
        1, description="Rounds at most: each later round searches again with cues from the evidence found."
    )
    top_k: TopK = Field(10, description="How many graded items to return.")
    as_of: AsOfPoint | None = Field(
        None, description="Research memory as it was then: an RFC 3339 time, integer ms, or {time} or {offset}."
    )


Role = Literal["user", "assistant", "other"]


class SpeakerBody(BaseModel):
    """A speaker given as an object: a name and, optionally, a role."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: NotBlank = Field(..., description="Display name of the speaker.")
    role: Role = Field("user", description="user: the memory owner; assistant: the agent; other: anyone else.")


class MessageBody(BaseModel):
    """One chat message, the JSON Lines record of ``adamem publish``; null or absent optional fields mean the same."""

    model_config = ConfigDict(extra="forbid", strict=True)

    user_id: NotBlank = Field(..., description="The memory owner.")
    speaker: NotBlank | SpeakerBody = Field(..., description="Who said it: a name, or {name, role}.")
    role: Role = Field("user", description="user: the memory owner; assistant: the agent; other: anyone else.")
    text: NotBlank = Field(..., description="The message text (not blank).")
    occurred_at: Time | None = Field(
        None,
        description="When it was said: RFC 3339, or integer ms since the epoch; absent: when the service receives it.",
    )
    tenant: str | None = Field(None, description="The tenant; empty or absent: the key's tenant (or the default one).")
    conversation_id: str | None = Field(None, description="The conversation; empty or absent: 'default'.")
    message_id: str | None = Field(None, description="The producer's id; empty or absent: derived from the message.")
    event_id: str | None = Field(None, pattern=_UUID, description="Idempotency key (a UUID); absent: derived.")
    metadata: dict[str, str] | None = Field(None, description="Free-form string metadata.")


class PublishBody(BaseModel):
    """Messages to publish, in the same shape as one JSON Lines record each."""

    model_config = ConfigDict(extra="forbid", strict=True)

    messages: list[MessageBody] = Field(..., min_length=1, max_length=5000, description="The messages.")


def _text_fits(limit: int) -> Any:
    def check(text: str) -> str:
        size = len(text.encode("utf-8"))
        if size > limit:
            raise ValueError(f"'text' is {size} bytes of UTF-8, over the limit of {limit} (ADAMEM_MAX_TEXT_BYTES)")
        return text

    return check


def publish_body(max_text_bytes: int) -> type[PublishBody]:
    """The publish body of a service whose message texts may hold at most ``max_text_bytes`` UTF-8 bytes.

    JSON Schema counts characters, not bytes: ``maxLength`` is the byte limit (no longer text can
    fit), and a text within it whose UTF-8 form is longer is refused with 422 all the same.
    """
    text: Any = (
        Annotated[str, AfterValidator(_not_blank), AfterValidator(_text_fits(max_text_bytes))],
        Field(
            ...,
            min_length=1,
            max_length=max_text_bytes,
            json_schema_extra={"pattern": NOT_BLANK},
            description=f"The message text: not blank, at most {max_text_bytes} bytes of UTF-8 "
            "(ADAMEM_MAX_TEXT_BYTES).",
        ),
    )
    message = create_model("MessageBody", __base__=MessageBody, text=text)
    messages: Any = (
        list[message],  # type: ignore[valid-type]
        Field(..., min_length=1, max_length=5000, description="The messages; all are published, or none."),
    )
    return create_model("PublishBody", __base__=PublishBody, messages=messages)
