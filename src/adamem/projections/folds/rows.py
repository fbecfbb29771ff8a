"""The rows of the memory tables: frozen dataclasses that map 1:1 to Arrow / LanceDB columns.

Field types are limited to ``str``, ``int``, ``float``, ``bool``, ``list[str]``, ``list[float]``,
``list[int]`` and ``vector: tuple[float, ...]`` (the embedding column). Times are integer
milliseconds since the epoch (event time); ``-1`` means "none" for every time field. Every row has
a deterministic ``id`` (unique within its table) and the memory owner's ``owner_id``. Rows are
values: a changed row is a new row (``dataclasses.replace``), never an edited one — do not mutate
their lists.

Every ``vector`` the folds write holds float32 values (``float32_vector``): vector columns are
float32, and a state rebuilt from stored rows must equal the live one bit for bit. ``evolve`` is
``dataclasses.replace`` for rows, without its per-call introspection (the folds call it per event),
and the folds make rows with ``owner_row``, ``message_row``, ... (``adamem.quick``): the same rows
as the classes make, without the frozen ``__init__``'s cost (a fold writes ~10 rows an event).

Tables: ``owners`` (one bookkeeping row per owner), ``messages``, ``episodic``, ``persona``,
``graph_nodes``, ``graph_edges``, and ``grants`` (who else may read a scope of the owner's memory).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import struct
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, cast

from adamem.events import Float32Vector
from adamem.quick import quick_constructor
from adamem.text import memo_search_text

__all__ = [
    "TABLES",
    "EpisodicRow",
    "GrantRow",
    "GraphEdgeRow",
    "GraphNodeRow",
    "MessageRow",
    "OwnerRow",
    "PersonaRow",
    "Row",
    "changed_fields",
    "context_words",
    "edge_row",
    "episodic_row",
    "evolve",
    "float32_vector",
    "message_row",
    "node_row",
    "owner_row",
    "persona_row",
    "row_json",
    "row_types",
]


@dataclass(frozen=True, slots=True)
class OwnerRow:
    """Bookkeeping of one memory owner: the fold's clock and sequence counter."""

    TABLE: ClassVar[str] = "owners"

    id: str  # = owner_id
    owner_id: str
    last_event_time: int  # max occurred_at of every event applied; the folds' "now"
    next_seq: int  # arrival number the next message of this owner gets
    forgotten_message_ids: list[str]  # tombstones: a redelivered analysis of these is not archived again


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One archived message with its recorded analysis, and its place in working memory."""

    TABLE: ClassVar[str] = "messages"

    id: str  # = message event id
    owner_id: str
    tenant: str
    conversation_id: str
    message_id: str
    speaker: str  # speaker name
    role: str  # user | assistant | other
    text: str
    occurred_at: int
    topics: list[str]
    entities: list[str]
    summary: str
    sentiment: float
    dialog_act: str
    certainty: str
    vector: tuple[float, ...]
    embedding_model: str
    analysis_event_id: str
    analyzer: str  # "name/version"
    generation: str
    source_topic: str  # position of the analysis event on the log
    source_partition: int
    source_offset: int
    seq: int  # arrival number within the owner (0, 1, 2, ...)
    in_working: bool
    working_seq: int  # = seq while in working memory, -1 once evicted
    consolidated: bool
    extraction_json: str  # facts/attributes/events of the analysis, canonical JSON (consolidation input)
    # The speaker's offset from UTC in minutes, as the message stated it; None: not stated (shown in UTC).
    utc_offset_minutes: int | None = None
    # The words of the owner's message before this one in its session (its text as search tokens; "" for a
    # session's first message); a question the graph route does not take scores a message by its own words and
    # these. None: a table made before messages held them (its messages have them once the owner is rebuilt).
    context: str | None = None


@dataclass(frozen=True, slots=True)
class EpisodicRow:
    """A structured record (event, fact or attribute) with its validity interval."""

    TABLE: ClassVar[str] = "episodic"

    id: str
    owner_id: str
    type: str  # event | fact | attribute
    key: str  # conflict slot, "" when the record conflicts with nothing
    content: str
    confidence: float
    source_message_ids: list[str]
    speaker: str
    speaker_role: str  # user | assistant | other
    conversation_id: str
    occurred_at: int  # time of the creating message (or correction)
    valid_from: int
    valid_to: int  # -1 while still valid
    superseded_by: str  # "" if none
    supersedes: str  # id of the record this one replaced, "" if none
    status: str  # active | superseded
    router: str  # ADD | UPDATE | CORRECT
    vector: tuple[float, ...]  # the source message's vector
    event_time: int  # resolved ``when`` of an event, -1 if none
    fact_type: str  # ExtractedFact.type for facts, "" otherwise
    attribute_key: str  # attribute key for attributes, "" otherwise
    attribute_value: str  # attribute value for attributes, "" otherwise
    entities: list[str]  # entities of the source message
    origin_event_id: str  # the analysis or control event that created the record


@dataclass(frozen=True, slots=True)
class PersonaRow:
    """A persona trait: a preference, a preference cluster, another attribute, or a habit."""

    TABLE: ClassVar[str] = "persona"

    id: str
    owner_id: str
    kind: str  # preference | preference_cluster | trait | habit
    key: str  # likes | dislikes for preferences; the attribute key for traits; "habit"
    value: str
    cluster: str  # label of the preference cluster ("" for traits and habits)
    members: list[str]  # values merged into a cluster trait; [value] otherwise
    strength: float
    base_confidence: float
    mention_count: int
    evidence_message_ids: list[str]  # most recent evidence, oldest first (capped)
    evidence_confidences: list[float]  # parallel to evidence_message_ids
    evidence_times: list[int]  # parallel to evidence_message_ids (event time of the evidence)
    first_seen: int
    last_seen: int
    updated_at: int  # event time at which ``strength`` was computed
    changed_at: int  # event time of the last change of value, stable, disputed or status
    stable: bool
    disputed: bool
    status: str  # active | superseded
    superseded_by: str
    valid_to: int
    vector: tuple[float, ...]  # L2-normalised mean of recent evidence message vectors


@dataclass(frozen=True, slots=True)
class GraphNodeRow:
    """A node of the owner's memory graph."""

    TABLE: ClassVar[str] = "graph_nodes"

    id: str
    owner_id: str
    node_type: str  # message | topic | fact | attribute | event
    ref_id: str  # message event id, episodic record id, or normalised topic
    label: str
    confidence: float
    occurred_at: int
    active: bool  # False for nodes of superseded records


@dataclass(frozen=True, slots=True)
class GraphEdgeRow:
    """A directed, weighted edge; symmetric relations are stored once (``direction='both'``)."""

    TABLE: ClassVar[str] = "graph_edges"

    id: str
    owner_id: str
    src: str  # graph node id
    dst: str  # graph node id
    edge_type: str  # mentions | supports | temporal_next | same_topic | speaker_related | similar | supersedes
    weight: float
    direction: str  # forward | backward | both
    occurred_at: int
    message_id: str  # message event id whose arrival or consolidation wrote the edge, "" for corrections


@dataclass(frozen=True, slots=True)
class GrantRow:
    """Another tenant's read access to a scope of the owner's memory (``projections.folds.grants``)."""

    TABLE: ClassVar[str] = "grants"

    id: str  # ids.grant_row_id(owner_id, grant_id)
    owner_id: str
    grant_id: str  # the id the owner and the grantee name the grant by
    grantee_tenant: str
    layers: list[str]  # working | archive | episodic | persona | graph
    topics: list[str]  # [] = every topic
    scope_from: int  # earliest event time of a covered item, -1 for none
    scope_until: int  # latest event time of a covered item, -1 for none
    include_sensitive: bool
    expires_at: int  # -1 for never
    status: str  # pending | active | revoked
    granted_at: int
    confirmed_at: int  # -1 until confirmed
    revoked_at: int  # -1 until revoked
    reason: str


Row = OwnerRow | MessageRow | EpisodicRow | PersonaRow | GraphNodeRow | GraphEdgeRow | GrantRow

TABLES: tuple[str, ...] = ("owners", "messages", "episodic", "persona", "graph_nodes", "graph_edges", "grants")
"""Table names, in the order changes are best applied."""


def row_types() -> dict[str, type[Row]]:
    """Row class of every table, by table name."""
    return {t.TABLE: t for t in (OwnerRow, MessageRow, EpisodicRow, PersonaRow, GraphNodeRow, GraphEdgeRow, GrantRow)}


_R = TypeVar("_R", OwnerRow, MessageRow, EpisodicRow, PersonaRow, GraphNodeRow, GraphEdgeRow, GrantRow)


def context_words(before: MessageRow | None, conversation_id: str, occurred_at: int, session_gap_ms: int) -> str:
    """The ``context`` of a message of ``conversation_id`` said at ``occurred_at``: the words of the owner's message
    before it (its text as search tokens) when both are of one session (one conversation, less than
    ``session_gap_ms`` apart: a reply is said in the session of what it answers); "" otherwise, and for none."""
    if before is None or before.conversation_id != conversation_id:
        return ""
    if occurred_at - before.occurred_at >= session_gap_ms:
        return ""
    return memo_search_text(before.text)


owner_row = quick_constructor(OwnerRow)
message_row = quick_constructor(MessageRow)
episodic_row = quick_constructor(EpisodicRow)
persona_row = quick_constructor(PersonaRow)
node_row = quick_constructor(GraphNodeRow)
edge_row = quick_constructor(GraphEdgeRow)


def _layout(cls: type[Row]) -> tuple[Callable[[Any], tuple[Any, ...]], dict[str, int], Callable[..., Row]]:
    names = [f.name for f in dataclasses.fields(cls)]
    return operator.attrgetter(*names), {name: i for i, name in enumerate(names)}, quick_constructor(cls)


_LAYOUTS = {cls.__name__: _layout(cls) for cls in row_types().values()}
"""Per row class: a getter of all field values in order, each field's position, and its quick constructor."""


def evolve(row: _R, **changes: Any) -> _R:
    """A copy of ``row`` with some fields changed: ``dataclasses.replace``, for rows, faster."""
    cls = type(row)
    get, index, make = _LAYOUTS[cls.__name__]
    values = list(get(row))
    for name, value in changes.items():
        if name not in index:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
        values[index[name]] = value
    return cast(_R, make(*values))


def changed_fields(old: Row, new: Row) -> tuple[str, ...]:
    """Names of the fields in which two rows of the same table differ."""
    get, index, _ = _LAYOUTS[type(new).__name__]
    names = tuple(index)
    return tuple(names[i] for i, (a, b) in enumerate(zip(get(old), get(new), strict=True)) if a is not b and a != b)


@functools.lru_cache(maxsize=64)
def _float32s(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}f")


def float32_vector(values: Iterable[float]) -> tuple[float, ...]:
    """The vector rounded to float32 precision, so that a float32 column stores it exactly.

    A ``Float32Vector`` (an embedding read from the log) is float32 already and is returned as it is.
    """
    if type(values) is Float32Vector:
        return values
    vector = values if isinstance(values, tuple | list) else tuple(values)
    packing = _float32s(len(vector))
    try:
        return packing.unpack(packing.pack(*vector))
    except OverflowError:  # beyond float32's range: round to infinity as a float32 column does
        return tuple(array("f", vector))


def row_json(row: Any) -> dict[str, Any]:
    """A row as the API and ``adamem memory --json`` show it: its table and fields, without the vector, the raw
    extraction and a message's ``context`` (the words of the message before it, shown as that message)."""
    data = dataclasses.asdict(row)
    data.pop("vector", None)
    data.pop("extraction_json", None)
    data.pop("context", None)
    return {"table": row.TABLE, **data}
