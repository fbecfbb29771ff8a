"""The application core that every entry point shares: the read side's wiring and the one write path.

The command line, the HTTP service, MCP and the LangChain/LangGraph classes are adapters over
these functions, so they agree on what "written" and "visible" mean.

Writes put events on the log (the only truth) and return once memory reflects them (read your
writes). On an embedded or ``memory://`` log this process catches the projections up, with the
same pipeline as ``adamem project``; on a Kafka log other processes project (the workers), and
the write waits until the store's checkpoint passes an analysis that accounts for every written
offset (``streams.visible``), bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace

from adamem.errors import InvalidArgument, ItemNotFound, NotVisible
from adamem.events import AnswerFeedback, ChatMessage, JudgedItem, MemoryForgotten
from adamem.projections.store.base import MemoryStore
from adamem.retrieval.config import SEED_DEFAULT
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.publish import PublishReport, publish_messages

__all__ = [
    "WORKERS_ADVICE",
    "append_and_wait",
    "catch_up",
    "feedback_event",
    "forget_event",
    "open_retriever",
    "publish_and_wait",
    "wait_visible",
]


WORKERS_ADVICE = (
    "are the workers (`adamem worker`) running? A dead-lettered event is never projected: see `adamem log dump "
    "--topic deadletter`; nor is a message whose key the workers cannot find (they log 'has no key': give every "
    "process one keystore, ADAMEM_KEYSTORE or ADAMEM_HOME)"
)
"""What a write that was not projected in time tells its caller to check."""


def open_retriever(settings: Settings, store: MemoryStore | None = None) -> Retriever:
    """A retriever over ``store`` (default: the configured store, read-only), with the embedder of its
    active analysis generation, and of whichever generation a view it is pointed at was built by."""
    from adamem.analysis.factory import build_embedder
    from adamem.projections.store.factory import open_store
    from adamem.streams.generations import resolve, settings_for

    if store is None:
        store = open_store(settings.store, read_only=True)
    cache = replace(
        SEED_DEFAULT.cache,
        hot_bytes=settings.query_memory_mb << 20,
        hot_messages=settings.hot_messages,
        cold_index_bytes=settings.cold_index_mb << 20,
    )
    return Retriever(
        store,
        build_embedder(resolve(settings, store)),
        replace(SEED_DEFAULT, cache=cache),
        embedder_for=lambda record: build_embedder(settings_for(settings, record)),
    )


def forget_event(
    user_id: str,
    tenant: str,
    *,
    item: str | None = None,
    message: str | None = None,
    everything: bool = False,
    reason: str = "",
    at_ms: int,
) -> MemoryForgotten:
    """The control event that forgets one memory item, one message (its text is shredded) or the whole owner.

    Exactly one of ``item``, ``message`` and ``everything``; ``InvalidArgument`` otherwise. ``at_ms``
    is stamped by the caller, at the edge (the folds never read a clock).
    """
    if sum((bool(item), bool(message), everything)) != 1:
        raise InvalidArgument("say exactly one of: item, message, or everything")
    return MemoryForgotten(
        event_id=str(uuid.uuid4()),
        user_id=user_id,
        scope="user" if everything else ("item" if item else "message"),
        occurred_at=at_ms,
        target_id=item or message,
        reason=reason,
        tenant=tenant,
    )


MAX_JUDGED = 200
"""Items one feedback event may judge (an HTTP body names at most 100 helped and 100 unhelpful)."""


def feedback_event(
    store: MemoryStore,
    owner_id: str,
    helped: Sequence[str] = (),
    unhelpful: Sequence[str] = (),
    *,
    at_ms: int,
) -> AnswerFeedback:
    """The control event saying which answer items helped ``owner_id`` and which did not.

    Each id is an item of an answer: a message event id, an episodic record or a persona trait of the
    owner; its layer and kind are read from the owner's memory and recorded on the event, so the fold
    needs nothing else (``projections.folds.style``). ``InvalidArgument`` when no item is named, more
    than ``MAX_JUDGED`` are, or one of the owner's items is named twice; ``ItemNotFound`` for an
    id the owner's memory does not hold. ``at_ms`` is stamped by the caller, at the edge.
    """
    from adamem.owners import split_owner
    from adamem.projections.folds.rows import EpisodicRow, PersonaRow
    from adamem.projections.folds.style import STYLE_KIND

    named = [*helped, *unhelpful]
    if not named:
        raise InvalidArgument("name at least one answer item that helped or did not")
    if len(named) > MAX_JUDGED:
        raise InvalidArgument(f"one feedback judges at most {MAX_JUDGED} items, not {len(named)}")
    found: dict[str, tuple[str, str]] = {}
    wanted = set(named)
    for message in store.messages_by_id(owner_id, sorted(wanted)):  # by id: a long-lived owner is not loaded
        found[message.id] = ("archive", "message")
    for record in store.rows("episodic", owner_id):
        if isinstance(record, EpisodicRow) and record.id in wanted:
            found[record.id] = ("episodic", record.type)
    for trait in store.rows("persona", owner_id):
        if isinstance(trait, PersonaRow) and trait.id in wanted and trait.kind != STYLE_KIND:
            found[trait.id] = ("persona", trait.kind)
    for item in named:
        if item not in found:
            raise ItemNotFound(owner_id, item)
    if len(set(named)) != len(named):
        twice = sorted({i for i in named if named.count(i) > 1})
        raise InvalidArgument(f"an item is judged once per feedback: {', '.join(map(repr, twice))} named twice")
    tenant, user = split_owner(owner_id)
    good = set(helped)
    return AnswerFeedback(
        event_id=str(uuid.uuid4()),
        user_id=user,
        tenant=tenant,
        items=tuple(JudgedItem(i, *found[i], i in good) for i in named),
        occurred_at=at_ms,
    )


async def catch_up(log: EventLog, settings: Settings) -> None:
    """What ``adamem project`` (without ``--follow``) does: analyse and project everything pending.

    The store is opened as its writer for the pass and closed after it.
    """
    from adamem.analysis.factory import build_agent
    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_store
    from adamem.streams.generations import resolve_on_log
    from adamem.streams.pipeline import run_pipeline

    store = open_store(settings.store)
    try:
        resolved = await resolve_on_log(settings, store, log)
        await run_pipeline(log, Projector(store), build_agent(resolved), resolved, agent_factory=build_agent)
    finally:
        store.close()


async def wait_visible(
    log: EventLog,
    store: MemoryStore,
    settings: Settings,
    written: Mapping[str, Mapping[int, int]],
    timeout_s: float,
    *,
    poll_s: float = 0.05,
    advice: str = WORKERS_ADVICE,
) -> None:
    """Return once every offset in ``written`` (topic -> partition -> last offset) is reflected in ``store``.

    ``settings`` are those of the store's active generation (``streams.generations.resolve``);
    ``store`` is a reader (``open_store(url, read_only=True)``), which sees every writer's commit.
    Raises ``NotVisible`` after ``timeout_s``, saying how far the projections got and ``advice``.
    """
    from adamem.streams.visible import visible_offsets

    deadline = time.monotonic() + timeout_s
    while True:
        behind: list[tuple[str, int, int]] = []
        for topic, parts in sorted(written.items()):
            for p, offset in sorted(parts.items()):
                if (await visible_offsets(log, store, settings, p)).get(topic, 0) <= offset:
                    behind.append((topic, p, offset))
        if not behind:
            return
        if time.monotonic() >= deadline:
            where = ", ".join(f"partition {p} offset {o} of {t}" for t, p, o in behind)
            raise NotVisible(
                f"written events were not projected into {store.url} within {timeout_s:g} s: the projections did "
                f"not reach {where}; {advice}"
            )
        await asyncio.sleep(poll_s)


async def _settle(
    log: EventLog,
    store: MemoryStore | None,
    settings: Settings,
    written: Mapping[str, Mapping[int, int]],
    timeout_s: float,
    workers: bool | None,
) -> None:
    """Catch up here or leave it to the workers, then wait until ``written`` is visible in ``store``.

    Without a ``store``, the configured one is opened as a reader for the wait: only now, after
    the catch-up, so that a first write finds the store it made.
    """
    from adamem.projections.store.factory import open_store
    from adamem.streams.generations import active

    if not (workers if workers is not None else not settings.log.projected_here):
        await catch_up(log, settings)
    reader = store if store is not None else open_store(settings.store, read_only=True)
    try:
        await wait_visible(log, reader, active(settings, reader), written, timeout_s)
    finally:
        if store is None:
            reader.close()


async def append_and_wait(
    log: EventLog,
    store: MemoryStore | None,
    settings: Settings,
    topic: str,
    records: Sequence[OutgoingRecord],
    *,
    timeout_s: float = 60.0,
    workers: bool | None = None,
) -> dict[str, dict[int, int]]:
    """Append encoded ``records`` to ``topic`` (messages or control) and return once memory reflects them.

    Embedded and ``memory://`` logs are caught up in this process; a Kafka log (or ``workers=True``)
    is waited for. Returns the last offset written per partition, by topic.
    """
    last: dict[int, int] = {}
    for p, offset in await log.append(topic, records):
        last[p] = max(last.get(p, offset), offset)
    written = {topic: last}
    await _settle(log, store, settings, written, timeout_s, workers)
    return written


async def publish_and_wait(
    log: EventLog,
    store: MemoryStore | None,
    settings: Settings,
    messages: Sequence[ChatMessage],
    *,
    timeout_s: float = 60.0,
    workers: bool | None = None,
) -> PublishReport:
    """Publish validated messages as ``adamem publish`` does (sealed, in batches) and return once they are in memory."""
    report = await publish_messages(log, messages, settings)
    await _settle(log, store, settings, {report.topic: report.last}, timeout_s, workers)
    return report
