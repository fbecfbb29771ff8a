"""Reading another owner's memory under a grant: who may, what they see, and the audit trail of it.

A key of tenant B reads an owner of tenant A by naming A in ``X-Tenant`` (and optionally the
grant in ``X-Grant``). ``access_for`` answers the read's ``Access``: the owner's own key (or a
service without keys) reads everything; another tenant reads only under an *active* grant of that
owner to its tenant, not expired at the time of the read. Anything else — no grant, a pending or a
revoked one, an owner that does not exist — is the same 403 a key naming another tenant always
gets, so a refusal says nothing about whether the owner or a grant exists.

``GrantScope`` decides what a grant covers: a layer in ``layers``; an item whose event time lies
in ``[scope_from, scope_until]`` (a trait: its first and last evidence); whose messages carry one
of ``topics`` (no topics: any). A record is judged by its source messages, a trait by its evidence,
a graph node by what it stands for, an edge by both ends. Answers under a grant keep only covered
items, each with only its covered provenance and no graph path (its labels could name what is not
covered), and mask sensitive data (``api.sensitive``) unless the grant includes it.

Every read under a grant appends a ``MemoryRead`` to the audit topic, keyed by the owner: who
read, under which grant, which route, which item ids, when. The owner lists it
(``GET /v1/users/{user}/audit``). A service without a log cannot keep that trail, and
refuses reads under a grant.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from adamem.api.sensitive import mask_json
from adamem.errors import Forbidden, LogError
from adamem.events import NAMESPACE, MemoryRead, ms_to_iso
from adamem.owners import owner_key, split_owner
from adamem.projections.folds.rows import (
    EpisodicRow,
    GrantRow,
    GraphEdgeRow,
    GraphNodeRow,
    MessageRow,
    PersonaRow,
    Row,
)
from adamem.projections.store.ports import MemoryStore
from adamem.retrieval.answer import Answer, Item
from adamem.retrieval.service import Retriever
from adamem.schemas.serde import decode_as, encode_event
from adamem.settings import Settings
from adamem.streams.log import EventLog, OutgoingRecord

__all__ = [
    "Access",
    "GrantScope",
    "ScopedRetriever",
    "access_for",
    "audit_trail",
    "grant_json",
    "grants_of",
    "record_read",
    "scoped_query",
]

_MAX_ASK = 1000  # the most items one scoped query asks the retriever for, to fill top_k with covered ones


def refusal(tenant: str) -> Forbidden:
    """The one answer to a key reading another tenant without an active grant: it says nothing more."""
    return Forbidden(f"this API key acts for its own tenant, not for {tenant!r}")


def grants_of(store: MemoryStore, owner_id: str) -> list[GrantRow]:
    """The owner's grants, oldest first."""
    rows = [r for r in store.rows("grants", owner_id) if isinstance(r, GrantRow)]
    return sorted(rows, key=lambda g: (g.granted_at, g.grant_id))


def grant_json(grant: GrantRow) -> dict[str, Any]:
    """A grant as the API answers it (times as ISO-8601, absent ones as null)."""

    def when(ms: int) -> str | None:
        return None if ms < 0 else ms_to_iso(ms)

    tenant, user = split_owner(grant.owner_id)
    return {
        "grant_id": grant.grant_id,
        "tenant": tenant,
        "user_id": user,
        "grantee_tenant": grant.grantee_tenant,
        "status": grant.status,
        "layers": list(grant.layers),
        "topics": list(grant.topics),
        "from": when(grant.scope_from),
        "until": when(grant.scope_until),
        "include_sensitive": grant.include_sensitive,
        "expires_at": when(grant.expires_at),
        "granted_at": when(grant.granted_at),
        "confirmed_at": when(grant.confirmed_at),
        "revoked_at": when(grant.revoked_at),
        "reason": grant.reason,
    }


@dataclass(frozen=True, slots=True)
class Access:
    """Whose memory a read reads, and the grant it reads under (None: the owner's own key)."""

    owner_id: str
    grant: GrantRow | None = None

    @property
    def shared(self) -> bool:
        """True for a read under a grant by another tenant."""
        return self.grant is not None


def access_for(
    store: MemoryStore,
    caller: str | None,
    named: str | None,
    user: str,
    default_tenant: str,
    grant_id: str | None = None,
    now_ms: int | None = None,
) -> Access:
    """The access of a key of tenant ``caller`` (None: a service without keys) to ``named``'s ``user``.

    Another tenant's owner is readable only under an active, unexpired grant to ``caller`` (the one
    named ``grant_id`` if given, else the one confirmed last); otherwise ``Forbidden``, worded as
    for any other tenant.
    """
    if caller is None or named is None or named == caller:
        return Access(owner_key(caller or named or default_tenant, user))
    owner_id = owner_key(named, user)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    usable = [
        g
        for g in grants_of(store, owner_id)
        if g.status == "active"
        and g.grantee_tenant == caller
        and (g.expires_at < 0 or now < g.expires_at)
        and (grant_id is None or g.grant_id == grant_id)
    ]
    if not usable:
        raise refusal(named)
    return Access(owner_id, max(usable, key=lambda g: (g.confirmed_at, g.grant_id)))


class GrantScope:
    """What one grant covers of its owner's memory, judged from the owner's rows."""

    def __init__(self, grant: GrantRow, rows: Mapping[str, Iterable[Row]]) -> None:
        self.grant = grant
        self.layers = frozenset(grant.layers)
        self.topics = frozenset(grant.topics)
        self.messages = {r.id: r for r in rows.get("messages", ()) if isinstance(r, MessageRow)}
        self.records = {r.id: r for r in rows.get("episodic", ()) if isinstance(r, EpisodicRow)}
        self.traits = {r.id: r for r in rows.get("persona", ()) if isinstance(r, PersonaRow)}
        self.nodes = {r.id: r for r in rows.get("graph_nodes", ()) if isinstance(r, GraphNodeRow)}

    @classmethod
    def load(cls, retriever: Retriever, grant: GrantRow) -> GrantScope:
        """The scope of ``grant`` over its owner's rows: the retriever's snapshot of the owner when it holds
        every message (no rows are read for it), else the store's rows."""
        snap = retriever.snapshot(grant.owner_id)
        if snap.archive is None:
            held: dict[str, Iterable[Row]] = {
                "messages": snap.messages.values(),
                "episodic": snap.records.values(),
                "persona": snap.traits.values(),
                "graph_nodes": snap.nodes.values(),
            }
            return cls(grant, held)
        store = retriever.store
        return cls(
            grant, {t: store.rows(t, grant.owner_id) for t in ("messages", "episodic", "persona", "graph_nodes")}
        )

    def in_time(self, at: int) -> bool:
        """Whether an event time lies in the grant's range."""
        g = self.grant
        return (g.scope_from < 0 or at >= g.scope_from) and (g.scope_until < 0 or at <= g.scope_until)

    def on_topic(self, message_ids: Iterable[str]) -> bool:
        """Whether the messages carry a granted topic (always, when the grant names none)."""
        if not self.topics:
            return True
        return any(not self.topics.isdisjoint(m.topics) for i in message_ids if (m := self.messages.get(i)))

    def covers(self, row: Row) -> bool:
        """Whether the grant covers a row (its layer aside: see ``covers_layer``)."""
        if isinstance(row, MessageRow):
            return self.in_time(row.occurred_at) and self.on_topic([row.id])
        if isinstance(row, EpisodicRow):
            return self.in_time(row.occurred_at) and self.on_topic(row.source_message_ids)
        if isinstance(row, PersonaRow):
            seen = row.evidence_times or [row.first_seen, row.last_seen]
            return all(self.in_time(t) for t in seen) and self.on_topic(row.evidence_message_ids)
        if isinstance(row, GraphNodeRow):
            if row.node_type == "topic":
                return self.in_time(row.occurred_at) and (not self.topics or row.ref_id in self.topics)
            target = self.messages.get(row.ref_id) or self.records.get(row.ref_id)
            return target is not None and self.covers(target)
        if isinstance(row, GraphEdgeRow):
            ends = (self.nodes.get(row.src), self.nodes.get(row.dst))
            return all(n is not None and self.covers(n) for n in ends)
        return False

    def covers_layer(self, layer: str) -> bool:
        """Whether the grant covers a layer (``working``, ``archive``, ``episodic``, ``persona``, ``graph``)."""
        return layer in self.layers

    def covers_id(self, item_id: str) -> bool:
        """Whether the grant covers the item of that id, in any layer it grants."""
        row: Row | None = (
            self.records.get(item_id)
            or self.traits.get(item_id)
            or self.nodes.get(item_id)
            or self.messages.get(item_id)
        )
        return row is not None and self.covers(row)

    def covers_item(self, item: Item) -> bool:
        """Whether the grant covers an answer item: its layer and the row it stands for."""
        return self.covers_layer(item.layer.value) and self.covers_id(item.id)

    def narrow(self, item: Item, rank: int) -> Item:
        """A covered item as a grantee sees it: covered provenance only, no graph path."""
        provenance = tuple(p for p in item.provenance if self._covers_message(p.message_event_id))
        return replace(item, rank=rank, provenance=provenance, hop_path=())

    def narrow_row(self, row: Row) -> Row:
        """A covered row as a grantee sees it: its lists of source or evidence messages cut to covered ones."""
        if isinstance(row, EpisodicRow):
            return replace(row, source_message_ids=[i for i in row.source_message_ids if self._covers_message(i)])
        if isinstance(row, PersonaRow):
            keep = [n for n, i in enumerate(row.evidence_message_ids) if self._covers_message(i)]
            return replace(
                row,
                evidence_message_ids=[row.evidence_message_ids[n] for n in keep],
                evidence_confidences=[row.evidence_confidences[n] for n in keep],
                evidence_times=[row.evidence_times[n] for n in keep],
            )
        return row

    def _covers_message(self, message_id: str) -> bool:
        message = self.messages.get(message_id)
        return message is not None and self.covers(message)

    def shown(self, value: Any) -> Any:
        """A JSON answer as the grantee sees it: sensitive data masked unless the grant includes it."""
        return value if self.grant.include_sensitive else mask_json(value)


def scoped_query(
    retriever: Retriever,
    scope: GrantScope,
    owner_id: str,
    question: str,
    top_k: int | None = None,
    as_of: Any = None,
    reference_time: int | None = None,
    refine: Any = None,
) -> Answer:
    """``retriever.query`` under a grant: the top ``top_k`` covered items, found by asking for more."""
    k = top_k or retriever.config.top_k
    ask = k * 4
    while True:
        answer = retriever.query(owner_id, question, ask, as_of, reference_time, refine)
        covered = [i for i in answer.items if scope.covers_item(i)]
        if len(covered) >= k or len(answer.items) < ask or ask >= _MAX_ASK:
            break
        ask = min(ask * 4, _MAX_ASK)
    items = tuple(scope.narrow(item, rank) for rank, item in enumerate(covered[:k], start=1))
    return replace(answer, items=items)


class ScopedRetriever:
    """A retriever whose queries answer only what a grant covers (research runs its rounds on it)."""

    def __init__(self, retriever: Retriever, scope: GrantScope) -> None:
        self._retriever = retriever
        self._scope = scope

    def __getattr__(self, name: str) -> Any:
        return getattr(self._retriever, name)

    def query(self, *args: Any, **kwargs: Any) -> Answer:
        """``scoped_query`` with this retriever's grant (``Retriever.query``'s arguments)."""
        return scoped_query(self._retriever, self._scope, *args, **kwargs)


def read_event_id(grant_id: str, endpoint: str, at_ms: int, nonce: str) -> str:
    """Id of one audited read."""
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(("read", grant_id, endpoint, str(at_ms), nonce))))


async def record_read(
    log: EventLog | None, settings: Settings, access: Access, endpoint: str, item_ids: Iterable[str]
) -> None:
    """Append a ``MemoryRead`` of a read under a grant to the audit topic (nothing for the owner's own reads)."""
    grant = access.grant
    if grant is None:
        return
    if log is None:
        raise LogError(
            "this service was started without a log; it cannot keep the audit trail reads under a grant need"
        )
    tenant, user = split_owner(access.owner_id)
    at = int(time.time() * 1000)
    read = MemoryRead(
        event_id=read_event_id(grant.grant_id, endpoint, at, uuid.uuid4().hex),
        user_id=user,
        tenant=tenant,
        grant_id=grant.grant_id,
        grantee_tenant=grant.grantee_tenant,
        endpoint=endpoint,
        item_ids=tuple(dict.fromkeys(item_ids)),
        occurred_at=at,
    )
    await log.append(settings.topic("audit"), [OutgoingRecord(user, encode_event(read))])


async def audit_trail(log: EventLog | None, settings: Settings, owner_id: str) -> list[dict[str, Any]]:
    """Every read of ``owner_id``'s memory under a grant, oldest first."""
    if log is None:
        raise LogError("this service was started without a log; the audit trail is on the log")
    tenant, user = split_owner(owner_id)
    out: list[tuple[int, dict[str, Any]]] = []
    async for rec in log.read(settings.topic("audit"), key=user):
        read = decode_as(rec.value, MemoryRead)
        if read.tenant != tenant:  # the same user id in another tenant shares the key
            continue
        out.append(
            (
                read.occurred_at,
                {
                    "event_id": read.event_id,
                    "grant_id": read.grant_id,
                    "grantee_tenant": read.grantee_tenant,
                    "endpoint": read.endpoint,
                    "item_ids": list(read.item_ids),
                    "occurred_at": ms_to_iso(read.occurred_at),
                },
            )
        )
    # By the instant as a number, in log order within one millisecond: the ISO strings do not sort
    # ("…:01Z" for a read on the second sorts after "…:01.500000Z").
    out.sort(key=lambda pair: pair[0])
    return [row for _, row in out]
