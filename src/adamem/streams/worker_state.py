"""What one Faust worker holds between batches, and the batch handlers that read and change it.

``streams.worker.create_app`` makes one ``WorkerState`` and wires Faust to it: the ``analyze``
agent hands each micro-batch to ``WorkerState.analyze``, the ``project`` agent to
``WorkerState.project``, a timer to ``measure_lag``, and the rebalance signals to ``assigned``
and ``revoked``. The handlers run the steps every runner shares (``streams.step``) and send
through the Faust topics they are given. The state:

* the Memory Agent, the projector and the keystore, made on first use;
* caches of what the log says, cleared by every rebalance: ``resume`` (per partition, how far
  the analyses topic accounts for both input topics) and ``dead_letters`` (how far the analyses
  topic is dead-lettered), with ``epoch``, bumped by each rebalance so that a batch begun before
  one leaves ``resume`` alone;
* what the status line and the lag metric show (``counts``, ``held``, ``positions``), the
  generation to follow (``restart_for``), and with transactions the analyze step's producers
  (``txns``) and the project step's reader of where transactions end (``committed_ends``);
* with ``ADAMEM_COMPRESSION`` set, the compressor and the compressions sent but not yet folded (``proposed``).

A batch belongs to the assignment it began in. Faust lets a rebalance revoke partitions while a
batch runs (``stream_wait_empty=False``), and a paused worker goes on with its batch when it
wakes, so ``project`` touches a partition's shard only while this worker still holds it in that
assignment (``epoch`` unchanged): opening a shard claims it and fences its real owner out. Events
fetched in an older consumer generation are not folded: the partition is read again from its
committed offset by whoever holds it now. And the group's offset of an analyses partition never
passes an event that was not folded: ``acks`` withholds the acks of such events (``unfolded``).

The rebalance handlers run on the event loop while a batch folds on a thread, so the two take turns
(``shard_work``): ``assigned`` and ``revoked`` wait for the shard work under way, and each piece of
shard work (reading a checkpoint, folding a partition's batch, proposing compressions) checks that
its partition is still held before it starts. Else a handler forgot the projector's cached states
half-way through a fold (its later events read their owner again from the store, without the
batch's first events) and released the shard under it (its next read opened the shard again and
claimed it, a new owner's claim or not). Faust's rebalances revoke every member's partitions
before any is assigned, so a batch finished while ``revoked`` waits commits before the next owner
claims the shard.

Compression (``streams.compress``): once a partition's batch is committed, and while this worker
still holds the partition, ``project`` proposes the compressions of the owners that batch folded
events of and sends them to the control topic on that partition, as the in-process pipeline
appends them. The analyze agent forwards them to the analyses topic like any control event, and
this agent folds them there, where replay meets them too. A proposal that fails is logged, never
raised: the batch stays committed, and the next batch of those owners proposes again (a
compression's event id is its source records', so proposing twice folds once).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from adamem import metrics
from adamem.analysis.agent import MemoryAgent
from adamem.errors import LogError, LogFenced, StoreError, StoreFenced
from adamem.events import ChatMessage, MemoryCompressed
from adamem.feed import MemoryChanged
from adamem.projections.compressor import Compressor
from adamem.projections.folds.apply import Positioned
from adamem.projections.projector import Projector
from adamem.settings import Settings
from adamem.streams.compress import compressions, compressor_for, control_records
from adamem.streams.feed import feed_records, missing_feed
from adamem.streams.keys import KeyRingLike, keystore_for
from adamem.streams.log import EventLog, LogRecord, OutgoingRecord
from adamem.streams.metrics import ConsumerPositions
from adamem.streams.resume import ResumeTracker, dead_lettered_below, resume_points
from adamem.streams.step import (
    Analysed,
    Handled,
    analyse,
    classify,
    dead_letter_record,
    decode_analysis,
    emit,
    fold,
    readable,
)

if TYPE_CHECKING:
    from adamem.streams.kafka_transactions import CommittedEnds, Outgoing, PartitionTransactions

__all__ = ["REFOLDS", "WorkerState", "WorkerTopics"]

log = logging.getLogger("adamem.worker")
_T = TypeVar("_T")

REFOLDS = 3
"""How many times the project agent folds a batch again after a refused commit to a partition it still holds."""

RECLAIM_WAIT_S = 1.0
"""Before it claims back a shard another writer claimed, the project agent waits this long times the attempt.

The other writer is a worker that has not yet heard that it lost the partition (it was paused past
its session timeout), or this worker is that one: within a heartbeat the stale one hears of the
rebalance and gives the batch up, so the worker that still holds the partition claims it once."""


def _record(event: Any) -> LogRecord:
    """A Faust event's record as the steps read it (key bytes that are not UTF-8 come out replaced)."""
    m = event.message
    key = (m.key or b"").decode("utf-8", "replace")
    return LogRecord(m.topic, m.partition, m.offset, key, m.value or b"", m.timestamp or 0)


def _position(rec: LogRecord | Any) -> tuple[str, int, int]:
    """Where a record (or a Faust event's message) is: topic, partition, offset."""
    m = rec if isinstance(rec, LogRecord) else rec.message
    return (m.topic, m.partition, m.offset)


@dataclass(frozen=True)
class WorkerTopics:
    """The Faust topics the handlers send to (raw bytes; ``send`` returns the broker's future)."""

    analyses: Any
    deadletter: Any
    changes: Any
    control: Any
    """Where the project agent sends the compressions it proposes (``streams.compress``)."""


class WorkerState:
    """One worker process's caches, lazily made parts and counters, and the batch handlers over them."""

    def __init__(
        self,
        settings: Settings,
        bootstrap: str,
        group: str,
        agent_factory: Callable[[], MemoryAgent],
        projector_factory: Callable[[], Projector],
        topics: WorkerTopics,
        *,
        restart: Callable[[], None] | None = None,
        log_reader: Callable[[], EventLog] | None = None,
        generation: Callable[[], int | None] = lambda: None,
        follows_active_view: bool = True,
    ) -> None:
        self.settings = settings
        self.follows_active_view = follows_active_view
        """False for a member of a reanalysis: it analyses its generation whatever view is active."""
        self._generation = generation
        self.topics = topics
        self._bootstrap = bootstrap
        self._agent_factory = agent_factory
        self._projector_factory = projector_factory
        self._restart = restart
        self._log_reader = log_reader
        self._agent: MemoryAgent | None = None
        self._projector: Projector | None = None
        self._keys: KeyRingLike | None = None
        self.resume: dict[int, dict[str, int]] = {}
        """Partition -> input topic -> next offset not yet accounted for by the analyses topic."""
        self.epoch = 0
        """Bumped by every rebalance; a batch begun before one leaves ``resume`` alone."""
        self.dead_letters: dict[int, int] = {}
        """Partition -> how far the analyses topic is dead-lettered (read once per assignment)."""
        self.counts = {"analyzed": 0, "folded": 0}
        """Events handled, for the status line (``adamem worker``)."""
        self.held: set[int] = set()
        """Partitions this worker holds now."""
        self.unfolded: dict[int, set[int]] = defaultdict(set)
        """Analyses partition -> offsets of events this assignment acks without folding them (``acks``)."""
        self.positions = ConsumerPositions()
        """``adamem_consumer_lag_events``, refreshed by ``measure_lag``."""
        self.restart_for: str | None = None
        """The generation to follow, once the active view switched to it."""
        self.txns: PartitionTransactions | None = None
        """The transactional producers of the analyze step, one per input partition."""
        self.committed_ends: CommittedEnds | None = None
        """Where the project agent may record its position past transaction markers."""
        self.shard_work = asyncio.Lock()
        """Held by each piece of the project agent's work on a shard and by the rebalance handlers (module notes)."""
        self._compressor: Compressor | None = None
        self.proposed: set[str] = set()
        """Ids of the compressions this process sent and has not yet met on the analyses topic (not sent again)."""
        if settings.worker_transactions and log_reader is None:
            from adamem.streams.kafka_transactions import CommittedEnds, PartitionTransactions

            self.txns = PartitionTransactions(bootstrap, settings, group)
            self.committed_ends = CommittedEnds(bootstrap, settings)

    @property
    def transactional_topics(self) -> frozenset[str]:
        """Input topics whose consumer offsets only the transactions commit (none without transactions)."""
        if self.txns is None:
            return frozenset()
        return frozenset({self.settings.topic("messages"), self.settings.topic("control")})

    async def stop(self) -> None:
        """Close the transactional producers and the reader of transaction ends."""
        if self.txns is not None:
            await self.txns.stop()
        if self.committed_ends is not None:
            await self.committed_ends.stop()

    # -- parts made on first use ------------------------------------------------------------------

    def memory_agent(self) -> MemoryAgent:
        """The Memory Agent (its models load on first use)."""
        if self._agent is None:
            self._agent = self._agent_factory()
        return self._agent

    def projector(self) -> Projector:
        """The projector over the store, bound to the topics' partitions."""
        if self._projector is None:
            projector = self._projector_factory()
            projector.store.bind(self.settings.partitions)
            projector.feed &= self.settings.change_feed  # ADAMEM_CHANGE_FEED=false: no feed computed or sent
            self._projector = projector
        return self._projector

    def reader(self) -> EventLog:
        """A reader of the log: to fill projection gaps and find what is already analysed (default: Kafka)."""
        if self._log_reader is not None:
            return self._log_reader()
        from adamem.streams.kafka_log import KafkaLog

        return KafkaLog(self._bootstrap, self.settings)

    def keyring(self) -> KeyRingLike:
        """The keystore of the log (crypto-shredding): messages are opened and analyses sealed with it."""
        if self._keys is None:
            self._keys = keystore_for(self.reader(), self.settings)
        return self._keys

    # -- rebalances -------------------------------------------------------------------------------

    def _forget_partitions(self, partitions: Iterable[int]) -> None:
        self.resume.clear()  # another worker may analyse these partitions now
        self.dead_letters.clear()
        self.epoch += 1
        for p in partitions:  # read again from the committed offset, which never passed them
            self.unfolded.pop(p, None)
        if self._projector is not None:
            self._projector.forget_cache()
            self._projector.feed_checked.clear()  # another worker may fold (and send) these partitions now
            self._projector.store.release(sorted(partitions))

    async def revoked(self, sender: Any, revoked: Any, **kwargs: Any) -> None:
        """Faust's ``on_partitions_revoked``: let go of the partitions and of everything read about them.

        After the shard work under way (``shard_work``).
        """
        async with self.shard_work:
            self.held.difference_update(tp.partition for tp in revoked)
            if self.txns is not None:
                messages = self.settings.topic("messages")
                await self.txns.release(sorted({tp.partition for tp in revoked if tp.topic == messages}))
            self._forget_partitions({tp.partition for tp in revoked})

    async def assigned(self, sender: Any, assigned: Any, **kwargs: Any) -> None:
        """Faust's ``on_partitions_assigned``: hold these partitions; read their tails afresh when needed.

        After the shard work under way (``shard_work``).
        """
        async with self.shard_work:
            self.held.clear()
            self.held.update(tp.partition for tp in assigned)
            ours = {self.settings.topic(t) for t in ("messages", "control", "analyses")}  # not Faust's own topics
            self.positions.assign((tp.topic, tp.partition) for tp in assigned if tp.topic in ours)
            self._forget_partitions({tp.partition for tp in assigned})

    def _holds(self, partition: int, epoch: int) -> bool:
        """True while this worker holds ``partition`` in the assignment of ``epoch`` (no rebalance since)."""
        return self.epoch == epoch and partition in self.held

    async def _on_shard(self, partition: int, epoch: int, work: Callable[[], _T]) -> _T | None:
        """``work()`` on a thread, as shard work, if this worker still holds ``partition`` in the assignment of
        ``epoch``; None if it does not (nothing run)."""
        async with self.shard_work:
            if not self._holds(partition, epoch):
                return None
            with self.projector().store.held_view():  # one view for the work (``_fold``)
                return await asyncio.to_thread(work)

    async def _checkpoint(self, partition: int, epoch: int) -> dict[str, int] | None:
        """The shard's checkpoint (next offset per topic), read as shard work (``_on_shard``); None if not held."""
        store = self.projector().store
        return await self._on_shard(partition, epoch, functools.partial(store.checkpoint, partition))

    def acks(self, message: Any) -> bool:
        """Whether Faust may record the ack of a consumed message (and so commit the group's offset past it).

        Not for a message fetched in an older consumer generation (its partition is read again from
        the committed offset after the rebalance), nor for an analyses event that was not folded
        (its batch was given up): the group's offset stays below it, and the partition's next reader
        reads it again.
        """
        generation = self._generation()
        if generation is not None and message.generation_id not in (None, generation):
            return False
        if message.topic == self.settings.topic("analyses"):
            return message.offset not in self.unfolded.get(message.partition, ())
        return True

    # -- generations ------------------------------------------------------------------------------

    def switched_generation(self) -> str | None:
        """The active view's generation when it is no longer this worker's (a reanalysis was switched to)."""
        if not self.follows_active_view:
            return None
        record = self.projector().store.generation()
        name = record.get("name", self.settings.generation) if record else self.settings.generation
        return None if name == self.settings.generation else str(name)

    async def stop_for(self, generation: str) -> None:
        """Stop handling events and restart to follow ``generation`` (once)."""
        if not self.restart_for:
            log.warning(
                "the active view now projects analysis generation %s (this worker: %s); restarting to follow it",
                generation,
                self.settings.generation,
            )
            self.restart_for = generation
            if self._restart is not None:
                self._restart()
            else:
                os.kill(os.getpid(), signal.SIGTERM)  # a graceful stop; run_worker starts again

    # -- the analyze agent ------------------------------------------------------------------------

    async def accounted(self, partition: int, *, claim: bool = True) -> dict[str, int]:
        """How far the analyses topic accounts for both input topics of a partition (``resume``).

        With transactions, the partition's producer is claimed first: whatever an older owner had
        open is then finished, and what it publishes later is refused, so the tail read next is final
        until this worker is fenced. Without ``claim`` (the lag metric) nothing is claimed, and the
        tail read is not kept; nor is a partition this worker no longer holds claimed (a batch fetched
        before a rebalance would fence the partition's new owner for nothing: it publishes none of it).
        """
        settings, resume = self.settings, self.resume
        topics = (settings.topic("messages"), settings.topic("control"))
        if self.txns is not None and not self.txns.holds(partition):
            resume.pop(partition, None)
            if not claim or partition not in self.held:  # a partition lost meanwhile is left to its owner
                found = await resume_points(self.reader(), settings, partition)
                return {t: found.get(t, 0) for t in topics}
            await self.txns.claim([partition])
        if partition not in resume:
            epoch = self.epoch
            found = await resume_points(self.reader(), settings, partition)
            points = {t: found.get(t, 0) for t in topics}
            # The tail was read while other work went on: a commit of this partition since stored its points
            # (newer than this read), or a rebalance cleared them. Either way what was read is not kept:
            # kept, the lag timer's read overwrote the points of a transaction committed meanwhile, and
            # the next batch published that transaction's analyses again (seen in the group test).
            if not claim or self.epoch != epoch or partition in resume:
                return resume.get(partition, points)
            resume[partition] = points
        return resume[partition]

    async def already_analysed(self, event: Any) -> bool:
        """True for a message or control event that this generation's analyses already hold.

        The analyses topic itself is the record of what was analysed (its ``adamem-resume`` and
        ``adamem-source`` headers), so a redelivery, or a new consumer group after a generation
        switch, never analyses a message twice.
        """
        m = event.message
        return bool(m.offset < (await self.accounted(m.partition)).get(m.topic, 0))

    def _classify(self, event: Any) -> tuple[LogRecord, Handled]:
        try:
            (event.message.key or b"").decode("utf-8")
        except UnicodeDecodeError as exc:
            return _record(event), f"UnicodeDecodeError: the record key is not UTF-8 ({exc})"
        rec = _record(event)
        return rec, classify(rec, self.settings.partitions, self.keyring())

    def _dead_lettered(self, rec: LogRecord, error: str, stage: str) -> None:
        """The log line and metric of a dead letter made by ``stage`` (``analyze`` or ``project``)."""
        log.warning("dead-lettered %s:%d:%d: %s", rec.topic, rec.partition, rec.offset, error)
        metrics.DEAD_LETTERS.labels(stage, metrics.dead_letter_reason(error)).inc()

    async def _to_deadletter(self, event: Any, letter: OutgoingRecord, error: str, stage: str) -> Any:
        """Send an event's dead letter (its headers from ``letter``) with the event's own bytes; the send's future."""
        self._dead_lettered(_record(event), error, stage)
        m = event.message
        return await self.topics.deadletter.send(
            key=m.key, value=m.value, partition=m.partition, headers=list(letter.headers)
        )

    async def analyze(self, events: Sequence[Any]) -> None:
        """Analyse a batch; each analyses record says how far both input topics are accounted for.

        This one agent consumes both input topics, one batch at a time, each topic partition in
        offset order from where the group committed (everything below that was handled and
        acked). So once an event is handled, its topic is accounted for up to it, and the other
        topic up to what this worker handled of it, or else what the analyses topic said when the
        partition was assigned: never more than what is on the log. Analyses and dead letters
        (which carry the same header) are sent in the batch's order, and each run of one kind is
        acked before a record of the other kind that counts it is sent.
        """
        changed = await asyncio.to_thread(self.switched_generation)
        if changed is not None:
            await self.stop_for(changed)
            return
        epoch = self.epoch
        events = self._current(events)
        fresh = {e.message.partition for e in events} - set(self.resume)  # their tail is read in this batch
        todo = [event for event in events if not await self.already_analysed(event)]
        trackers: dict[int, ResumeTracker] = {}
        for p in sorted({e.message.partition for e in todo}):
            waiting = [(e.message.topic, e.message.offset) for e in todo if e.message.partition == p]
            trackers[p] = ResumeTracker(await self.accounted(p), waiting)
        handled = [self._classify(event) for event in todo]
        if any(readable(d) for _, d in handled):
            items = await asyncio.to_thread(analyse, self.memory_agent(), handled)
        else:
            items = [Analysed(rec, d) for rec, d in handled]
        metrics.EVENTS_ANALYSED.inc(sum(1 for item in items if item.analysis is not None))
        metrics.EVENTS_FORWARDED.inc(sum(1 for _, d in handled if not isinstance(d, (str, ChatMessage))))
        raw = {_position(event): event for event in todo}
        if self.txns is not None:
            for p in sorted(trackers):
                await self._publish(p, [x for x in items if x.record.partition == p], events, raw)
            self.counts["analyzed"] += len(todo)
            for event in events:
                self.positions.handled(event.message.topic, event.message.partition, event.message.offset)
            return
        items = await self._analysed_meanwhile(items, fresh, trackers)
        await self._send(items, trackers, raw)
        self.counts["analyzed"] += len(todo)
        if self.epoch == epoch:  # else resume was cleared: the next event reads the log again
            for p, tracker in trackers.items():
                self.resume[p] = tracker.points()
        for event in events:
            self.positions.handled(event.message.topic, event.message.partition, event.message.offset)

    def _current(self, events: Sequence[Any]) -> list[Any]:
        """The events of a batch to analyse: once each, and none fetched in an older consumer generation.

        A worker that gets a partition back in a rebalance reads it again from the group's offset,
        while events it fetched before the rebalance may still be on their way: one batch can then
        hold the same record twice. The older copy is left (its ack is withheld, ``acks``) and a
        record is analysed once however often it comes.
        """
        generation = self._generation()
        seen: set[tuple[str, int, int]] = set()
        current = []
        for event in events:
            m = event.message
            if generation is not None and m.generation_id not in (None, generation):
                continue
            if (position := (m.topic, m.partition, m.offset)) not in seen:
                seen.add(position)
                current.append(event)
        if len(current) < len(events):
            log.info(
                "left %d event(s) fetched before a rebalance, or twice, to be read again", len(events) - len(current)
            )
        return current

    async def _send(
        self, items: list[Analysed], trackers: Mapping[int, ResumeTracker], raw: Mapping[tuple[str, int, int], Any]
    ) -> None:
        """Send a batch's analyses and dead letters in order, without transactions; wait for the broker."""
        if not items:
            return
        sends: list[Any] = []
        sending_to = None
        keys = self.keyring()
        for out in emit(items, trackers, self.settings, keys):
            rec = out.source.record
            target = self.topics.deadletter if out.dead else self.topics.analyses
            if target is not sending_to:  # in order: what is sent before a record is acked before it
                for fut in sends:
                    await fut
                sends, sending_to = [], target
            if out.dead:
                error = str(out.source.event)
                sends.append(await self._to_deadletter(raw[_position(rec)], out.record, error, "analyze"))
                continue
            keys.flush()  # the keys of what is sent are durable first
            sends.append(
                await target.send(
                    key=out.record.key.encode("utf-8"),
                    value=out.record.value,
                    partition=rec.partition,
                    headers=list(out.record.headers),
                )
            )
        for fut in sends:
            await fut  # acked by the broker before the batch's offsets may be committed

    def _outgoing(
        self, partition: int, items: list[Analysed], points: dict[str, int], raw: Mapping[tuple[str, int, int], Any]
    ) -> tuple[list[Outgoing], dict[str, int]]:
        """A partition's records to publish, for the items not accounted for by ``points``; the points after them."""
        todo = [x for x in items if x.record.offset >= points.get(x.record.topic, 0)]
        tracker = ResumeTracker(points, [(x.record.topic, x.record.offset) for x in todo])
        out: list[Outgoing] = []
        for emitted in emit(todo, {partition: tracker}, self.settings, self.keyring()):
            rec, headers = emitted.source.record, list(emitted.record.headers)
            if emitted.dead:
                self._dead_lettered(rec, str(emitted.source.event), "analyze")
                m = raw[_position(rec)].message
                out.append((emitted.topic, m.key or b"", m.value or b"", headers))
            else:
                out.append((emitted.topic, emitted.record.key.encode("utf-8"), emitted.record.value, headers))
        self.keyring().flush()  # the keys of what is sent are durable first
        return out, tracker.points()

    async def _publish(
        self, partition: int, items: list[Analysed], events: Sequence[Any], raw: Mapping[tuple[str, int, int], Any]
    ) -> None:
        """Publish a partition's part of a batch in one transaction, with the consumer offsets of its inputs.

        Refused (another worker claimed the partition, or the broker failed): the partition is
        claimed again, its tail read again, and only what is still not accounted for is published,
        until this worker no longer holds the partition (its new owner analyses the rest).
        """
        assert self.txns is not None
        offsets: dict[str, int] = {}
        for event in events:
            m = event.message
            if m.partition == partition:
                offsets[m.topic] = max(offsets.get(m.topic, 0), m.offset + 1)
        for attempt in range(1, 61):
            if partition not in self.held:
                log.warning("p%d was revoked: its new owner analyses %d record(s) of this batch", partition, len(items))
                return
            try:
                records, points = self._outgoing(partition, items, await self.accounted(partition), raw)
                await self.txns.commit(partition, records, offsets)
            except LogFenced as exc:
                log.warning("p%d: transaction refused (attempt %d): %s", partition, attempt, exc)
            except LogError as exc:
                log.warning("p%d: transaction failed (attempt %d): %s", partition, attempt, exc)
                await asyncio.sleep(min(5.0, 0.2 * attempt))
            else:
                log.info("p%d: committed %d record(s); input offsets %s", partition, len(records), offsets)
                # Exactly what the log accounts for now, whatever was read meanwhile: nobody else committed
                # since this worker's claim, or the commit would have been refused.
                self.resume[partition] = points
                return
        raise LogError(f"p{partition}: no transaction of this batch was accepted in 60 attempts; restarting")

    async def _analysed_meanwhile(
        self, items: list[Analysed], fresh: set[int], trackers: dict[int, ResumeTracker]
    ) -> list[Analysed]:
        """Drop what another worker put on the log while this batch ran, for partitions just assigned.

        When a partition moves, its old owner may still send the batch it began before the move; the
        new owner read the partition's tail before that landed, and then ran the model (seconds, the
        first time). Reading the tail again just before sending catches that batch: its records are
        skipped here, not analysed twice. (A batch landing later still can; the folds absorb it.)
        """
        settings = self.settings
        for p in sorted(fresh & set(trackers)):
            found = await resume_points(self.reader(), settings, p)
            before = self.resume.get(p, {})
            now = {
                t: max(before.get(t, 0), found.get(t, 0))
                for t in (settings.topic("messages"), settings.topic("control"))
            }
            if now == {t: before.get(t, 0) for t in now}:
                continue
            kept = [x for x in items if x.record.partition != p or x.record.offset >= now[x.record.topic]]
            log.info("p%d: %d record(s) were analysed by another worker meanwhile", p, len(items) - len(kept))
            items = kept
            self.resume[p] = now
            waiting = [(x.record.topic, x.record.offset) for x in items if x.record.partition == p]
            trackers[p] = ResumeTracker(now, waiting)
        return items

    # -- the project agent ------------------------------------------------------------------------

    async def project(self, events: Sequence[Any]) -> None:
        """Fold a batch of analyses, each partition's part into its shard, past the shard's checkpoint.

        Only partitions this worker holds in the assignment the batch began in are touched (module
        notes); the events of the others, and events of an older consumer generation, are left
        unfolded and unacked for whoever holds their partition now.
        """
        changed = await asyncio.to_thread(self.switched_generation)
        if changed is not None:
            await self.stop_for(changed)  # never fold one generation's analyses into another's view
            return
        epoch, generation = self.epoch, self._generation()
        topic = self.settings.topic("analyses")
        current = [e for e in events if generation is None or e.message.generation_id in (None, generation)]
        if len(current) < len(events):
            log.info("left %d event(s) fetched before a rebalance to be read again", len(events) - len(current))
            kept = {id(e) for e in current}
            self._leave_unfolded(e for e in events if id(e) not in kept)
        by_partition: dict[int, list[Positioned]] = defaultdict(list)
        reach: dict[int, int] = {}
        done: dict[int, int] = {}
        dead: list[Any] = []
        for event in current:
            m = event.message
            if not self._holds(m.partition, epoch):
                continue  # never open (and so claim) the shard of a partition this worker lost
            if m.partition not in done:
                checkpoint = await self._checkpoint(m.partition, epoch)
                if checkpoint is None:
                    continue  # lost while this batch waited for a rebalance
                done[m.partition] = checkpoint.get(topic, 0)
            reach[m.partition] = max(reach.get(m.partition, 0), m.offset + 1)
            rec = _record(event)
            decoded = decode_analysis(rec, self.keyring())
            if isinstance(decoded, str):
                if m.offset >= done[m.partition] and m.offset >= await self._dead_below(m.partition):
                    letter = dead_letter_record(rec, decoded, {topic: m.offset + 1})
                    dead.append(await self._to_deadletter(event, letter, decoded, "project"))
                    self.dead_letters[m.partition] = m.offset + 1
                continue  # else dead-lettered already (a redelivery)
            by_partition[m.partition].append(decoded)
            if isinstance(decoded.event, MemoryCompressed):
                self.proposed.discard(decoded.event.event_id)  # back from the log: no longer waiting
        for fut in dead:
            await fut  # on the log before the checkpoint that passes them
        for partition in sorted({e.message.partition for e in current}):
            mine = [e for e in current if e.message.partition == partition]
            if partition not in reach or not self._holds(partition, epoch):
                log.warning("p%d was revoked: its new owner folds %d event(s) of this batch", partition, len(mine))
                self._leave_unfolded(mine)
                continue
            own = sorted(by_partition.get(partition, []), key=lambda p: p.offset)
            first = min(e.message.offset for e in mine)
            if self.committed_ends is not None:  # past the transaction's marker when nothing committed follows
                reach[partition] = await self.committed_ends.resume_at(topic, partition, reach[partition])
            folded = await self._fold(partition, own, first, reach[partition], epoch)
            if folded is None:
                self._leave_unfolded(mine)
                continue
            self.positions.handled(topic, partition, reach[partition] - 1)
            if self.settings.compression != "off" and folded:
                await self._compress(partition, folded, epoch)
        self.counts["folded"] += len(events)

    def _leave_unfolded(self, events: Iterable[Any]) -> None:
        """Withhold the acks of these analyses events: the group's offset stays below them (``acks``)."""
        for event in events:
            self.unfolded[event.message.partition].add(event.message.offset)

    async def _fold(self, partition: int, own: list[Positioned], first: int, reach: int, epoch: int) -> set[str] | None:
        """Fold a partition's batch into its shard; the owners it applied events of, None when it was given up.

        None when this worker no longer holds the partition, or its commits were refused too often.

        A refused commit (``StoreFenced``) while this worker still holds the partition in the
        batch's assignment is folded again at once, at most ``REFOLDS`` times: the shard is claimed
        anew (which rolls back foreign versions) and the gap from its checkpoint read from the log.
        Lance may have given up on a table a fenced writer wrote to at the same moment, or a worker
        that has not yet heard it lost the partition claimed the shard; then this worker first waits
        (``RECLAIM_WAIT_S``) for a rebalance that would end the batch here.
        """
        topic = self.settings.topic("analyses")

        async def publish(feed: Sequence[MemoryChanged], reach: int) -> None:
            await self._send_feed(partition, feed_records(feed, reach))  # committed: now subscribers may hear of it

        for attempt in range(REFOLDS + 1):
            async with self.shard_work:  # a rebalance waits for the attempt (module notes)
                if not self._holds(partition, epoch):
                    log.warning("gave up a batch of p%d: the partition was revoked while the batch ran", partition)
                    return None
                # The attempt reads the checkpoint and commits past it in one view: a rebuilt view switched to
                # meanwhile (behind what this worker folded) is followed by the next attempt or batch, which
                # fills the gap from the log.
                with self.projector().store.held_view():
                    done = (await asyncio.to_thread(self.projector().store.checkpoint, partition)).get(topic, 0)
                    batch_events = own
                    if first > done:
                        # The store is behind the consumer group (a rebuilt view was switched to, the store was
                        # replaced, or a refused commit): the store is the truth about progress, so fill the gap.
                        batch_events = await self._gap(partition, done, first) + own
                    try:
                        await self._catch_up_feed(partition)
                        result = await fold(
                            self.reader(),
                            self.projector(),
                            self.settings,
                            partition,
                            batch_events,
                            reach,
                            publish,
                            blocking=asyncio.to_thread,
                        )
                        return {e.event.owner_id for e in batch_events} if result.applied else set()
                    except StoreFenced as exc:
                        projector = self.projector()
                        ours = await asyncio.to_thread(projector.store.owns, partition)
                        projector.forget_cache()
                        projector.store.release([partition])  # reopening the shard claims it anew
                        if attempt == REFOLDS:
                            log.warning("gave up a batch of p%d: %s", partition, exc)
                            return None
                        log.warning(
                            "p%d: commit refused while this worker holds the partition (%s); claiming the shard "
                            "anew and folding the batch again (attempt %d of %d)",
                            partition,
                            exc,
                            attempt + 1,
                            REFOLDS,
                        )
            if not ours:  # outside the shard work: the rebalance that would end the batch here may come meanwhile
                await asyncio.sleep(RECLAIM_WAIT_S * (attempt + 1))
        return None

    async def _compress(self, partition: int, owners: set[str], epoch: int) -> None:
        """Propose the compressions of the owners a committed batch folded events of; send them to the control topic.

        Only while this worker holds the partition in the batch's assignment (reading the shard of a
        lost one would claim it). A failure is logged, not raised: the batch is committed already,
        and the owners' next batch proposes again.
        """
        try:
            if self._compressor is None:
                self._compressor = compressor_for(self.settings)
            projector, compressor = self.projector(), self._compressor
            proposed = await self._on_shard(
                partition, epoch, functools.partial(compressions, projector.store, projector.params, compressor, owners)
            )
            if proposed is None:
                return
            todo = [e for e in proposed if e.event_id not in self.proposed]
            futures = [
                await self.topics.control.send(key=r.key.encode(), value=r.value, partition=partition)
                for r in control_records(todo, self.keyring())
            ]
            for fut in futures:
                await fut
        except Exception as exc:  # never undo or stop the batch for a proposal
            log.warning("p%d: compressions of %d owner(s) not proposed: %s", partition, len(owners), exc)
            return
        self.proposed.update(e.event_id for e in todo)
        if todo:
            log.info("p%d: proposed %d compression(s)", partition, len(todo))

    async def _send_feed(self, partition: int, records: list[OutgoingRecord]) -> None:
        """Send change records to the partition of the changes topic they were folded on; wait for the broker."""
        futures = [
            await self.topics.changes.send(
                key=r.key.encode(), value=r.value, partition=partition, headers=list(r.headers)
            )
            for r in records
        ]
        for fut in futures:
            await fut

    async def _catch_up_feed(self, partition: int) -> None:
        """Once per assignment, before a partition's first batch: send what a crash left committed but unsent."""
        projector = self.projector()
        if not projector.feed or partition in projector.feed_checked:
            return
        missing, done = await missing_feed(self.reader(), projector, self.settings, partition)
        if missing:
            log.warning(
                "p%d: sending %d change event(s) committed before a crash but never sent", partition, len(missing)
            )
        await self._send_feed(partition, feed_records(missing, done))
        projector.feed_checked.add(partition)

    async def _dead_below(self, partition: int) -> int:
        if partition not in self.dead_letters:
            self.dead_letters[partition] = await dead_lettered_below(
                self.reader(), self.settings, self.settings.topic("analyses"), partition
            )
        return self.dead_letters[partition]

    async def _gap(self, partition: int, start: int, end: int) -> list[Positioned]:
        log.info("filling projection gap p%d:%d-%d from the log", partition, start, end)
        out: list[Positioned] = []
        async for rec in self.reader().read(
            self.settings.topic("analyses"), from_offsets={partition: start}, until={partition: end}
        ):
            decoded = decode_analysis(rec, self.keyring())
            if not isinstance(decoded, str):  # else dead-lettered when it was first consumed
                out.append(decoded)
        return out

    # -- the lag metric ---------------------------------------------------------------------------

    async def _start_of(self, topic: str, partition: int) -> int:
        if topic == self.settings.topic("analyses"):
            found = await self._checkpoint(partition, self.epoch)
            if found is None:  # opening the shard would claim it from its owner
                raise StoreError(f"p{partition} is not held by this worker: its shard is left to its owner")
            return int(found.get(topic, 0))
        return (await self.accounted(partition, claim=False)).get(topic, 0)

    async def measure_lag(self) -> None:
        """Refresh ``adamem_consumer_lag_events``; a failure is logged, never raised (the next tick tries again)."""
        try:
            await self.positions.refresh(self.reader(), self._start_of)
        except Exception as exc:  # never stop the worker for a metric
            log.info("consumer lag not measured: %s", exc)
