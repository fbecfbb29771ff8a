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
  (``txns``) and the project step's reader of where transactions end (``committed_ends``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adamem import metrics
from adamem.analysis.agent import MemoryAgent
from adamem.errors import LogError, LogFenced, StoreFenced
from adamem.events import ChatMessage
from adamem.feed import MemoryChanged
from adamem.projections.folds.apply import Positioned
from adamem.projections.projector import Projector
from adamem.settings import Settings
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

REFOLDS = 3
"""How many times the project agent folds a batch again after a refused commit to a shard it still owns."""


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
    ) -> None:
        self.settings = settings
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
        self.positions = ConsumerPositions()
        """``adamem_consumer_lag_events``, refreshed by ``measure_lag``."""
        self.restart_for: str | None = None
        """The generation to follow, once the active view switched to it."""
        self.txns: PartitionTransactions | None = None
        """The transactional producers of the analyze step, one per input partition."""
        self.committed_ends: CommittedEnds | None = None
        """Where the project agent may record its position past transaction markers."""
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
        if self._projector is not None:
            self._projector.forget_cache()
            self._projector.feed_checked.clear()  # another worker may fold (and send) these partitions now
            self._projector.store.release(sorted(partitions))

    async def revoked(self, sender: Any, revoked: Any, **kwargs: Any) -> None:
        """Faust's ``on_partitions_revoked``: let go of the partitions and of everything read about them."""
        self.held.difference_update(tp.partition for tp in revoked)
        if self.txns is not None:
            messages = self.settings.topic("messages")
            await self.txns.release(sorted({tp.partition for tp in revoked if tp.topic == messages}))
        self._forget_partitions({tp.partition for tp in revoked})

    async def assigned(self, sender: Any, assigned: Any, **kwargs: Any) -> None:
        """Faust's ``on_partitions_assigned``: hold these partitions; read their tails afresh when needed."""
        self.held.clear()
        self.held.update(tp.partition for tp in assigned)
        ours = {self.settings.topic(t) for t in ("messages", "control", "analyses")}  # not Faust's own topics
        self.positions.assign((tp.topic, tp.partition) for tp in assigned if tp.topic in ours)
        self._forget_partitions({tp.partition for tp in assigned})

    # -- generations ------------------------------------------------------------------------------

    def switched_generation(self) -> str | None:
        """The active view's generation when it is no longer this worker's (a reanalysis was switched to)."""
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
        tail read is not kept.
        """
        settings, resume = self.settings, self.resume
        topics = (settings.topic("messages"), settings.topic("control"))
        if self.txns is not None and not self.txns.holds(partition):
            resume.pop(partition, None)
            if not claim:
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
        """Fold a batch of analyses, each partition's part into its shard, past the shard's checkpoint."""
        changed = await asyncio.to_thread(self.switched_generation)
        if changed is not None:
            await self.stop_for(changed)  # never fold one generation's analyses into another's view
            return
        topic = self.settings.topic("analyses")
        by_partition: dict[int, list[Positioned]] = defaultdict(list)
        reach: dict[int, int] = {}
        done: dict[int, int] = {}
        dead: list[Any] = []
        for event in events:
            m = event.message
            reach[m.partition] = max(reach.get(m.partition, 0), m.offset + 1)
            if m.partition not in done:
                checkpoint = await asyncio.to_thread(self.projector().store.checkpoint, m.partition)
                done[m.partition] = checkpoint.get(topic, 0)
            rec = _record(event)
            decoded = decode_analysis(rec, self.keyring())
            if isinstance(decoded, str):
                if m.offset >= done[m.partition] and m.offset >= await self._dead_below(m.partition):
                    letter = dead_letter_record(rec, decoded, {topic: m.offset + 1})
                    dead.append(await self._to_deadletter(event, letter, decoded, "project"))
                    self.dead_letters[m.partition] = m.offset + 1
                continue  # else dead-lettered already (a redelivery)
            by_partition[m.partition].append(decoded)
        for fut in dead:
            await fut  # on the log before the checkpoint that passes them
        for partition in sorted(reach):
            own = sorted(by_partition.get(partition, []), key=lambda p: p.offset)
            first = min(e.message.offset for e in events if e.message.partition == partition)
            if self.committed_ends is not None:  # past the transaction's marker when nothing committed follows
                reach[partition] = await self.committed_ends.resume_at(topic, partition, reach[partition])
            if await self._fold(partition, own, first, done[partition], reach[partition]):
                self.positions.handled(topic, partition, reach[partition] - 1)
        self.counts["folded"] += len(events)

    async def _fold(self, partition: int, own: list[Positioned], first: int, done: int, reach: int) -> bool:
        """Fold a partition's batch into its shard; False when the shard is lost to another writer.

        A commit refused while no other writer claimed the shard (Lance gave up on a table a
        fenced writer wrote to at the same moment) is this worker's still: the shard is claimed
        anew (which rolls back the foreign versions) and the batch folded again now, at most
        ``REFOLDS`` times, instead of when the partition's next batch arrives.
        """
        topic = self.settings.topic("analyses")

        async def publish(feed: Sequence[MemoryChanged], reach: int) -> None:
            await self._send_feed(partition, feed_records(feed, reach))  # committed: now subscribers may hear of it

        for attempt in range(REFOLDS + 1):
            batch_events = own
            if first > done:
                # The store is behind the consumer group (a rebuilt view was switched to, the store was
                # replaced, or a refused commit): the store is the truth about progress, so fill the gap.
                batch_events = await self._gap(partition, done, first) + own
            try:
                await self._catch_up_feed(partition)
                await fold(
                    self.reader(),
                    self.projector(),
                    self.settings,
                    partition,
                    batch_events,
                    reach,
                    publish,
                    blocking=asyncio.to_thread,
                )
                return True
            except StoreFenced as exc:
                projector = self.projector()
                ours = await asyncio.to_thread(projector.store.owns, partition)
                projector.forget_cache()
                projector.store.release([partition])  # reopening the shard claims it anew
                if not ours or attempt == REFOLDS:
                    # This worker lost the partition (a rebalance while it was busy or paused): its commit was
                    # refused and the new owner folds the batch.
                    log.warning("gave up a batch of p%d: %s", partition, exc)
                    return False
                log.warning(
                    "p%d: commit refused while this worker still owns the shard (%s); claiming it anew and "
                    "folding the batch again (attempt %d of %d)",
                    partition,
                    exc,
                    attempt + 1,
                    REFOLDS,
                )
                done = (await asyncio.to_thread(projector.store.checkpoint, partition)).get(topic, 0)
        return False

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
            return int((await asyncio.to_thread(self.projector().store.checkpoint, partition)).get(topic, 0))
        return (await self.accounted(partition, claim=False)).get(topic, 0)

    async def measure_lag(self) -> None:
        """Refresh ``adamem_consumer_lag_events``; a failure is logged, never raised (the next tick tries again)."""
        try:
            await self.positions.refresh(self.reader(), self._start_of)
        except Exception as exc:  # never stop the worker for a metric
            log.info("consumer lag not measured: %s", exc)
