"""The Faust worker: the Memory Agent and the projections as stream agents over Kafka.

One ``faust.App`` per process, made by ``create_app``; topics are declared once with raw bytes
(the values are Avro single-object encoded; nothing is pickled). Both agents are thin: they take
micro-batches of events (``take_events``, acked only after the batch is handled), decode them,
call the steps the in-process pipeline runs too (``streams.step``), and hand the results on.

* ``analyze`` reads ``messages`` and ``control`` and writes ``MessageAnalyzed`` events (and the
  forwarded control events) to ``analyses``, on the same partition: one ordered stream per owner.
  With ``worker_transactions`` (the default) each partition's part of a batch — its analyses, its
  dead letters and the consumer offsets of its input records — is one Kafka transaction of that
  partition's transactional producer (``kafka_transactions``): a worker that lost the partition
  (paused, or busy past a rebalance) is fenced and cannot publish, so no message is analysed twice.
* ``project`` reads ``analyses`` and folds each partition's batch into the LanceDB shard of that
  partition, which records the offsets with the rows; events below the shard's checkpoint are
  skipped, so redelivery after a crash or rebalance changes nothing.

Both agents read ``read_committed``: aborted transactions never reach a projection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_kafka

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

__all__ = ["create_app"]

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


class _CommittedReadsThread(faust_kafka.AIOKafkaConsumerThread):
    """Faust's Kafka consumer, reading ``read_committed``.

    Faust reads committed records only in its own ``processing_guarantee="exactly_once"`` mode,
    which the worker does not use (faust-streaming 0.15: it sends a topic's records in the
    transaction of that topic's agent group, not of the input, and logs failed commits instead of
    raising; issues faust-streaming/faust#323, #517). The worker's own transactions need readers
    that skip aborted records.
    """

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._isolation_level = "read_committed"  # aiokafka reads it when the consumer starts
        return consumer


class _CommittedReadsConsumer(faust_kafka.Consumer):
    """Faust's consumer, reading committed records; it leaves the offsets of transactional inputs alone.

    With the worker's transactions, an input partition's offsets are committed only inside the
    transaction that publishes its analyses (``send_offsets_to_transaction``). Faust commits the
    offsets of every event its agents have acked, also of a batch given up because its partition
    moved: the group's offset would pass messages nobody analysed, and the partition's next owner,
    which starts at that offset, would never read them (seen in the kill test: 12 messages lost).
    """

    def _new_consumer_thread(self) -> Any:
        return _CommittedReadsThread(self, loop=self.loop, beacon=self.beacon)

    async def _commit_offsets(self, offsets: Mapping[Any, int], start_new_transaction: bool = True) -> bool:
        transactional: frozenset[str] = getattr(self.app, "adamem_transactional_topics", frozenset())
        kept = {tp: offset for tp, offset in offsets.items() if tp.topic not in transactional}
        if not kept:
            return False
        done: bool = await super()._commit_offsets(kept, start_new_transaction=start_new_transaction)
        return done


class _CommittedReadsTransport(faust_kafka.Transport):
    Consumer = _CommittedReadsConsumer


class _App(faust.App):
    """The worker's ``faust.App``: its consumer reads ``read_committed``; ``adamem_on_stop`` run when it stops."""

    adamem_on_stop: list[Callable[[], Awaitable[None]]]
    adamem_transactional_topics: frozenset[str] = frozenset()

    def _new_transport(self) -> Any:
        return _CommittedReadsTransport(self.conf.broker_consumer, self)

    async def on_stop(self) -> None:
        await super().on_stop()
        for stop in getattr(self, "adamem_on_stop", []):
            await stop()


def _datadir(settings: Settings) -> str:
    if "://" in settings.store_url and not settings.store_url.startswith("file://"):
        path = os.path.join(tempfile.gettempdir(), f"{settings.topic_prefix}-faust")
    else:
        path = os.path.join(settings.store_url.removeprefix("file://"), ".faust")
    os.makedirs(path, exist_ok=True)  # Faust expects its folder to exist
    return path


def create_app(
    settings: Settings,
    bootstrap: str,
    agent_factory: Callable[[], MemoryAgent],
    projector_factory: Callable[[], Projector],
    *,
    batch: int = 256,
    within_s: float = 0.5,
    restart: Callable[[], None] | None = None,
    log_reader: Callable[[], EventLog] | None = None,
) -> faust.App:
    """The Faust app with the ``analyze`` and ``project`` agents; models and stores are made lazily.

    ``settings`` are those of the store's analysis generation. When the active view switches to
    another generation, the agents stop handling events and call ``restart`` (default: a graceful
    SIGTERM to this process, after which ``run_worker`` starts again with the new generation);
    ``app.adamem_restart`` then names the generation to follow. ``log_reader`` makes the reader
    of the log used to fill projection gaps and find what is already analysed (default: Kafka).
    """
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()  # tests drive agents in theirs
    except RuntimeError:
        loop = None  # the faust.Worker makes and owns its loop
    # One consumer group per analysis generation: after a switch to a reanalysis the worker starts
    # the new generation's group at the beginning and skips what is already analysed (below).
    group = f"{settings.topic_prefix}-worker" + ("" if settings.generation == "g1" else f"-{settings.generation}")
    app = _App(
        group,
        broker=f"kafka://{bootstrap}",
        store="memory://",
        topic_partitions=settings.partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        web_enabled=False,
        stream_wait_empty=False,
        value_serializer="raw",
        key_serializer="raw",
        loop=loop,
        # A killed worker's partitions move after this, not after Faust's default 60 s.
        broker_session_timeout=settings.worker_session_timeout_s,
        # Faust's own state folder: beside the store, never in the working directory.
        datadir=_datadir(settings),
    )
    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
    inputs = app.topic(settings.topic("messages"), settings.topic("control"), **raw)
    analyses = app.topic(settings.topic("analyses"), **raw)
    deadletter = app.topic(settings.topic("deadletter"), **raw)
    changes = app.topic(settings.topic("changes"), **raw)  # the change feed (streams.feed), sent after each commit
    made: dict[str, Any] = {}

    def memory_agent() -> MemoryAgent:
        if "agent" not in made:
            made["agent"] = agent_factory()
        return made["agent"]  # type: ignore[no-any-return]

    def projector() -> Projector:
        if "projector" not in made:
            made["projector"] = projector_factory()
            made["projector"].store.bind(settings.partitions)
            made["projector"].feed &= settings.change_feed  # ADAMEM_CHANGE_FEED=false: no feed computed or sent
        return made["projector"]  # type: ignore[no-any-return]

    def dead_lettered(rec: LogRecord, error: str, stage: str) -> None:
        """The log line and metric of a dead letter made by ``stage`` (``analyze`` or ``project``)."""
        log.warning("dead-lettered %s:%d:%d: %s", rec.topic, rec.partition, rec.offset, error)
        metrics.DEAD_LETTERS.labels(stage, metrics.dead_letter_reason(error)).inc()

    async def to_deadletter(event: Any, letter: OutgoingRecord, error: str, stage: str) -> Any:
        """Send an event's dead letter (its headers from ``letter``) with the event's own bytes; the send's future."""
        dead_lettered(_record(event), error, stage)
        m = event.message
        return await deadletter.send(key=m.key, value=m.value, partition=m.partition, headers=list(letter.headers))

    # partition -> input topic -> next offset not yet accounted for by the analyses topic: read from
    # its tail once per assignment, then advanced by every batch this worker has written.
    resume: dict[int, dict[str, int]] = {}
    assignment = {"epoch": 0}  # bumped by every rebalance; a batch begun before one leaves resume alone

    def reader() -> EventLog:
        if log_reader is not None:
            return log_reader()
        from adamem.streams.kafka_log import KafkaLog

        return KafkaLog(bootstrap, settings)

    rings: dict[str, KeyRingLike] = {}
    txns = None  # the transactional producers of the analyze step, one per input partition
    committed_ends = None  # where the project agent may record its position past transaction markers
    if settings.worker_transactions and log_reader is None:
        from adamem.streams.kafka_transactions import CommittedEnds, PartitionTransactions

        txns = PartitionTransactions(bootstrap, settings, group)
        committed_ends = CommittedEnds(bootstrap, settings)
        app.adamem_on_stop = [txns.stop, committed_ends.stop]
        # their offsets are committed by the transactions only (see _CommittedReadsConsumer)
        app.adamem_transactional_topics = frozenset({settings.topic("messages"), settings.topic("control")})

    def keyring() -> KeyRingLike:
        """The keystore of the log (crypto-shredding): messages are opened and analyses sealed with it."""
        if "keys" not in rings:
            rings["keys"] = keystore_for(reader(), settings)
        return rings["keys"]

    def switched_generation() -> str | None:
        """The active view's generation when it is no longer this worker's (a reanalysis was switched to)."""
        record = projector().store.generation()
        name = record.get("name", settings.generation) if record else settings.generation
        return None if name == settings.generation else str(name)

    async def stop_for(generation: str) -> None:
        if not app.adamem_restart:  # type: ignore[attr-defined]
            log.warning(
                "the active view now projects analysis generation %s (this worker: %s); restarting to follow it",
                generation,
                settings.generation,
            )
            app.adamem_restart = generation  # type: ignore[attr-defined]
            if restart is not None:
                restart()
            else:
                os.kill(os.getpid(), signal.SIGTERM)  # a graceful stop; run_worker starts again

    async def accounted(partition: int, *, claim: bool = True) -> dict[str, int]:
        """How far the analyses topic accounts for both input topics of a partition (``resume``).

        With transactions, the partition's producer is claimed first: whatever an older owner had
        open is then finished, and what it publishes later is refused, so the tail read next is final
        until this worker is fenced. Without ``claim`` (the lag metric) nothing is claimed, and the
        tail read is not kept.
        """
        topics = (settings.topic("messages"), settings.topic("control"))
        if txns is not None and not txns.holds(partition):
            resume.pop(partition, None)
            if not claim:
                found = await resume_points(reader(), settings, partition)
                return {t: found.get(t, 0) for t in topics}
            await txns.claim([partition])
        if partition not in resume:
            epoch = assignment["epoch"]
            found = await resume_points(reader(), settings, partition)
            points = {t: found.get(t, 0) for t in topics}
            # The tail was read while other work went on: a commit of this partition since stored its points
            # (newer than this read), or a rebalance cleared them. Either way what was read is not kept:
            # kept, the lag timer's read overwrote the points of a transaction committed meanwhile, and
            # the next batch published that transaction's analyses again (seen in the group test).
            if not claim or assignment["epoch"] != epoch or partition in resume:
                return resume.get(partition, points)
            resume[partition] = points
        return resume[partition]

    async def already_analysed(event: Any) -> bool:
        """True for a message or control event that this generation's analyses already hold.

        The analyses topic itself is the record of what was analysed (its ``adamem-resume`` and
        ``adamem-source`` headers), so a redelivery, or a new consumer group after a generation
        switch, never analyses a message twice.
        """
        m = event.message
        return bool(m.offset < (await accounted(m.partition)).get(m.topic, 0))

    def _classify(event: Any) -> tuple[LogRecord, Handled]:
        try:
            (event.message.key or b"").decode("utf-8")
        except UnicodeDecodeError as exc:
            return _record(event), f"UnicodeDecodeError: the record key is not UTF-8 ({exc})"
        rec = _record(event)
        return rec, classify(rec, settings.partitions, keyring())

    @app.agent(inputs, name="analyze")
    async def analyze(stream: Any) -> None:
        async for events in stream.take_events(batch, within=within_s):
            await _analyze(events)

    async def _analyze(events: Sequence[Any]) -> None:
        """Analyse a batch; each analyses record says how far both input topics are accounted for.

        This one agent consumes both input topics, one batch at a time, each topic partition in
        offset order from where the group committed (everything below that was handled and
        acked). So once an event is handled, its topic is accounted for up to it, and the other
        topic up to what this worker handled of it, or else what the analyses topic said when the
        partition was assigned: never more than what is on the log. Analyses and dead letters
        (which carry the same header) are sent in the batch's order, and each run of one kind is
        acked before a record of the other kind that counts it is sent.
        """
        changed = await asyncio.to_thread(switched_generation)
        if changed is not None:
            await stop_for(changed)
            return
        epoch = assignment["epoch"]
        fresh = {e.message.partition for e in events} - set(resume)  # their tail is read in this batch
        todo = [event for event in events if not await already_analysed(event)]
        trackers: dict[int, ResumeTracker] = {}
        for p in sorted({e.message.partition for e in todo}):
            waiting = [(e.message.topic, e.message.offset) for e in todo if e.message.partition == p]
            trackers[p] = ResumeTracker(await accounted(p), waiting)
        handled = [_classify(event) for event in todo]
        if any(readable(d) for _, d in handled):
            items = await asyncio.to_thread(analyse, memory_agent(), handled)
        else:
            items = [Analysed(rec, d) for rec, d in handled]
        metrics.EVENTS_ANALYSED.inc(sum(1 for item in items if item.analysis is not None))
        metrics.EVENTS_FORWARDED.inc(sum(1 for _, d in handled if not isinstance(d, (str, ChatMessage))))
        raw = {_position(event): event for event in todo}
        if txns is not None:
            for p in sorted(trackers):
                await _publish(p, [x for x in items if x.record.partition == p], events, raw)
            counts["analyzed"] += len(todo)
            for event in events:
                positions.handled(event.message.topic, event.message.partition, event.message.offset)
            return
        items = await _analysed_meanwhile(items, fresh, trackers)
        sends: list[Any] = []
        sending_to = None
        for out in emit(items, trackers, settings, keyring()):
            rec = out.source.record
            target = deadletter if out.dead else analyses
            if target is not sending_to:  # in order: what is sent before a record is acked before it
                for fut in sends:
                    await fut
                sends, sending_to = [], target
            if out.dead:
                sends.append(await to_deadletter(raw[_position(rec)], out.record, str(out.source.event), "analyze"))
                continue
            keyring().flush()  # the keys of what is sent are durable first
            sends.append(
                await analyses.send(
                    key=out.record.key.encode("utf-8"),
                    value=out.record.value,
                    partition=rec.partition,
                    headers=list(out.record.headers),
                )
            )
        for fut in sends:
            await fut  # acked by the broker before the batch's offsets may be committed
        counts["analyzed"] += len(todo)
        if assignment["epoch"] == epoch:  # else resume was cleared: the next event reads the log again
            for p, tracker in trackers.items():
                resume[p] = tracker.points()
        for event in events:
            positions.handled(event.message.topic, event.message.partition, event.message.offset)

    def _outgoing(
        partition: int, items: list[Analysed], points: dict[str, int], raw: Mapping[tuple[str, int, int], Any]
    ) -> tuple[list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]], dict[str, int]]:
        """A partition's records to publish, for the items not accounted for by ``points``; the points after them."""
        todo = [x for x in items if x.record.offset >= points.get(x.record.topic, 0)]
        tracker = ResumeTracker(points, [(x.record.topic, x.record.offset) for x in todo])
        out: list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]] = []
        for emitted in emit(todo, {partition: tracker}, settings, keyring()):
            rec, headers = emitted.source.record, list(emitted.record.headers)
            if emitted.dead:
                dead_lettered(rec, str(emitted.source.event), "analyze")
                m = raw[_position(rec)].message
                out.append((emitted.topic, m.key or b"", m.value or b"", headers))
            else:
                out.append((emitted.topic, emitted.record.key.encode("utf-8"), emitted.record.value, headers))
        keyring().flush()  # the keys of what is sent are durable first
        return out, tracker.points()

    async def _publish(
        partition: int, items: list[Analysed], events: Sequence[Any], raw: Mapping[tuple[str, int, int], Any]
    ) -> None:
        """Publish a partition's part of a batch in one transaction, with the consumer offsets of its inputs.

        Refused (another worker claimed the partition, or the broker failed): the partition is
        claimed again, its tail read again, and only what is still not accounted for is published,
        until this worker no longer holds the partition (its new owner analyses the rest).
        """
        assert txns is not None
        offsets: dict[str, int] = {}
        for event in events:
            m = event.message
            if m.partition == partition:
                offsets[m.topic] = max(offsets.get(m.topic, 0), m.offset + 1)
        for attempt in range(1, 61):
            if partition not in held:
                log.warning("p%d was revoked: its new owner analyses %d record(s) of this batch", partition, len(items))
                return
            try:
                records, points = _outgoing(partition, items, await accounted(partition), raw)
                await txns.commit(partition, records, offsets)
            except LogFenced as exc:
                log.warning("p%d: transaction refused (attempt %d): %s", partition, attempt, exc)
            except LogError as exc:
                log.warning("p%d: transaction failed (attempt %d): %s", partition, attempt, exc)
                await asyncio.sleep(min(5.0, 0.2 * attempt))
            else:
                log.info("p%d: committed %d record(s); input offsets %s", partition, len(records), offsets)
                # Exactly what the log accounts for now, whatever was read meanwhile: nobody else committed
                # since this worker's claim, or the commit would have been refused.
                resume[partition] = points
                return
        raise LogError(f"p{partition}: no transaction of this batch was accepted in 60 attempts; restarting")

    async def _analysed_meanwhile(
        items: list[Analysed], fresh: set[int], trackers: dict[int, ResumeTracker]
    ) -> list[Analysed]:
        """Drop what another worker put on the log while this batch ran, for partitions just assigned.

        When a partition moves, its old owner may still send the batch it began before the move; the
        new owner read the partition's tail before that landed, and then ran the model (seconds, the
        first time). Reading the tail again just before sending catches that batch: its records are
        skipped here, not analysed twice. (A batch landing later still can; the folds absorb it.)
        """
        for p in sorted(fresh & set(trackers)):
            found = await resume_points(reader(), settings, p)
            before = resume.get(p, {})
            now = {
                t: max(before.get(t, 0), found.get(t, 0))
                for t in (settings.topic("messages"), settings.topic("control"))
            }
            if now == {t: before.get(t, 0) for t in now}:
                continue
            kept = [x for x in items if x.record.partition != p or x.record.offset >= now[x.record.topic]]
            log.info("p%d: %d record(s) were analysed by another worker meanwhile", p, len(items) - len(kept))
            items = kept
            resume[p] = now
            waiting = [(x.record.topic, x.record.offset) for x in items if x.record.partition == p]
            trackers[p] = ResumeTracker(now, waiting)
        return items

    @app.agent(analyses, name="project")
    async def project(stream: Any) -> None:
        async for events in stream.take_events(batch * 4, within=within_s):
            await _project(events)

    async def _project(events: Sequence[Any]) -> None:
        changed = await asyncio.to_thread(switched_generation)
        if changed is not None:
            await stop_for(changed)  # never fold one generation's analyses into another's view
            return
        topic = settings.topic("analyses")
        by_partition: dict[int, list[Positioned]] = defaultdict(list)
        reach: dict[int, int] = {}
        done: dict[int, int] = {}
        dead: list[Any] = []
        for event in events:
            m = event.message
            reach[m.partition] = max(reach.get(m.partition, 0), m.offset + 1)
            if m.partition not in done:
                done[m.partition] = (await asyncio.to_thread(projector().store.checkpoint, m.partition)).get(topic, 0)
            rec = _record(event)
            decoded = decode_analysis(rec, keyring())
            if isinstance(decoded, str):
                if m.offset >= done[m.partition] and m.offset >= await dead_below(m.partition):
                    letter = dead_letter_record(rec, decoded, {topic: m.offset + 1})
                    dead.append(await to_deadletter(event, letter, decoded, "project"))
                    dead_letters[m.partition] = m.offset + 1
                continue  # else dead-lettered already (a redelivery)
            by_partition[m.partition].append(decoded)
        for fut in dead:
            await fut  # on the log before the checkpoint that passes them
        for partition in sorted(reach):
            own = sorted(by_partition.get(partition, []), key=lambda p: p.offset)
            first = min(e.message.offset for e in events if e.message.partition == partition)
            if committed_ends is not None:  # past the transaction's marker when nothing committed follows
                reach[partition] = await committed_ends.resume_at(topic, partition, reach[partition])
            if await _fold(partition, own, first, done[partition], reach[partition]):
                positions.handled(topic, partition, reach[partition] - 1)
        counts["folded"] += len(events)

    async def _fold(partition: int, own: list[Positioned], first: int, done: int, reach: int) -> bool:
        """Fold a partition's batch into its shard; False when the shard is lost to another writer.

        A commit refused while no other writer claimed the shard (Lance gave up on a table a
        fenced writer wrote to at the same moment) is this worker's still: the shard is claimed
        anew (which rolls back the foreign versions) and the batch folded again now, at most
        ``REFOLDS`` times, instead of when the partition's next batch arrives.
        """
        topic = settings.topic("analyses")

        async def publish(feed: Sequence[MemoryChanged], reach: int) -> None:
            await send_feed(partition, feed_records(feed, reach))  # committed: now subscribers may hear of it

        for attempt in range(REFOLDS + 1):
            batch_events = own
            if first > done:
                # The store is behind the consumer group (a rebuilt view was switched to, the store was
                # replaced, or a refused commit): the store is the truth about progress, so fill the gap.
                batch_events = await _gap(partition, done, first) + own
            try:
                await catch_up_feed(partition)
                await fold(
                    reader(), projector(), settings, partition, batch_events, reach, publish, blocking=asyncio.to_thread
                )
                return True
            except StoreFenced as exc:
                ours = await asyncio.to_thread(projector().store.owns, partition)
                projector().forget_cache()
                projector().store.release([partition])  # reopening the shard claims it anew
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
                done = (await asyncio.to_thread(projector().store.checkpoint, partition)).get(topic, 0)
        return False

    async def send_feed(partition: int, records: list[OutgoingRecord]) -> None:
        """Send change records to the partition of the changes topic they were folded on; wait for the broker."""
        futures = [
            await changes.send(key=r.key.encode(), value=r.value, partition=partition, headers=list(r.headers))
            for r in records
        ]
        for fut in futures:
            await fut

    async def catch_up_feed(partition: int) -> None:
        """Once per assignment, before a partition's first batch: send what a crash left committed but unsent."""
        if not projector().feed or partition in projector().feed_checked:
            return
        missing, done = await missing_feed(reader(), projector(), settings, partition)
        if missing:
            log.warning(
                "p%d: sending %d change event(s) committed before a crash but never sent", partition, len(missing)
            )
        await send_feed(partition, feed_records(missing, done))
        projector().feed_checked.add(partition)

    # partition -> how far the analyses topic is dead-lettered (read from the dead-letter topic once per assignment)
    dead_letters: dict[int, int] = {}

    async def dead_below(partition: int) -> int:
        if partition not in dead_letters:
            dead_letters[partition] = await dead_lettered_below(
                reader(), settings, settings.topic("analyses"), partition
            )
        return dead_letters[partition]

    async def _gap(partition: int, start: int, end: int) -> list[Positioned]:
        log.info("filling projection gap p%d:%d-%d from the log", partition, start, end)
        out: list[Positioned] = []
        async for rec in reader().read(
            settings.topic("analyses"), from_offsets={partition: start}, until={partition: end}
        ):
            decoded = decode_analysis(rec, keyring())
            if not isinstance(decoded, str):  # else dead-lettered when it was first consumed
                out.append(decoded)
        return out

    # What the worker's status line shows (``adamem worker``): events handled, partitions held.
    counts = {"analyzed": 0, "folded": 0}
    held: set[int] = set()

    async def on_revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        held.difference_update(tp.partition for tp in revoked)
        if txns is not None:
            await txns.release(sorted({tp.partition for tp in revoked if tp.topic == settings.topic("messages")}))
        resume.clear()  # another worker may analyse these partitions now
        dead_letters.clear()
        assignment["epoch"] += 1
        if "projector" in made:
            made["projector"].forget_cache()
            made["projector"].feed_checked.clear()  # another worker may fold (and send) these partitions now
            made["projector"].store.release(sorted({tp.partition for tp in revoked}))

    positions = ConsumerPositions()  # adamem_consumer_lag_events, refreshed by the timer below

    async def start_of(topic: str, partition: int) -> int:
        if topic == settings.topic("analyses"):
            return int((await asyncio.to_thread(projector().store.checkpoint, partition)).get(topic, 0))
        return (await accounted(partition, claim=False)).get(topic, 0)

    @app.timer(settings.metrics_interval_s, name="consumer-lag")  # type: ignore[untyped-decorator]
    async def consumer_lag() -> None:
        try:
            await positions.refresh(reader(), start_of)
        except Exception as exc:  # never stop the worker for a metric: the next tick tries again
            log.info("consumer lag not measured: %s", exc)

    async def on_assigned(sender: Any, assigned: Any, **kwargs: Any) -> None:
        held.clear()
        held.update(tp.partition for tp in assigned)
        ours = {settings.topic(t) for t in ("messages", "control", "analyses")}  # not Faust's own topics
        positions.assign((tp.topic, tp.partition) for tp in assigned if tp.topic in ours)
        resume.clear()
        dead_letters.clear()
        assignment["epoch"] += 1
        if "projector" in made:
            made["projector"].forget_cache()
            made["projector"].feed_checked.clear()
            made["projector"].store.release(sorted({tp.partition for tp in assigned}))

    app.on_partitions_revoked.connect(on_revoked)  # type: ignore[arg-type]
    app.on_partitions_assigned.connect(on_assigned)  # type: ignore[arg-type]
    app.adamem_restart = None  # type: ignore[attr-defined]
    app.adamem_counts = counts  # type: ignore[attr-defined]
    app.adamem_partitions = held  # type: ignore[attr-defined]
    app.adamem_agents = {"analyze": analyze, "project": project}  # type: ignore[attr-defined]
    app.adamem_topics = {  # type: ignore[attr-defined]
        "inputs": inputs,
        "analyses": analyses,
        "deadletter": deadletter,
        "changes": changes,
    }
    return app
