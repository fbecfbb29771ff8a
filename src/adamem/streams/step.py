"""The per-record steps of the write path, written once and run by every runner.

Two steps turn the log's input topics into memory; the in-process pipeline (``streams.pipeline``:
``adamem project``, replay's live twin) and the Faust worker (``streams.worker``) both call them,
as eventsourcing's ``policy()`` runs under several runners. They know neither Faust nor how a
runner reads, batches, sends or commits offsets:

* **analyse** — ``classify`` each message/control record (or name why it is dead-lettered),
  ``analyse`` the readable messages with the Memory Agent in one batch, and ``emit`` what goes on
  the log, in arrival order: an analysis, a forwarded control event, or a dead letter, each with
  its ``adamem-source`` header and the ``adamem-resume`` points (``streams.resume``) of its
  partition just after it. A forget destroys its keys before it is emitted (crypto-shredding).
* **fold** — ``decode_analysis`` reads an analyses record as the folds see it (or the error it
  is dead-lettered with), and ``fold`` commits a partition's batch through the projector, then
  hands its change events to the runner's ``publish`` and rebuilds the owners of the message
  forgets it folded (``rebuild_after_forgets``).

The runner flushes the keystore before it sends what ``emit`` made (the keys of what is sent are
durable first) and decides where dead letters go and when.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from adamem.analysis.agent import MemoryAgent
from adamem.errors import AdaMemError
from adamem.events import (
    AnswerFeedback,
    ChatMessage,
    GrantChanged,
    MemoryCompressed,
    MemoryCorrected,
    MemoryForgotten,
    MessageAnalyzed,
)
from adamem.feed import MemoryChanged
from adamem.partitioning import misplaced
from adamem.projections.folds.apply import Positioned
from adamem.projections.projector import BatchResult, Projector
from adamem.schemas.serde import decode_event, encode_event, reframe
from adamem.settings import Settings
from adamem.streams.keys import KeyRingLike, destroy_keys, keystore_for
from adamem.streams.log import EventLog, LogRecord, OutgoingRecord
from adamem.streams.resume import FOR_HEADER, RESUME_HEADER, SOURCE_HEADER, ResumeTracker, resume_header, source_of

__all__ = [
    "ERROR_HEADER",
    "Analysed",
    "Emitted",
    "Handled",
    "analyse",
    "classify",
    "dead_letter_record",
    "decode_analysis",
    "emit",
    "fold",
    "readable",
    "rebuild_after_forgets",
]

_LOG = logging.getLogger("adamem.step")
_R = TypeVar("_R")

ERROR_HEADER = "adamem-error"
"""On every dead letter: why the record could not be handled (UTF-8, at most 4000 bytes)."""

Handled = ChatMessage | MemoryForgotten | MemoryCorrected | GrantChanged | AnswerFeedback | MemoryCompressed | str
"""An input record's event, or why it is dead-lettered."""


def classify(rec: LogRecord, partitions: int, keys: KeyRingLike | None = None) -> Handled:
    """An input record's event, or the error it is dead-lettered with.

    With ``keys`` a sealed message is opened (or comes back ``shredded``: its key is gone).
    """
    try:
        event = decode_event(rec.value, keys)
    except AdaMemError as exc:
        return f"{type(exc).__name__}: {exc}"
    if isinstance(event, MessageAnalyzed):
        return f"a MessageAnalyzed event does not belong on {rec.topic}"
    if event.user_id != rec.key:
        return f"record key {rec.key!r} is not the event's owner {event.user_id!r}"
    return misplaced(rec.key, rec.topic, rec.partition, partitions) or event


def dead_letter_record(
    rec: LogRecord, error: str, points: Mapping[str, int] | None = None, of: str = ""
) -> OutgoingRecord:
    """The dead letter of ``rec``: its bytes, error and source, on the partition it arrived on.

    With ``points`` it also records progress (``adamem-resume``): how far the input topics of that
    partition are handled once it is on the log; with ``of``, for the analyses topic of that name
    (``adamem-for``).
    """
    headers = [(SOURCE_HEADER, source_of(rec)), (ERROR_HEADER, error.encode("utf-8", "replace")[:4000])]
    if points is not None:
        headers.append((RESUME_HEADER, resume_header(points)))
        if of:
            headers.append((FOR_HEADER, of.encode()))
    return OutgoingRecord(rec.key, rec.value, tuple(headers), partition=rec.partition)


@dataclass(frozen=True)
class Analysed:
    """An input record, what it is (``classify``), and its analysis when it is a readable message."""

    record: LogRecord
    event: Handled
    analysis: MessageAnalyzed | None = None


def readable(event: Handled) -> bool:
    """True for a message the Memory Agent analyses: decoded, and its key not shredded."""
    return isinstance(event, ChatMessage) and not event.shredded


def analyse(agent: MemoryAgent, handled: Iterable[tuple[LogRecord, Handled]]) -> list[Analysed]:
    """Run the Memory Agent once over the readable messages of a batch; every record paired with its outcome.

    Blocking (the model runs here): a runner on an event loop calls it in a thread. The Memory
    Agent's errors propagate.
    """
    pairs = list(handled)
    messages = [event for _, event in pairs if isinstance(event, ChatMessage) and not event.shredded]
    results = iter(agent.analyze(messages) if messages else [])
    return [Analysed(rec, event, next(results) if readable(event) else None) for rec, event in pairs]


@dataclass(frozen=True)
class Emitted:
    """A record the analyse step puts on the log: ``record`` for ``topic`` (analyses, dead letters) for ``source``."""

    topic: str
    record: OutgoingRecord
    source: Analysed

    @property
    def dead(self) -> bool:
        """True for a dead letter."""
        return isinstance(self.source.event, str)


def emit(
    items: Iterable[Analysed], trackers: Mapping[int, ResumeTracker], settings: Settings, keys: KeyRingLike
) -> Iterator[Emitted]:
    """What a batch puts on the log, in the order of ``items`` (arrival order), one record at a time.

    Each record counts as handled in the tracker of its partition (``trackers``) and carries that
    partition's points just after it, so whatever
    is on the log when a process dies says exactly what is handled. A shredded message (forgotten
    before it was analysed, or the wrong keystore) is handled but writes nothing; a forget destroys
    its keys when it is emitted, before it can be sent, so no replay reads what it names. Analyses
    are keyed by their owner (the log puts them on the owner's partition, which is the input's:
    a misplaced input is dead-lettered); dead letters go to the partition their input came from.
    """
    analyses, deadletter = settings.topic("analyses"), settings.topic("deadletter")
    for item in items:
        rec, event = item.record, item.event
        tracker = trackers[rec.partition]
        tracker.handled(rec.topic, rec.offset)
        points = tracker.points()
        if isinstance(event, ChatMessage) and event.shredded:
            _LOG.warning("message %s of %s has no key in %s: not analysed", event.event_id, event.owner_id, keys)
            continue
        if isinstance(event, str):
            yield Emitted(deadletter, dead_letter_record(rec, event, points, analyses), item)
            continue
        if isinstance(event, MemoryForgotten):
            destroy_keys(keys, event)  # before it is forwarded: no replay can read what it names
        value = encode_event(item.analysis, keys) if item.analysis is not None else reframe(rec.value)  # spec's order
        headers = ((SOURCE_HEADER, source_of(rec)), (RESUME_HEADER, resume_header(points)))
        yield Emitted(analyses, OutgoingRecord(event.user_id, value, headers), item)


def decode_analysis(rec: LogRecord, keys: KeyRingLike) -> Positioned | str:
    """An analyses record as the folds read it, or the error it is dead-lettered with.

    A forget destroys its keys (again: idempotent) before it is folded, since another analyzer
    may have forwarded it without destroying them.
    """
    try:
        event = decode_event(rec.value, keys)
        if isinstance(event, ChatMessage):
            raise AdaMemError("a raw ChatMessage does not belong on the analyses topic")
    except AdaMemError as exc:
        return f"{type(exc).__name__}: {exc}"
    if isinstance(event, MemoryForgotten):
        destroy_keys(keys, event)
    return Positioned(event, rec.topic, rec.partition, rec.offset)


async def _inline(call: Callable[[], _R]) -> _R:
    return call()


async def fold(
    log: EventLog,
    projector: Projector,
    settings: Settings,
    partition: int,
    events: Sequence[Positioned],
    upto: int,
    publish: Callable[[Sequence[MemoryChanged], int], Awaitable[object]],
    *,
    rebuild_from: int = 0,
    blocking: Callable[[Callable[[], BatchResult]], Awaitable[BatchResult]] = _inline,
) -> BatchResult:
    """Commit a partition's batch of analyses (offset order) into its shard, up to ``upto``; then the rest.

    The commit runs through ``blocking`` (a runner on an event loop passes ``asyncio.to_thread``);
    once it is committed its change events go to ``publish(feed, reach)`` (subscribers may hear
    of it now), and the owners of message forgets at offsets from ``rebuild_from`` on are rebuilt
    from the log (``rebuild_after_forgets``), reading it through ``log``.
    """
    topic = settings.topic("analyses")
    result = await blocking(functools.partial(projector.apply_batch, partition, topic, events, upto))
    await publish(result.feed, result.reach)
    await rebuild_after_forgets(log, projector, settings, partition, [e for e in events if e.offset >= rebuild_from])
    return result


async def rebuild_after_forgets(
    log: EventLog, projector: Projector, settings: Settings, partition: int, applied: Sequence[Positioned]
) -> int:
    """After a batch that folded message forgets: rebuild each such owner in place from the log; owners rebuilt.

    The live fold saw the forgotten message readable, a replay sees it shredded; the folds agree on
    what a forget removes but not on what the message changed in others (ids, routing, seq), so the
    owner is folded again from the log, where the message is now shredded. Rows that changed are
    committed, and the shard's history erased once more (they may hold the message's effects).
    """
    from adamem.streams.replay import rebuild_owner

    owners = sorted(
        {p.event.owner_id for p in applied if isinstance(p.event, MemoryForgotten) and p.event.scope == "message"}
    )
    if not owners:
        return 0
    changed = False
    for owner in owners:
        report = await rebuild_owner(
            log, projector.store, settings, owner, keys=keystore_for(log, settings), forgets=True
        )
        changed = changed or report.switched
    projector.forget_cache()  # the states cached for these owners are not their rows any more
    if changed:
        projector.store.erase_history(partition)
    return len(owners)
