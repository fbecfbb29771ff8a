"""One handle on a log and a store for the agent integrations: remember, recall, persona, timeline, forget.

The MCP server, the LangChain classes, the LangGraph store and ``hybrid_query`` all go through
``AgentMemory``, so they agree on owners, tenants and what "visible" means. Writes publish events
to the log (the only truth) and then wait until the projections hold them
(``publish_and_wait``): on the embedded log (or ``memory://``) by catching the projections up
in-process with the same pipeline as ``adamem project``; on a Kafka log by waiting until the
store's checkpoint passes an analysis that accounts for every written offset (workers project
it), bounded by ``wait_timeout_s``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from adamem.errors import AdaMemError, LogError
from adamem.events import ChatMessage, MemoryForgotten, ms_to_iso
from adamem.ingest import load_messages
from adamem.owners import owner_key
from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow
from adamem.projections.store.base import MemoryStore
from adamem.retrieval.answer import Answer
from adamem.retrieval.research import Research, ResearchRequest, research
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.settings import Settings
from adamem.streams.log import EventLog, OutgoingRecord

_T = TypeVar("_T")

__all__ = ["AgentMemory", "InvalidArgument", "ProjectionTimeout", "Remembered", "UnknownUser", "publish_and_wait"]


class UnknownUser(AdaMemError):
    """The caller's tenant has no memory for that user (says nothing about other tenants' owners)."""

    def __init__(self, tenant: str, user_id: str) -> None:
        self.tenant, self.user_id = tenant, user_id
        super().__init__(
            f"no memory for user {user_id!r} of tenant {tenant!r}; check the user_id, or remember "
            "something for that user first"
        )


class InvalidArgument(AdaMemError):
    """A call's arguments do not make sense together (nothing was written)."""


class ProjectionTimeout(LogError):
    """Written events were not projected within the wait (a Kafka log whose workers are behind or stopped)."""


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


def _written(topic: str, placed: Sequence[tuple[int, int]]) -> dict[str, dict[int, int]]:
    last: dict[int, int] = {}
    for p, off in placed:
        last[p] = max(last.get(p, off), off)
    return {topic: last}


async def _catch_up(log: EventLog, settings: Settings) -> None:
    """What ``adamem project`` (without ``--follow``) does: analyse and project everything pending."""
    from adamem.analysis.factory import build_agent
    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_store
    from adamem.streams.generations import resolve
    from adamem.streams.pipeline import run_pipeline

    store = open_store(settings.store_url)
    try:
        resolved = resolve(settings, store, record_if_missing=True)
        await run_pipeline(log, Projector(store), build_agent(resolved), resolved, agent_factory=build_agent)
    finally:
        store.close()


async def _wait_for_checkpoint(
    log: EventLog,
    store: MemoryStore,
    settings: Settings,
    written: Mapping[str, Mapping[int, int]],
    scan_from: Mapping[int, int],
    timeout_s: float,
    poll_s: float = 0.2,
) -> None:
    """Wait until the store's checkpoint passes an analysis whose ``adamem-resume`` covers every written offset."""
    from adamem.streams.generations import resolve
    from adamem.streams.resume import RESUME_HEADER, parse_resume

    analyses = resolve(settings, store).topic("analyses")
    want: dict[int, dict[str, int]] = {}
    for topic, parts in written.items():
        for p, off in parts.items():
            want.setdefault(p, {})[topic] = off + 1
    target: dict[int, int] = {}
    scanned = dict(scan_from)
    deadline = time.monotonic() + timeout_s
    while True:
        ends = await log.end_offsets(analyses)
        for p, needed in want.items():
            if p in target or ends.get(p, 0) <= scanned.get(p, 0):
                continue
            async for rec in log.read(analyses, from_offsets={p: scanned.get(p, 0)}, until={p: ends[p]}):
                scanned[p] = rec.offset + 1
                resume = parse_resume(dict(rec.headers).get(RESUME_HEADER)) or {}
                if all(resume.get(t, 0) >= o for t, o in needed.items()):
                    target[p] = rec.offset + 1
                    break
        if len(target) == len(want) and all(store.checkpoint(p).get(analyses, 0) >= o for p, o in target.items()):
            return
        if time.monotonic() > deadline:
            raise ProjectionTimeout(
                f"written events {dict(written)} were not projected into {store.url} within {timeout_s:g} s "
                f"(analysed up to {scanned} on {analyses}); are the workers (`adamem worker`) running? "
                "A dead-lettered event is never projected: see `adamem log dump --topic deadletter`; nor is a message "
                "whose key the workers cannot find (they log 'has no key': give every process one keystore, "
                "ADAMEM_KEYSTORE or ADAMEM_HOME)"
            )
        await asyncio.sleep(poll_s)


async def publish_and_wait(
    log: EventLog,
    store: MemoryStore,
    settings: Settings,
    topic: str,
    records: Sequence[OutgoingRecord],
    *,
    timeout_s: float = 60.0,
    workers: bool | None = None,
) -> dict[str, dict[int, int]]:
    """Append ``records`` to ``topic`` and return once the projections hold them: the one write path here.

    Embedded and ``memory://`` logs are caught up in-process; a Kafka log (or ``workers=True``) is
    waited for — other processes project it — until ``timeout_s``, then ``ProjectionTimeout``.
    ``store`` is a reader (``open_store(url, read_only=True)``): it sees every commit of the writers.
    """
    from adamem.streams.generations import resolve

    analyses = resolve(settings, store).topic("analyses")
    before = await log.end_offsets(analyses)
    written = _written(topic, await log.append(topic, records))
    if workers if workers is not None else settings.log_url.startswith("kafka://"):
        await _wait_for_checkpoint(log, store, settings, written, before, timeout_s)
    else:
        await _catch_up(log, settings)
    return written


def _message_lines(user_id: str, tenant: str, messages: Sequence[Mapping[str, Any]], now_ms: int) -> bytes:
    lines = []
    for i, m in enumerate(messages):
        record = {"user_id": user_id, "tenant": tenant, "speaker": user_id, "occurred_at": now_ms + i, **m}
        record["user_id"], record["tenant"] = user_id, tenant  # a message cannot name another owner
        lines.append(json.dumps(record, ensure_ascii=True))
    return "\n".join(lines).encode()


class AgentMemory:
    """Memory for agents over one log and one store; every call names its owner by tenant and user id."""

    def __init__(
        self,
        settings: Settings,
        *,
        retriever: Retriever | None = None,
        wait_timeout_s: float = 60.0,
    ) -> None:
        """``retriever`` defaults to one over ``settings.store_url`` with the store's generation's embedder."""
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
            from adamem.analysis.factory import build_embedder
            from adamem.projections.store.factory import open_store
            from adamem.streams.generations import resolve, settings_for

            store = open_store(self.settings.store_url, read_only=True)
            self._retriever = Retriever(
                store,
                build_embedder(resolve(self.settings, store)),
                embedder_for=lambda record: build_embedder(settings_for(self.settings, record)),
            )
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
        from adamem.schemas.serde import encode_event
        from adamem.streams.factory import open_log
        from adamem.streams.keys import keystore_for

        if self._writing is None:
            self._writing = asyncio.Lock()
        async with self._writing:  # one catch-up at a time in this process
            if self._log is None:
                self._log = open_log(self.settings.log_url, self.settings)
                await self._log.start()
            if messages:  # the text is sealed as `adamem publish` seals it, so a forget can shred it
                keys = keystore_for(self._log, self.settings)
                records = [OutgoingRecord(m.user_id, encode_event(m, keys)) for m in messages]
                keys.flush()
            return await publish_and_wait(
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
        data = _message_lines(user_id, tenant, messages, int(time.time() * 1000))
        parsed: list[ChatMessage] = load_messages(data, self.settings, "messages", "jsonl")
        if self._log is None:  # this handle does not write the log yet: an `adamem serve` may
            from adamem.api.notice import serving_url

            url = await asyncio.to_thread(serving_url, self.settings)
            if url is not None:
                return await self._remember_through(url, tenant, [json.loads(line) for line in data.splitlines()])
        topic = self.settings.topic("messages")
        positions = await self._write(topic, messages=parsed)
        return Remembered(tuple(m.event_id for m in parsed), positions)

    async def _remember_through(self, url: str, tenant: str, records: list[dict[str, Any]]) -> Remembered:
        """Publish through the ``adamem serve`` that writes the embedded log (its one writer), and wait as here."""
        from adamem.api.client import AsyncMemoryClient
        from adamem.api.notice import service_key

        key = service_key(self.settings, tenant)
        async with AsyncMemoryClient(url, key, tenant=tenant, timeout=self.wait_timeout_s + 30) as client:
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
        from adamem.schemas.serde import encode_event

        tenant = tenant or self.settings.default_tenant
        chosen = [x for x in (item, message) if x]
        if len(chosen) + int(everything) != 1:
            raise InvalidArgument("say exactly one of: item, message, or everything")
        self.require(user_id, tenant)
        event = MemoryForgotten(
            event_id=str(uuid.uuid4()),
            user_id=user_id,
            scope="user" if everything else ("item" if item else "message"),
            occurred_at=int(time.time() * 1000),
            target_id=item or message,
            reason=reason,
            tenant=tenant,
        )
        topic = self.settings.topic("control")
        positions = await self._write(topic, [OutgoingRecord(user_id, encode_event(event))])
        return Remembered((event.event_id,), positions)

    # -- reads --------------------------------------------------------------------------------

    def recall(
        self, user_id: str, question: str, *, tenant: str | None = None, top_k: int = 10, as_of: int | None = None
    ) -> Answer:
        """Ranked evidence for ``question`` (``as_of``: memory as it was at that event time, ms)."""
        owner = self.require(user_id, tenant)
        return self.retriever.query(owner, question, top_k, AsOf(time=as_of) if as_of is not None else None)

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
        as_of: int | None = None,
    ) -> Research:
        """Graded evidence gathered in up to ``depth`` rounds (the Research Agent, ``retrieval.research``)."""
        request = ResearchRequest(query, context, tuple(memory_hints), depth, top_k)
        owner = self.require(user_id, tenant)
        return research(self.retriever, owner, request, as_of=AsOf(time=as_of) if as_of is not None else None)

    def persona(self, user_id: str, *, tenant: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Active persona traits, strongest first, each with its evidence messages."""
        owner = self.require(user_id, tenant)
        texts = {r.id: r for r in self.store.rows("messages", owner) if isinstance(r, MessageRow)}
        traits = [r for r in self.store.rows("persona", owner) if isinstance(r, PersonaRow) and r.status == "active"]
        traits.sort(key=lambda t: (-t.strength, t.id))
        return [
            {
                "id": t.id,
                "kind": t.kind,
                "key": t.key,
                "value": t.value,
                "strength": round(t.strength, 4),
                "mentions": t.mention_count,
                "stable": t.stable,
                "disputed": t.disputed,
                "first_seen": ms_to_iso(t.first_seen),
                "last_seen": ms_to_iso(t.last_seen),
                "evidence": [
                    {"message_event_id": mid, "text": texts[mid].text, "occurred_at": ms_to_iso(texts[mid].occurred_at)}
                    for mid in t.evidence_message_ids
                    if mid in texts
                ],
            }
            for t in traits[:limit]
        ]

    def timeline(
        self, user_id: str, start: int, end: int, *, tenant: str | None = None, limit: int = 200
    ) -> list[dict[str, Any]]:
        """The owner's messages and episodic records whose event time is in ``[start, end]`` (ms), in time order."""
        if end < start:
            raise InvalidArgument(f"the timeline ends ({ms_to_iso(end)}) before it starts ({ms_to_iso(start)})")
        owner = self.require(user_id, tenant)
        out: list[tuple[int, int, dict[str, Any]]] = []
        for m in self.store.rows("messages", owner):
            if isinstance(m, MessageRow) and start <= m.occurred_at <= end:
                entry: dict[str, Any] = {"source": "message", "id": m.id, "speaker": m.speaker, "text": m.text}
                out.append((m.occurred_at, 0, {"time": ms_to_iso(m.occurred_at), **entry}))
        for e in self.store.rows("episodic", owner):
            when = e.event_time if isinstance(e, EpisodicRow) and e.event_time >= 0 else getattr(e, "occurred_at", -1)
            if isinstance(e, EpisodicRow) and e.status == "active" and start <= when <= end:
                found = {"source": f"episodic/{e.type}", "id": e.id, "text": e.content, "from": e.source_message_ids}
                out.append((when, 1, {"time": ms_to_iso(when), **found}))
        out.sort(key=lambda x: (x[0], x[1], x[2]["id"]))
        return [x[2] for x in out[:limit]]

    def working(self, user_id: str, *, tenant: str | None = None) -> list[MessageRow]:
        """The owner's working memory, oldest first."""
        return list(self.retriever.working_memory(self.require(user_id, tenant)))

    def remember(self, user_id: str, messages: Sequence[Mapping[str, Any]], tenant: str | None = None) -> Remembered:
        """``aremember`` for synchronous callers."""
        return self._submit(self.aremember(user_id, messages, tenant)).result()

    def forget(self, user_id: str, **scope: Any) -> Remembered:
        """``aforget`` for synchronous callers."""
        return self._submit(self.aforget(user_id, **scope)).result()

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
