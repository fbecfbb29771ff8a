"""A rebuild shared by a group of members on Kafka: processes on any machines that reach the store and the broker.

``rebuild_in_group`` (``adamem replay --group``) is the coordinator. It begins the view as
``replay.rebuild_view`` does (bound to the partitions, the generation recorded, the target
offsets fixed: the ends of the analyses topic, or ``--until``), records the job in the view
(``record_rebuild_job``), and waits until every partition's checkpoint in the view has reached its
target and no shard owes the erasure of forgets folded into it (``MemoryStore.note_forgets``);
``rebuild_view`` then verifies, catches up and switches, as in a rebuild of one process.

``run_member`` (``adamem worker --rebuild VIEW``) is a member. Members join a consumer group of
the job's own (``{prefix}-rebuild-{view}``); each folds the partitions the group assigns it into
their shards of the view with the fencing of live folding: reading a shard's checkpoint as its
writer claims the shard (a new owner epoch), and a member that lost the shard since cannot commit
to it (``StoreFenced``). A member folds a partition from the shard's checkpoint up to the target,
commit by commit (each commit is the rows and the checkpoint together), and then pauses it. It
leaves once the job is done, whoever folded it: until then it
stays in the group, ready to take the partitions of a member that dies. A killed member's
partitions move to the others after the session timeout (``ADAMEM_WORKER_SESSION_TIMEOUT``);
their new owner recovers each shard to its checkpoint and goes on from there, so what the killed
one had not committed is lost and nothing is folded twice.

The events folded and the fold are replay's (``replay_jobs.replayed``, ``Projector.apply_batch``):
no clock, no randomness, and the rows equal those of a rebuild in one process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adamem.errors import ConfigError, NotFound, StoreFenced
from adamem.locations import StoreLocation
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_views
from adamem.projections.store.ports import MemoryStore, ViewCatalog
from adamem.settings import Settings
from adamem.streams.keys import keystore_for
from adamem.streams.log import EventLog, LogRecord
from adamem.streams.replay import RebuildReport, rebuild_view
from adamem.streams.replay_jobs import REBUILD_BATCH, FoldPlan, collector_paused, replayed

__all__ = ["MemberReport", "RebuildJob", "group_of", "open_job", "rebuild_in_group", "run_member"]

log = logging.getLogger("adamem.rebuild")

RECLAIM_WAIT_S = 1.0
"""Seconds a member waits before it claims again the shard of a partition whose commit was refused (``_reclaim``)."""

POLL_S = 0.5
"""Seconds between two looks of the coordinator (and of an idle member) at the view's checkpoints."""


def group_of(settings: Settings, view: str) -> str:
    """The consumer group of the members rebuilding ``view``."""
    return f"{settings.topic_prefix}-rebuild-{view}"


@dataclass(frozen=True)
class RebuildJob:
    """A rebuild that members share: the view, the analyses topic, the offset each partition is folded to.

    ``until_time``: events after this event time are not folded (a view as of a time). ``batch``:
    events per commit.
    """

    view: str
    group: str
    topic: str
    targets: Mapping[int, int]
    until_time: int | None = None
    batch: int = REBUILD_BATCH

    def record(self) -> dict[str, Any]:
        """The job as the view records it (JSON)."""
        return {
            "group": self.group,
            "topic": self.topic,
            "targets": {str(p): o for p, o in sorted(self.targets.items())},
            "until_time": self.until_time,
            "batch": self.batch,
        }

    @classmethod
    def of(cls, view: str, record: Mapping[str, Any]) -> RebuildJob:
        """The job a view recorded."""
        return cls(
            view,
            str(record["group"]),
            str(record["topic"]),
            {int(p): int(o) for p, o in dict(record["targets"]).items()},
            None if record.get("until_time") is None else int(record["until_time"]),
            int(record.get("batch") or REBUILD_BATCH),
        )

    def reached(self, store: MemoryStore) -> dict[int, int]:
        """Per partition, how far the view's shard is folded (its checkpoint), at most the target."""
        return {p: min(t, store.checkpoint(p).get(self.topic, 0)) for p, t in self.targets.items()}

    def done(self, store: MemoryStore) -> bool:
        """Whether every partition's checkpoint in the view has reached its target, and no shard owes the
        erasure of forgets it committed (a member erases after its commit; a member that claims a shard
        whose writer stopped in between erases it first)."""
        return self.reached(store) == dict(self.targets) and not self.owes_erasure(store)

    def owes_erasure(self, store: MemoryStore) -> bool:
        """Whether a shard of the view committed forgets it has not erased yet (``MemoryStore.note_forgets``)."""
        return bool(store.rebuild_job().get("erasing"))


def open_job(views: ViewCatalog, view: str) -> RebuildJob:
    """The rebuild job recorded in ``view``; a clear error for a view that is missing, active or has none."""
    if view not in views.views():
        raise NotFound(
            f"store {views.url} has no view {view!r} (views: {', '.join(views.views())}); "
            "`adamem replay --group` begins one and prints its name"
        )
    record = views.open_view(view, read_only=True).rebuild_job()
    if record.get("kind") == "reanalysis":
        raise ConfigError(
            f"view {view!r} of {views.url} is a reanalysis the group shares; its members run "
            f"`adamem worker --reanalyze {view}`"
        )
    if not record:
        active = " and it is the active view, which `adamem worker` folds" if view == views.active_view() else ""
        raise ConfigError(
            f"view {view!r} of {views.url} has no group rebuild recorded{active}; "
            "`adamem replay --group` begins one for members to share"
        )
    return RebuildJob.of(view, record)


@dataclass(frozen=True)
class MemberReport:
    """What a member did: the events it folded, the batches it committed, the partitions it held."""

    view: str
    events: int
    batches: int
    partitions: tuple[int, ...]
    already_done: bool = False


async def run_member(
    settings: Settings,
    bootstrap: str,
    root: str | StoreLocation,
    view: str,
    *,
    on_batch: Callable[[int, int], None] | None = None,
) -> MemberReport:
    """Join the group of ``view``'s rebuild and fold the partitions it assigns, until the whole job is done.

    ``on_batch(partition, events)`` hears of each committed batch. A job already done returns at once.
    """
    views = open_views(root)
    job = open_job(views, view)
    watch = views.open_view(view, read_only=True)
    if job.done(watch):
        return MemberReport(view, 0, 0, (), already_done=True)
    if view == views.active_view():
        raise ConfigError(
            f"view {view!r} of {views.url} is already the active view; `adamem worker` folds it, not a rebuild"
        )
    member = _Member(settings, bootstrap, views.open_view(view, optimize_every=0, bulk=True), watch, job, on_batch)
    try:
        with collector_paused():  # as a rebuild in one process (``replay_jobs.collector_paused``)
            await member.run()
    finally:
        member.store.close()
    return MemberReport(view, member.events, member.batches, tuple(sorted(member.ever_held)))


class _Member:
    """One member's consumer, shards and fold (``run_member``)."""

    def __init__(
        self,
        settings: Settings,
        bootstrap: str,
        store: MemoryStore,
        watch: MemoryStore,
        job: RebuildJob,
        on_batch: Callable[[int, int], None] | None,
    ) -> None:
        from adamem.streams.kafka_log import KafkaLog

        self.settings, self.bootstrap, self.job, self.on_batch = settings, bootstrap, job, on_batch
        self.store, self.watch = store, watch  # the view's writer, and a reader that claims nothing
        self.projector = Projector(store, feed=False)  # a rebuild publishes no feed
        self.keys = keystore_for(KafkaLog(bootstrap, settings), settings)
        self.held: set[int] = set()
        self.ever_held: set[int] = set()
        self.finished: set[int] = set()
        """Held partitions folded to their target (paused)."""
        self.fenced: set[int] = set()
        """Held partitions whose commit was refused: claimed again after a pause (``_reclaim``)."""
        self.lock = asyncio.Lock()  # a batch and a rebalance never interleave
        self.events = self.batches = 0
        self.consumer: Any = None

    async def run(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                await member.revoked({tp.partition for tp in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                await member.assigned({tp.partition for tp in assigned})

        timeout_ms = int(self.settings.worker_session_timeout_s * 1000)
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.job.group,
            enable_auto_commit=False,  # the shards' checkpoints say how far each partition is folded
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            session_timeout_ms=timeout_ms,
            heartbeat_interval_ms=max(100, timeout_ms // 3),
            max_poll_records=self.job.batch,
            request_timeout_ms=int(self.settings.kafka_timeout_s * 1000),
        )
        try:
            await self.consumer.start()
            self.consumer.subscribe([self.job.topic], listener=Listener())
            while True:
                batch = await self.consumer.getmany(timeout_ms=int(POLL_S * 1000), max_records=self.job.batch)
                async with self.lock:
                    for tp, messages in sorted(batch.items(), key=lambda kv: kv[0].partition):
                        await self._fold(tp, messages)
                    await self._finish_reached()
                if self.fenced:
                    await self._reclaim()
                if not batch and await asyncio.to_thread(self.job.done, self.watch):
                    return
        finally:
            await self.consumer.stop()

    async def _reclaim(self) -> None:
        """Claim again the shards of partitions still held after a refused commit.

        Waits first: when this member is the one that lost the partition (it was paused past its
        session timeout), the rebalance that tells it so comes within a heartbeat; else the other
        writer is such a member, and claiming the shard anew fences it out, as the worker does.
        """
        await asyncio.sleep(RECLAIM_WAIT_S)
        async with self.lock:
            for p in sorted(self.fenced & self.held):
                await self._claim(p)
                if p not in self.finished:
                    self.consumer.resume(self._tp(p))
            self.fenced.clear()

    async def _claim(self, partition: int) -> None:
        """Open the shard as its writer (a new owner epoch) and read the partition from its checkpoint.

        Not a shard folded to its target already: the coordinator may be claiming it to catch up.
        """
        target, topic = self.job.targets.get(partition, 0), self.job.topic
        if (await asyncio.to_thread(self.watch.checkpoint, partition)).get(topic, 0) >= target:
            self._pause(partition)
            return
        done = (await asyncio.to_thread(self.store.checkpoint, partition)).get(topic, 0)
        self.consumer.seek(self._tp(partition), done)
        if done >= self.job.targets.get(partition, 0):
            self._pause(partition)

    async def _position(self, partition: int) -> int:
        """The consumer's position in a partition; 0 when a rebalance has just taken it away."""
        from aiokafka.errors import IllegalStateError

        try:
            return int(await self.consumer.position(self._tp(partition)))
        except IllegalStateError:
            return 0

    def _tp(self, partition: int) -> Any:
        from aiokafka import TopicPartition

        return TopicPartition(self.job.topic, partition)

    async def assigned(self, partitions: set[int]) -> None:
        """Hold these partitions: claim their shards and read each from its checkpoint (paused when done)."""
        async with self.lock:
            self.held = set(partitions)
            self.ever_held |= partitions
            self.finished.clear()
            self.fenced.clear()
            for p in sorted(partitions):
                await self._claim(p)
            log.info("holds %s of %s", sorted(partitions), self.job.view)

    async def revoked(self, partitions: set[int]) -> None:
        """Let go of these partitions' shards: their next owner claims them and goes on from their checkpoints."""
        async with self.lock:
            self.held -= partitions
            self.finished -= partitions
            self.fenced -= partitions
            self.projector.forget_cache()  # another member may write these owners now
            self.store.release(sorted(partitions))

    def _pause(self, partition: int) -> None:
        self.finished.add(partition)
        self.consumer.pause(self._tp(partition))

    async def _fold(self, tp: Any, messages: list[Any]) -> None:
        """Fold the records of a held partition below its target into its shard, with one commit."""
        p, target = tp.partition, self.job.targets.get(tp.partition, 0)
        if p not in self.held or p in self.finished or p in self.fenced or not messages:
            return
        done = (await asyncio.to_thread(self.store.checkpoint, p)).get(self.job.topic, 0)
        if messages[0].offset > done:  # fetched before the shard was last claimed: read again from its checkpoint
            self.consumer.seek(tp, done)
            return
        records = [
            LogRecord(tp.topic, p, m.offset, (m.key or b"").decode("utf-8", "replace"), m.value or b"", m.timestamp)
            for m in messages
            if m.offset < target
        ]
        # Transaction markers take offsets too: the consumer's position is past them.
        reach = min(target, max([r.offset + 1 for r in records] + [await self._position(p)]))
        events = replayed(records, self.keys, self.job.until_time)
        await self._commit(p, events, reach)

    async def _finish_reached(self) -> None:
        """Commit the checkpoint of held partitions whose position reached the target past records not folded."""
        for p in sorted(self.held - self.finished - self.fenced):
            position = await self._position(p)
            target = self.job.targets.get(p, 0)
            if position >= target:
                await self._commit(p, [], target)

    async def _commit(self, partition: int, events: list[Any], reach: int) -> None:
        topic, target = self.job.topic, self.job.targets.get(partition, 0)
        try:
            result = await asyncio.to_thread(self.projector.apply_batch, partition, topic, events, reach)
        except StoreFenced as exc:  # another member claimed the shard: it holds the partition now
            log.warning("p%d of %s: %s", partition, self.job.view, exc)
            self.projector.forget_cache()
            self.store.release([partition])
            self.fenced.add(partition)
            self.consumer.pause(self._tp(partition))
            return
        self.events += result.applied
        self.batches += 1
        if self.on_batch is not None:
            self.on_batch(partition, result.applied)
        if result.reach >= target:
            self._pause(partition)


async def _members_done(
    rebuilt: MemoryStore,
    plan: FoldPlan,
    tick: Callable[[int], None],
    *,
    settings: Settings,
    catalog: ViewCatalog,
    batch: int,
    announce: Callable[[str], None] | None,
) -> None:
    """Record the job in the view, then wait until it is done (``RebuildJob.done``)."""
    assert plan.to is not None
    job = RebuildJob(plan.view, group_of(settings, plan.view), settings.topic("analyses"), dict(plan.to),
                     plan.until_time, batch)  # fmt: skip
    rebuilt.record_rebuild_job(job.record())
    watch = catalog.open_view(plan.view, read_only=True)
    seen = 0
    waiting = (
        f"view {plan.view}: waiting for members to fold {sum(job.targets.values())} record(s) of "
        f"{len(job.targets)} partition(s); start them with: adamem worker --rebuild {plan.view}"
    )
    log.info("%s", waiting)
    if announce is not None:
        announce(waiting)
    while True:
        reached = sum((await asyncio.to_thread(job.reached, watch)).values())
        if reached > seen:
            tick(reached - seen)
            seen = reached
        if reached == sum(job.targets.values()) and not await asyncio.to_thread(job.owes_erasure, watch):
            return
        await asyncio.sleep(POLL_S)


async def rebuild_in_group(
    log: EventLog,
    root: str | StoreLocation,
    settings: Settings,
    *,
    view: str | None = None,
    until_offset: int | None = None,
    until_time: int | None = None,
    verify: bool = False,
    layers: list[str] | None = None,
    switch: bool = True,
    progress: Callable[[int], None] | None = None,
    announce: Callable[[str], None] | None = None,
    batch: int = REBUILD_BATCH,
) -> RebuildReport:
    """Begin a rebuild that members share (``run_member``), wait for them, then verify, catch up and switch.

    The log must be Kafka's (the members' consumer group), the store reachable from every member.
    ``announce`` hears the line that names the view members are started with; ``batch``: events
    per commit of a member.
    """
    if not log.url.startswith("kafka://"):
        raise ConfigError(f"a rebuild shared by a group needs a kafka:// log, not {log.url}; drop --group")
    catalog = open_views(root)

    async def members(rebuilt: MemoryStore, plan: FoldPlan, tick: Callable[[int], None]) -> None:
        await _members_done(rebuilt, plan, tick, settings=settings, catalog=catalog, batch=batch, announce=announce)

    report = await rebuild_view(
        log,
        root,
        settings,
        view=view,
        until_offset=until_offset,
        until_time=until_time,
        verify=verify,
        layers=layers,
        switch=switch,
        progress=progress,
        jobs=1,
        members=members,
    )
    report.group = group_of(settings, report.view)
    return report
