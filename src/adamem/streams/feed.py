"""The memory change feed on the log: publish each committed batch's ``MemoryChanged`` events, recover, recompute.

Topic ``<prefix>.changes``, keyed by the owner's bare user id like every topic, so an owner's
changes land on the partition of its messages and analyses (co-partitioned) in the order they
were folded. Each record carries one header, ``adamem-feed`` (``{"<analyses topic>": next
offset}``: below it, every committed change of the partition is published); the causing event's
position is in the event itself. Neither the pipeline's ``adamem-resume`` nor ``adamem-source``
is used: the embedded log and ``adamem log check`` read those as claims on the topics they name,
and the feed is derived data that vouches for nothing upstream.

**Delivery: at least once, after the commit.** A runner publishes a batch's events only after the
store committed the batch, so a subscriber never hears of a change it cannot read yet. A process
that dies between the commit and the publish leaves the feed behind the store; the next runner
to project the partition (once per process, before its first batch) compares the
``adamem-feed`` of the partition's newest change record with the store's checkpoint and, when
the feed is behind, computes the missing events again from the log (``compute_feed``: the owners
of that range folded from the partition's start, exactly as a replay would) and publishes them.
Events already published before the crash may so be published twice: **a consumer dedupes by
``event_id``**, which is derived from the owner, the source position and the part. A partition
whose feed has no record for the analyses topic (a store that ran before the feed existed, or a
switch to another generation) starts its feed at the store's checkpoint: nothing before it is
published again.

The feed is derived data: a replay of the log computes the same events (``compute_feed``), apart
from ``view``; after a message forget, the events of the forgotten message's earlier changes are
not recomputable (it is shredded) — the feed's recomputation then equals the replayed memory, as
the store does. The rows that ``replay.rebuild_owner`` rewrites after a message forget are not
reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from adamem.errors import AdaMemError
from adamem.events import ChatMessage
from adamem.feed import MemoryChanged
from adamem.owners import partition_key
from adamem.projections.feed import change_events
from adamem.projections.folds.apply import Positioned, apply
from adamem.projections.folds.params import SEED_DEFAULT, MemoryParameters
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.projector import Projector
from adamem.schemas.serde import decode_event, encode_event
from adamem.settings import Settings
from adamem.streams.keys import KeyRingLike, keystore_for
from adamem.streams.log import EventLog, OutgoingRecord

__all__ = [
    "FEED_HEADER",
    "compute_feed",
    "feed_records",
    "missing_feed",
    "publish_feed",
    "published_upto",
    "recover_feed",
]

FEED_HEADER = "adamem-feed"


def feed_records(feed: Sequence[MemoryChanged], reach: int) -> list[OutgoingRecord]:
    """The records of a committed batch's change events; the last one says the batch reached ``reach``."""
    out = []
    for i, event in enumerate(feed):
        upto = reach if i == len(feed) - 1 else event.source_offset
        resume = json.dumps({event.source_topic: upto}, separators=(",", ":")).encode()
        headers = ((FEED_HEADER, resume),)
        out.append(OutgoingRecord(partition_key(event.owner_id), encode_event(event), headers))
    return out


async def publish_feed(log: EventLog, settings: Settings, feed: Sequence[MemoryChanged], reach: int) -> int:
    """Append a committed batch's change events to the changes topic (one append); returns how many."""
    if feed:
        await log.append(settings.topic("changes"), feed_records(feed, reach))
    return len(feed)


async def published_upto(log: EventLog, settings: Settings, partition: int) -> int | None:
    """How far the feed of ``partition`` is published (an offset of the analyses topic), or None when unknown.

    Read from the ``adamem-feed`` header of the partition's newest change record; None when
    there is none, or it is of another analyses topic (generation).
    """
    topic = settings.topic("changes")
    end = (await log.end_offsets(topic)).get(partition, 0)
    if end == 0:
        return None
    analyses = settings.topic("analyses")
    async for rec in log.read(topic, from_offsets={partition: end - 1}, until={partition: end}):
        value = dict(rec.headers).get(FEED_HEADER)
        try:
            points = json.loads(value) if value is not None else {}
        except ValueError:
            return None
        upto = points.get(analyses) if isinstance(points, dict) else None
        return upto if type(upto) is int else None
    return None


async def compute_feed(
    log: EventLog,
    settings: Settings,
    partition: int,
    *,
    start: int = 0,
    end: int | None = None,
    view: str = "",
    params: MemoryParameters | Callable[[str], MemoryParameters] = SEED_DEFAULT,
    keys: KeyRingLike | None = None,
) -> list[MemoryChanged]:
    """The change events of the analyses at [start, end) of one partition, computed from the log alone.

    The owners that have events in that range are folded from the partition's start (in memory,
    no store), as a replay folds them; only the events from ``start`` on are returned. With
    ``start=0`` this is the whole feed a replay of the partition gives. ``params``: the fold
    parameters, or a function of the owner key giving them (``Projector.params_for``: per-tenant packs).
    """
    topic = settings.topic("analyses")
    stop = end if end is not None else (await log.end_offsets(topic)).get(partition, 0)
    ring = keys if keys is not None else keystore_for(log, settings)
    owners: set[str] | None = None
    if start > 0:
        owners = set()
        async for rec in log.read(topic, from_offsets={partition: start}, until={partition: stop}):
            owners.add(rec.key)  # bare user ids: every tenant's owner of that id is folded
    states: dict[str, OwnerMemory] = {}
    out: list[MemoryChanged] = []
    async for rec in log.read(topic, from_offsets={partition: 0}, until={partition: stop}):
        if owners is not None and rec.key not in owners:
            continue
        try:
            event = decode_event(rec.value, ring)
        except AdaMemError:
            continue  # dead-lettered when it was projected
        if isinstance(event, ChatMessage):
            continue
        owner = event.owner_id
        state = states.get(owner)
        if state is None:
            state = states[owner] = OwnerMemory(owner)
        positioned = Positioned(event, rec.topic, rec.partition, rec.offset)
        _, delta = apply(state, positioned, params(owner) if callable(params) else params)
        if rec.offset >= start and delta:
            out.extend(change_events(positioned, delta, view))
    return out


async def missing_feed(
    log: EventLog, projector: Projector, settings: Settings, partition: int
) -> tuple[list[MemoryChanged], int]:
    """The change events the store committed but the feed never got (a crash between the two), and their reach."""
    done = projector.store.checkpoint(partition).get(settings.topic("analyses"), 0)
    upto = await published_upto(log, settings, partition)
    if upto is None or upto >= done:
        return [], done
    feed = await compute_feed(
        log,
        settings,
        partition,
        start=upto,
        end=done,
        view=projector.store.view,
        params=projector.params_for,  # each owner at its tenant's recorded pace and relations
    )
    return feed, done


async def recover_feed(log: EventLog, projector: Projector, settings: Settings, partition: int) -> int:
    """Publish what the store committed but the feed never got (a crash between the two); returns events published."""
    feed, done = await missing_feed(log, projector, settings, partition)
    return await publish_feed(log, settings, feed, done)
