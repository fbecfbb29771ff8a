"""The library's front door: ``Memory`` (and ``AsyncMemory``) over one log and one store.

    from adamem import Memory

    with Memory() as m:                      # the embedded default: ./data/log and ./data/store
        m.add("alice", "I moved to Lisbon last week.")
        print(m.query("alice", "Where do I live?").items[0].content)

Every call names its owner by user id (and tenant, default the settings'). Writes put events on
the log (the only truth) through the application core's one write path (``adamem.core``) and
return once memory reflects them, bounded by ``wait_timeout_s`` (``NotVisible`` after it); when
an ``adamem serve`` already writes the embedded log, they go through it. Reads answer from the
projections with provenance back to the log. The MCP server, the LangChain classes, the LangGraph
store and ``hybrid_query`` are adapters over this class, so they agree on owners, tenants and what
"visible" means. The method names are the HTTP client's where they mean the same thing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from adamem.core import append_and_wait, publish_and_wait
from adamem.errors import InvalidArgument, NotFound
from adamem.events import ChatMessage, ms_to_iso
from adamem.ingest import messages_from_records
from adamem.owners import owner_key
from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow
from adamem.projections.store.base import MemoryStore
from adamem.retrieval.answer import Answer
from adamem.retrieval.research import Research, ResearchRequest, research
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.settings import Settings
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.replay import RebuildReport

if TYPE_CHECKING:
    from adamem.api.client import AsyncMemoryClient

_T = TypeVar("_T")

__all__ = [
    "AsyncMemory",
    "InvalidArgument",
    "Memory",
    "PersonaTrait",
    "RebuildReport",
    "Remembered",
    "TimelineEntry",
    "TraitEvidence",
    "UnknownUser",
]


class UnknownUser(NotFound):
    """The caller's tenant has no memory for that user (says nothing about other tenants' owners)."""

    kind = "unknown_user"

    def __init__(self, tenant: str, user_id: str) -> None:
        self.tenant, self.user_id = tenant, user_id
        super().__init__(
            f"no memory for user {user_id!r} of tenant {tenant!r}; check the user_id, or remember "
            "something for that user first"
        )


@dataclass(frozen=True, slots=True)
class Remembered:
    """What a write put on the log, and that it is visible now."""

    event_ids: tuple[str, ...]
    positions: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> last offset

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "event_ids": list(self.event_ids),
            "positions": {t: {str(p): o for p, o in ps.items()} for t, ps in self.positions.items()},
            "visible": True,
        }


@dataclass(frozen=True, slots=True)
class TraitEvidence:
    """A message that supports a persona trait.

    :ivar message_event_id: The event id of the message on the log.
    :ivar text: What the message says.
    :ivar occurred_at: When it was said, ISO-8601 UTC (``2024-03-04T09:03:00Z``).
    """

    message_event_id: str
    text: str
    occurred_at: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``message_event_id``, ``text``, ``occurred_at``."""
        return {"message_event_id": self.message_event_id, "text": self.text, "occurred_at": self.occurred_at}


@dataclass(frozen=True, slots=True)
class PersonaTrait:
    """An active persona trait of an owner, as ``Memory.persona`` returns it.

    :ivar id: The trait's id in the persona layer.
    :ivar kind: ``preference``, ``preference_cluster``, ``trait`` or ``habit``.
    :ivar key: ``likes`` or ``dislikes`` for a preference; the attribute (``allergy``…) for a trait;
        ``habit`` for a habit.
    :ivar value: What is liked, the attribute's value, or the habit, in the language it was said in.
    :ivar strength: How strongly the evidence supports it (mean confidence × ln(mentions + 1) × time
        decay), as of its last update, rounded to 4 decimals.
    :ivar mentions: How many messages mention it.
    :ivar stable: Whether it is a core trait: strong enough (0.65 by default) and mentioned often
        enough (3 times by default).
    :ivar disputed: Whether a rival in its slot is about as strong (``likes X`` against ``dislikes X``,
        two values of a single-valued key); both are kept and both disputed.
    :ivar first_seen: Event time of its first evidence, ISO-8601 UTC.
    :ivar last_seen: Event time of its latest evidence, ISO-8601 UTC.
    :ivar evidence: Its most recent supporting messages still in memory, oldest first (capped).
    """

    id: str
    kind: str
    key: str
    value: str
    strength: float
    mentions: int
    stable: bool
    disputed: bool
    first_seen: str
    last_seen: str
    evidence: tuple[TraitEvidence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the field names as keys and ``evidence`` a list of dicts."""
        return {
            "id": self.id,
            "kind": self.kind,
            "key": self.key,
            "value": self.value,
            "strength": self.strength,
            "mentions": self.mentions,
            "stable": self.stable,
            "disputed": self.disputed,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "evidence": [e.to_dict() for e in self.evidence],
        }


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """A message or an episodic record of an owner's timeline, as ``Memory.timeline`` returns it.

    :ivar time: Its event time, ISO-8601 UTC: when a message was said, when an episodic record happened.
    :ivar source: ``message``, or ``episodic/<type>`` for an episodic record (``episodic/event``,
        ``episodic/fact``…).
    :ivar id: The message's event id, or the episodic record's id.
    :ivar text: The message's text, or the episodic record's content.
    :ivar speaker: Who said the message; ``None`` for an episodic record.
    :ivar from_ids: The event ids of the messages an episodic record was drawn from (``from`` in
        ``to_dict``); ``None`` for a message.
    """

    time: str
    source: str
    id: str
    text: str
    speaker: str | None = None
    from_ids: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``time``, ``source``, ``id``, then ``speaker`` and ``text`` for a message,
        ``text`` and ``from`` (a list) for an episodic record."""
        out: dict[str, Any] = {"time": self.time, "source": self.source, "id": self.id}
        if self.speaker is not None:
            out["speaker"] = self.speaker
        out["text"] = self.text
        if self.from_ids is not None:
            out["from"] = list(self.from_ids)
        return out


def _message_records(
    user_id: str, tenant: str, messages: Sequence[Mapping[str, Any]], now_ms: int
) -> list[dict[str, Any]]:
    records = []
    for i, m in enumerate(messages):
        record = {"user_id": user_id, "tenant": tenant, "speaker": user_id, "occurred_at": now_ms + i, **m}
        record["user_id"], record["tenant"] = user_id, tenant  # a message cannot name another owner
        records.append(record)
    return records


def _message(
    text: str,
    speaker: str | None = None,
    role: str = "user",
    occurred_at: str | int | None = None,
    conversation_id: str | None = None,
    metadata: Mapping[str, str] | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """One message of ``Memory.add``, with only the fields given (the rest take their defaults)."""
    given = {
        "text": text,
        "speaker": speaker,
        "role": role,
        "occurred_at": occurred_at,
        "conversation_id": conversation_id,
        "metadata": dict(metadata) if metadata is not None else None,
        "message_id": message_id,
    }
    return {k: v for k, v in given.items() if v is not None}


def _as_of(value: str | int | None) -> AsOf | None:
    """An event time (RFC 3339 text or ms since the epoch) as the retriever's point."""
    from adamem.ingest import parse_time

    if value is None:
        return None
    try:
        return AsOf(time=parse_time(value))
    except ValueError as exc:
        raise InvalidArgument(f"as_of {value!r}: {exc}") from exc


def _until(value: str | int | None) -> tuple[int | None, int | None]:
    """``replay``'s ``until`` as ``(log offset, event time in ms)``, read as ``adamem replay --until`` reads it:
    a string of digits is a log offset; other text an event time (RFC 3339); an int, ms since the epoch."""
    from adamem.ingest import parse_time

    if value is None:
        return None, None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value), None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidArgument(
            f"until {value!r}: give an event time (RFC 3339 text or int ms since the epoch) "
            "or a log offset (a string of digits)"
        )
    try:
        return None, parse_time(value)
    except ValueError as exc:
        raise InvalidArgument(
            f"until {value!r}: {exc}; or give a log offset as a string of digits, e.g. until='42'"
        ) from exc


class Memory:
    """A user's memory over one log and one store; every call names its owner by user id (and tenant).

    ``Memory()`` opens the settings of the environment (``ADAMEM_LOG``, ``ADAMEM_STORE``…; by
    default the embedded log and store under ``./data``); ``log`` and ``store`` name others
    (a folder, ``kafka://host:port``, ``memory://``; a folder, ``s3://bucket/prefix``).
    Use it as a context manager, or ``close`` it.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        log: str | None = None,
        store: str | None = None,
        tenant: str | None = None,
        retriever: Retriever | None = None,
        wait_timeout_s: float = 60.0,
    ) -> None:
        """``retriever`` defaults to one over the store with the embedder of its analysis generation."""
        if settings is None:
            settings = Settings.from_env(log_url=log, store_url=store, default_tenant=tenant)
        elif log or store or tenant:
            settings = dataclasses.replace(
                settings,
                log_url=log or settings.log_url,
                store_url=store or settings.store_url,
                default_tenant=tenant or settings.default_tenant,
            )
        self.settings = settings
        self.wait_timeout_s = wait_timeout_s
        self._retriever = retriever
        self._log: EventLog | None = None
        self._writing: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()  # the event loop thread, started once
        self._opening = threading.Lock()  # the retriever, opened once

    @property
    def retriever(self) -> Retriever:
        """The read side (opened on first use)."""
        with self._opening:  # tools run in threads
            return self._open_retriever()

    def _open_retriever(self) -> Retriever:
        if self._retriever is None:
            from adamem.core import open_retriever

            self._retriever = open_retriever(self.settings)
        return self._retriever

    @property
    def store(self) -> MemoryStore:
        """The store the retriever reads."""
        return self.retriever.store

    def owner(self, user_id: str, tenant: str | None = None) -> str:
        """The owner key of ``user_id`` in ``tenant`` (default: the settings' tenant)."""
        return owner_key(tenant or self.settings.default_tenant, user_id)

    def require(self, user_id: str, tenant: str | None = None) -> str:
        """The owner key, or ``UnknownUser`` when the store holds no memory for it."""
        from adamem.errors import UnknownOwner

        owner = self.owner(user_id, tenant)
        try:
            self.retriever.require(owner)
        except UnknownOwner as exc:
            raise UnknownUser(tenant or self.settings.default_tenant, user_id) from exc
        return owner

    # -- writes -------------------------------------------------------------------------------

    def _submit(self, work: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Run ``work`` on this handle's own event loop thread: the log is used from one loop only,
        whether the caller is synchronous, on another thread, or in an event loop of its own."""
        with self._guard:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="adamem-agent-memory", daemon=True)
                self._thread.start()
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    async def _write(
        self, topic: str, records: Sequence[OutgoingRecord] = (), *, messages: Sequence[ChatMessage] = ()
    ) -> dict[str, dict[int, int]]:
        """Append ``records``, or ``messages`` sealed under their own keys in the log's keystore, and wait."""
        return await asyncio.wrap_future(self._submit(self._write_here(topic, records, messages)))

    async def _write_here(
        self, topic: str, records: Sequence[OutgoingRecord], messages: Sequence[ChatMessage]
    ) -> dict[str, dict[int, int]]:
        from adamem.streams.factory import open_log

        if self._writing is None:
            self._writing = asyncio.Lock()
        async with self._writing:  # one catch-up at a time in this process
            if self._log is None:
                self._log = open_log(self.settings.log, self.settings)
                await self._log.start()
            if messages:  # sealed as `adamem publish` seals them, so a forget can shred them
                report = await publish_and_wait(
                    self._log, self.store, self.settings, messages, timeout_s=self.wait_timeout_s
                )
                return {report.topic: report.last}
            return await append_and_wait(
                self._log, self.store, self.settings, topic, records, timeout_s=self.wait_timeout_s
            )

    async def aremember(
        self, user_id: str, messages: Sequence[Mapping[str, Any]], tenant: str | None = None
    ) -> Remembered:
        """Publish messages of one owner (each: ``text`` and optionally ``speaker``, ``role``, ``occurred_at``,
        ``conversation_id``, ``message_id``); return once they are visible. Raises ``InputError``."""

        tenant = tenant or self.settings.default_tenant
        if not messages:
            raise InvalidArgument("give at least one message")
        records = _message_records(user_id, tenant, messages, int(time.time() * 1000))
        parsed: list[ChatMessage] = messages_from_records(records, self.settings, "messages")
        if self._log is None:  # this handle does not write the log yet: an `adamem serve` may
            from adamem.api.notice import serving_url

            url = await asyncio.to_thread(serving_url, self.settings)
            if url is not None:
                return await self._remember_through(url, tenant, records)
        topic = self.settings.topic("messages")
        positions = await self._write(topic, messages=parsed)
        return Remembered(tuple(m.event_id for m in parsed), positions)

    def _client(self, url: str, tenant: str) -> AsyncMemoryClient:
        """A client of the ``adamem serve`` that writes the embedded log, with ``tenant``'s key."""
        from adamem.api.client import AsyncMemoryClient
        from adamem.api.notice import service_key

        return AsyncMemoryClient(
            url, service_key(self.settings, tenant), tenant=tenant, timeout=self.wait_timeout_s + 30
        )

    async def _remember_through(self, url: str, tenant: str, records: list[dict[str, Any]]) -> Remembered:
        """Publish through the ``adamem serve`` that writes the embedded log (its one writer), and wait as here."""
        async with self._client(url, tenant) as client:
            published = await client.publish(records)
            await client.wait(published["positions"], wait_ms=int(self.wait_timeout_s * 1000))
        written = {int(p["partition"]): int(p["offset"]) for p in published["positions"]}
        return Remembered(tuple(published["event_ids"]), {published["topic"]: written})

    async def aforget(
        self,
        user_id: str,
        *,
        tenant: str | None = None,
        item: str | None = None,
        message: str | None = None,
        everything: bool = False,
        reason: str = "",
    ) -> Remembered:
        """Publish a ``MemoryForgotten`` for one item, one message or the whole owner; return once projected."""
        from adamem.core import forget_event
        from adamem.schemas.serde import encode_event

        tenant = tenant or self.settings.default_tenant
        event = forget_event(
            user_id,
            tenant,
            item=item,
            message=message,
            everything=everything,
            reason=reason,
            at_ms=int(time.time() * 1000),
        )
        self.require(user_id, tenant)
        if self._log is None:  # an `adamem serve` that writes the embedded log forgets it at once
            from adamem.api.notice import serving_url

            url = await asyncio.to_thread(serving_url, self.settings)
            if url is not None:
                return await self._forget_through(url, tenant, user_id, item, message, everything, reason)
        topic = self.settings.topic("control")
        positions = await self._write(topic, [OutgoingRecord(user_id, encode_event(event))])
        return Remembered((event.event_id,), positions)

    async def _forget_through(
        self,
        url: str,
        tenant: str,
        user_id: str,
        item: str | None,
        message: str | None,
        everything: bool,
        reason: str,
    ) -> Remembered:
        """Forget through the ``adamem serve`` that writes the embedded log (``POST /v1/users/{user}/forget``)."""
        async with self._client(url, tenant) as client:
            done = await client.forget(
                user_id, item=item, message=message, everything=everything, reason=reason, wait_ms=5_000
            )
        written = {int(p["partition"]): int(p["offset"]) for p in done["positions"]}
        return Remembered((done["event_id"],), {self.settings.topic("control"): written})

    async def afeedback(
        self,
        user_id: str,
        *,
        tenant: str | None = None,
        helped: Sequence[str] = (),
        unhelpful: Sequence[str] = (),
    ) -> Remembered:
        """Publish an ``AnswerFeedback``: which items of an answer (their ``id``) helped and which did not;
        return once projected. The owner's later answers are ranked by what their feedback says
        (``projections.folds.style``). ``InvalidArgument`` when no item is named or one twice; ``ItemNotFound``
        for an item the owner's memory does not hold."""
        from adamem.core import feedback_event
        from adamem.schemas.serde import encode_event

        tenant = tenant or self.settings.default_tenant
        owner = self.require(user_id, tenant)
        if self._log is None:  # an `adamem serve` that writes the embedded log takes it through its API
            from adamem.api.notice import serving_url

            url = await asyncio.to_thread(serving_url, self.settings)
            if url is not None:
                async with self._client(url, tenant) as client:
                    done = await client.feedback(user_id, helped=helped, unhelpful=unhelpful, wait_ms=5_000)
                written = {int(p["partition"]): int(p["offset"]) for p in done["positions"]}
                return Remembered((done["event_id"],), {self.settings.topic("control"): written})
        event = await asyncio.to_thread(
            feedback_event, self.store, owner, helped, unhelpful, at_ms=int(time.time() * 1000)
        )
        topic = self.settings.topic("control")
        positions = await self._write(topic, [OutgoingRecord(user_id, encode_event(event))])
        return Remembered((event.event_id,), positions)

    def add(
        self,
        user_id: str,
        text: str,
        *,
        speaker: str | None = None,
        role: str = "user",
        occurred_at: str | int | None = None,
        conversation_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        message_id: str | None = None,
        tenant: str | None = None,
    ) -> Remembered:
        """Add one message of ``user_id``; return once memory reflects it. ``speaker`` defaults to the user,
        ``occurred_at`` (RFC 3339 or ms) to now; the same ``message_id`` again is the same event, kept once."""
        message = _message(text, speaker, role, occurred_at, conversation_id, metadata, message_id)
        return self.remember(user_id, [message], tenant)

    async def aadd(self, user_id: str, text: str, *, tenant: str | None = None, **options: Any) -> Remembered:
        """``add`` for asyncio callers, with the same keywords."""
        return await self.aremember(user_id, [_message(text, **options)], tenant)

    # -- reads --------------------------------------------------------------------------------

    def query(
        self,
        user_id: str,
        question: str,
        *,
        tenant: str | None = None,
        top_k: int = 10,
        as_of: str | int | None = None,
    ) -> Answer:
        """Ranked evidence for ``question``, each item with its provenance (``as_of``: memory as it was at
        that event time, RFC 3339 or ms)."""
        owner = self.require(user_id, tenant)
        return self.retriever.query(owner, question, top_k, _as_of(as_of))

    search = query
    recall = query

    def research(
        self,
        user_id: str,
        query: str,
        *,
        tenant: str | None = None,
        depth: int = 1,
        context: str = "",
        memory_hints: Sequence[str] = (),
        top_k: int = 10,
        as_of: str | int | None = None,
    ) -> Research:
        """Graded evidence gathered in up to ``depth`` rounds (the Research Agent, ``retrieval.research``)."""
        request = ResearchRequest(query, context, tuple(memory_hints), depth, top_k)
        owner = self.require(user_id, tenant)
        return research(self.retriever, owner, request, as_of=_as_of(as_of))

    def persona(self, user_id: str, *, tenant: str | None = None, limit: int = 20) -> list[PersonaTrait]:
        """Active persona traits, strongest first, each with its evidence messages (at most ``limit``)."""
        owner = self.require(user_id, tenant)
        texts = {r.id: r for r in self.store.rows("messages", owner) if isinstance(r, MessageRow)}
        traits = [r for r in self.store.rows("persona", owner) if isinstance(r, PersonaRow) and r.status == "active"]
        traits.sort(key=lambda t: (-t.strength, t.id))
        return [
            PersonaTrait(
                id=t.id,
                kind=t.kind,
                key=t.key,
                value=t.value,
                strength=round(t.strength, 4),
                mentions=t.mention_count,
                stable=t.stable,
                disputed=t.disputed,
                first_seen=ms_to_iso(t.first_seen),
                last_seen=ms_to_iso(t.last_seen),
                evidence=tuple(
                    TraitEvidence(mid, texts[mid].text, ms_to_iso(texts[mid].occurred_at))
                    for mid in t.evidence_message_ids
                    if mid in texts
                ),
            )
            for t in traits[:limit]
        ]

    def timeline(
        self, user_id: str, start: int, end: int, *, tenant: str | None = None, limit: int = 200
    ) -> list[TimelineEntry]:
        """The owner's messages and episodic records whose event time is in ``[start, end]`` (ms), in time order.

        At most ``limit`` entries; at the same time, messages come before episodic records. ``history``
        is another name for it.
        """
        if end < start:
            raise InvalidArgument(f"the timeline ends ({ms_to_iso(end)}) before it starts ({ms_to_iso(start)})")
        owner = self.require(user_id, tenant)
        out: list[tuple[int, int, TimelineEntry]] = []
        for m in self.store.rows("messages", owner):
            if isinstance(m, MessageRow) and start <= m.occurred_at <= end:
                said = TimelineEntry(ms_to_iso(m.occurred_at), "message", m.id, m.text, speaker=m.speaker)
                out.append((m.occurred_at, 0, said))
        for e in self.store.rows("episodic", owner):
            when = e.event_time if isinstance(e, EpisodicRow) and e.event_time >= 0 else getattr(e, "occurred_at", -1)
            if isinstance(e, EpisodicRow) and e.status == "active" and start <= when <= end:
                found = TimelineEntry(
                    ms_to_iso(when), f"episodic/{e.type}", e.id, e.content, from_ids=tuple(e.source_message_ids)
                )
                out.append((when, 1, found))
        out.sort(key=lambda x: (x[0], x[1], x[2].id))
        return [x[2] for x in out[:limit]]

    history = timeline

    def working(self, user_id: str, *, tenant: str | None = None) -> list[MessageRow]:
        """The owner's working memory, oldest first."""
        return list(self.retriever.working_memory(self.require(user_id, tenant)))

    def remember(self, user_id: str, messages: Sequence[Mapping[str, Any]], tenant: str | None = None) -> Remembered:
        """``aremember`` for synchronous callers."""
        return self._submit(self.aremember(user_id, messages, tenant)).result()

    def forget(self, user_id: str, **scope: Any) -> Remembered:
        """``aforget`` for synchronous callers."""
        return self._submit(self.aforget(user_id, **scope)).result()

    def feedback(self, user_id: str, **judged: Any) -> Remembered:
        """``afeedback`` for synchronous callers: ``helped=[ids]``, ``unhelpful=[ids]``, ``tenant``."""
        return self._submit(self.afeedback(user_id, **judged)).result()

    # -- rebuilds -----------------------------------------------------------------------------

    def replay(
        self,
        user_id: str | None = None,
        *,
        tenant: str | None = None,
        verify: bool = False,
        until: str | int | None = None,
        jobs: int | None = 1,
    ) -> RebuildReport:
        """Rebuild memory from the log, as ``adamem replay`` does: the recorded analyses are folded again
        (no model is called). Returns the ``RebuildReport`` of ``adamem.streams.replay.rebuild_owner`` or
        ``rebuild_view``.

        With ``user_id`` (of ``tenant``, default the settings'): that owner only, in place, as
        ``adamem replay --user``: their rows are replaced by the fold's where they differ
        (``report.switched``). ``verify``: the rows are only compared (``report.verified``,
        ``report.diffs``), nothing is replaced. ``UnknownUser`` when the store has no memory for them.

        Without: every owner, into a new view beside the active one (``report.view``), caught up to the
        log's end and switched to atomically (queries read the old view until then); views that may
        still hold a forgotten message are deleted then (``report.removed_views``). ``verify``: the view
        is built up to exactly where the active view is, compared with it row by row (``report.verified``,
        ``report.diffs``, ``report.checksum`` and ``report.live_checksum``), caught up and *not* switched
        to, as ``adamem replay --verify --no-switch`` (the command alone switches when the rows are equal);
        the view stays for inspection (``adamem views switch NAME`` makes it the active one).

        ``until`` (the whole store only): a view of memory as of an event time (RFC 3339 text, or an int
        of ms since the epoch) or, as the command reads a whole number, a log offset (a string of digits:
        each partition of the analyses topic folded up to it); every forget is folded whatever its time.
        Such a view is never switched to. ``jobs`` (the whole store only): processes folding partitions
        side by side (None: the cores, the command's default). Bad values raise ``InvalidArgument``.

        On an embedded log this handle is the one writer during the replay (as after ``add``): refused
        with ``LogError`` while another process writes the folder, and when that is an ``adamem serve``,
        with the advice to stop the service first (a replay cannot go through its API). The next
        ``query`` reads the rebuilt memory: the read side follows the switch and the in-place commit.
        """
        return self._submit(self._replay(user_id, tenant, verify, until, jobs)).result()

    async def areplay(
        self,
        user_id: str | None = None,
        *,
        tenant: str | None = None,
        verify: bool = False,
        until: str | int | None = None,
        jobs: int | None = 1,
    ) -> RebuildReport:
        """``replay`` for asyncio callers, with the same arguments."""
        return await asyncio.wrap_future(self._submit(self._replay(user_id, tenant, verify, until, jobs)))

    async def _replay(
        self, user_id: str | None, tenant: str | None, verify: bool, until: str | int | None, jobs: int | None
    ) -> RebuildReport:
        """Check the arguments, then rebuild on this handle's loop, between its writes (``_replay_here``)."""
        until_offset, until_time = _until(until)
        if isinstance(jobs, bool) or (jobs is not None and (not isinstance(jobs, int) or jobs < 1)):
            raise InvalidArgument(f"jobs {jobs!r}: give a number of processes of at least 1, or None for the cores")
        owner = None
        if user_id is None:
            if tenant is not None:
                raise InvalidArgument(
                    "tenant names the tenant of user_id; a replay of the whole store takes every owner"
                )
        else:
            if until is not None:
                raise InvalidArgument(
                    "until builds a view of the whole store as of a point; an owner is rebuilt in place, up to "
                    "where the store is: leave out user_id, or until"
                )
            owner = await asyncio.to_thread(self.require, user_id, tenant)
        return await self._replay_here(owner, until_offset, until_time, verify, jobs)

    async def _replay_here(
        self, owner: str | None, until_offset: int | None, until_time: int | None, verify: bool, jobs: int | None
    ) -> RebuildReport:
        """What ``adamem replay`` does (``cli.commands.run_replay``), with this handle's log when it has one."""
        from adamem.projections.store.base import store_folder
        from adamem.projections.store.factory import open_views
        from adamem.streams.factory import open_log
        from adamem.streams.generations import resolve
        from adamem.streams.replay import rebuild_owner, rebuild_view

        if self._writing is None:
            self._writing = asyncio.Lock()
        async with self._writing:  # no write of this handle in between
            root = store_folder(self.settings.store_url)
            settings = resolve(self.settings, open_views(root).open_view(read_only=True))  # the active generation
            folder = settings.log.folder
            if self._log is None and folder is not None and not folder.is_dir():
                raise NotFound(f"no embedded log at {folder}: nothing to replay; add messages first")
            if self._log is None and settings.log.kind == "memory":  # a new one would be empty: memory rebuilt empty
                raise InvalidArgument(
                    "a memory:// log lives in the handle that wrote it, and this one has written nothing: "
                    "replay with the Memory that added the messages"
                )
            log = self._log if self._log is not None else open_log(settings.log, settings)
            self._hold_writer_lock(log)
            try:
                if log is not self._log:
                    await log.start()  # refuses a damaged log: the writer lock is let go then too
                if owner is not None:
                    store = open_views(root).open_view()
                    try:
                        return await rebuild_owner(log, store, settings, owner, verify_only=verify)
                    finally:
                        store.close()
                return await rebuild_view(
                    log,
                    root,
                    settings,
                    until_offset=until_offset,
                    until_time=until_time,
                    verify=verify,
                    switch=not verify,
                    jobs=jobs,
                )
            finally:
                if log is not self._log:
                    await log.stop()  # its writer lock: this handle writes again when it next adds

    def _hold_writer_lock(self, log: EventLog) -> None:
        """Be the embedded log's one writer (already, after an ``add``), or say who is: a running
        ``adamem serve`` names itself in the folder (``api.notice``)."""
        from adamem.api.notice import serving_url
        from adamem.errors import LogError

        try:
            log.hold_writer_lock()
        except LogError as exc:
            url = serving_url(self.settings)
            if url is None:
                raise
            raise LogError(
                f"the adamem serve at {url} writes the log in {self.settings.log.folder}, and a replay cannot go "
                "through its API: stop the service first, then replay (or run `adamem replay` while it is stopped)"
            ) from exc

    async def _stop_log(self) -> None:
        if self._log is not None:
            await self._log.stop()
            self._log = None

    def close(self) -> None:
        """Stop the log, its event loop thread and the retriever's threads."""
        if self._loop is not None:
            self._submit(self._stop_log()).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            assert self._thread is not None
            self._thread.join(30)
            self._loop.close()
            self._loop = self._thread = None
        if self._retriever is not None:
            self._retriever.close()

    async def aclose(self) -> None:
        """``close`` for asyncio callers."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemory:
    """``Memory`` for asyncio callers: the same calls, awaited; reads run in a worker thread."""

    def __init__(self, settings: Settings | None = None, **options: Any) -> None:
        """The same arguments as ``Memory``."""
        self.sync = Memory(settings, **options)

    @property
    def settings(self) -> Settings:
        """The settings the memory was opened with."""
        return self.sync.settings

    async def add(self, user_id: str, text: str, **options: Any) -> Remembered:
        """``Memory.add``."""
        return await self.sync.aadd(user_id, text, **options)

    async def remember(
        self, user_id: str, messages: Sequence[Mapping[str, Any]], tenant: str | None = None
    ) -> Remembered:
        """``Memory.remember``."""
        return await self.sync.aremember(user_id, messages, tenant)

    async def forget(self, user_id: str, **scope: Any) -> Remembered:
        """``Memory.forget``."""
        return await self.sync.aforget(user_id, **scope)

    async def feedback(self, user_id: str, **judged: Any) -> Remembered:
        """``Memory.feedback``."""
        return await self.sync.afeedback(user_id, **judged)

    async def query(self, user_id: str, question: str, **options: Any) -> Answer:
        """``Memory.query``."""
        return await asyncio.to_thread(self.sync.query, user_id, question, **options)

    search = query

    async def research(self, user_id: str, query: str, **options: Any) -> Research:
        """``Memory.research``."""
        return await asyncio.to_thread(self.sync.research, user_id, query, **options)

    async def persona(self, user_id: str, **options: Any) -> list[PersonaTrait]:
        """``Memory.persona``."""
        return await asyncio.to_thread(self.sync.persona, user_id, **options)

    async def timeline(self, user_id: str, start: int, end: int, **options: Any) -> list[TimelineEntry]:
        """``Memory.timeline``; ``history`` is another name for it."""
        return await asyncio.to_thread(self.sync.timeline, user_id, start, end, **options)

    history = timeline

    async def working(self, user_id: str, **options: Any) -> list[MessageRow]:
        """``Memory.working``."""
        return await asyncio.to_thread(self.sync.working, user_id, **options)

    async def replay(self, user_id: str | None = None, **options: Any) -> RebuildReport:
        """``Memory.replay``: rebuild one owner in place, or the whole store into a new view and switch to it."""
        return await self.sync.areplay(user_id, **options)

    async def close(self) -> None:
        """``Memory.close``."""
        await self.sync.aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
