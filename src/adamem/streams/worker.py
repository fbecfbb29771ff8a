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
  skipped, so redelivery after a crash or rebalance changes nothing. With ``ADAMEM_COMPRESSION``
  set, it then proposes the compressions of the owners each committed batch folded events of and
  sends them to ``control`` (``streams.compress``), where ``analyze`` forwards them like any
  control event.

Both agents read ``read_committed``: aborted transactions never reach a projection, and no
group offset passes an event that was not handled (``_CommittedReadsConsumer.ack``). What the
worker holds between batches, and the handlers the agents call, are ``streams.worker_state``'s
``WorkerState``; ``create_app`` only wires Faust to it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_kafka

from adamem.analysis.agent import MemoryAgent
from adamem.projections.projector import Projector
from adamem.settings import Settings
from adamem.streams.log import EventLog
from adamem.streams.worker_state import WorkerState, WorkerTopics

__all__ = ["create_app"]


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
    """Faust's consumer, reading committed records; it commits no offset past an event the worker did not handle.

    With the worker's transactions, an input partition's offsets are committed only inside the
    transaction that publishes its analyses (``send_offsets_to_transaction``). Faust commits the
    offsets of every event its agents have acked, also of a batch given up because its partition
    moved: the group's offset would pass messages nobody analysed, and the partition's next owner,
    which starts at that offset, would never read them (seen in the kill test: 12 messages lost).
    """

    def _new_consumer_thread(self) -> Any:
        return _CommittedReadsThread(self, loop=self.loop, beacon=self.beacon)

    def ack(self, message: Any) -> bool:
        """Record an ack unless the worker withholds it (``WorkerState.acks``): then the offset stays below it.

        Faust's take buffer acks every event of a batch once the batch is handled, also events
        fetched before a rebalance that assigned their partition again (their acks would count in
        the new assignment) and analyses whose fold was given up (another writer held the shard).
        A withheld ack leaves a gap that the group's offset does not pass.
        """
        state: WorkerState | None = getattr(self.app, "adamem_state", None)
        if state is not None and not message.acked and not state.acks(message):
            message.acked = True
            self._unacked_messages.discard(message)
            return False
        done: bool = super().ack(message)
        return done

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
    """The worker's ``faust.App``: its consumer reads ``read_committed``; its ``WorkerState`` stops with it.

    ``adamem_counts``, ``adamem_partitions`` and ``adamem_restart`` are the state's, for
    ``adamem worker``'s status line and restart; ``adamem_agents`` and ``adamem_topics`` are
    Faust's, for tests that drive the agents.
    """

    adamem_state: WorkerState | None = None
    adamem_agents: dict[str, Any]
    adamem_topics: dict[str, Any]

    @property
    def adamem_transactional_topics(self) -> frozenset[str]:
        """Input topics whose offsets only the worker's transactions commit (``_CommittedReadsConsumer``)."""
        return self.adamem_state.transactional_topics if self.adamem_state is not None else frozenset()

    @property
    def adamem_restart(self) -> str | None:
        """The analysis generation to follow, once the active view switched to it."""
        return self.adamem_state.restart_for if self.adamem_state is not None else None

    @property
    def adamem_counts(self) -> dict[str, int]:
        """Events analysed and folded so far."""
        return self.adamem_state.counts if self.adamem_state is not None else {}

    @property
    def adamem_partitions(self) -> set[int]:
        """Partitions this worker holds now."""
        return self.adamem_state.held if self.adamem_state is not None else set()

    def _new_transport(self) -> Any:
        return _CommittedReadsTransport(self.conf.broker_consumer, self)

    async def on_stop(self) -> None:
        await super().on_stop()
        if self.adamem_state is not None:
            await self.adamem_state.stop()


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
    analyze_only: bool = False,
) -> faust.App:
    """The Faust app with the ``analyze`` and ``project`` agents; models and stores are made lazily.

    ``settings`` are those of the store's analysis generation. When the active view switches to
    another generation, the agents stop handling events and call ``restart`` (default: a graceful
    SIGTERM to this process, after which ``run_worker`` starts again with the new generation);
    ``app.adamem_restart`` then names the generation to follow. ``log_reader`` makes the reader
    of the log used to fill projection gaps and find what is already analysed (default: Kafka).
    ``analyze_only``: the ``analyze`` agent alone, for ``settings``' generation whatever view is
    active (a member of a reanalysis the group shares, ``streams.reanalyze_group``).
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
    control = app.topic(settings.topic("control"), **raw)  # the compressions the project agent proposes
    state = WorkerState(
        settings,
        bootstrap,
        group,
        agent_factory,
        projector_factory,
        WorkerTopics(analyses, deadletter, changes, control),
        restart=restart,
        log_reader=log_reader,
        generation=lambda: app.consumer_generation_id,  # set by Faust on every assignment
        follows_active_view=not analyze_only,
    )

    @app.agent(inputs, name="analyze")
    async def analyze(stream: Any) -> None:
        async for events in stream.take_events(batch, within=within_s):
            await state.analyze(events)

    agents: dict[str, Any] = {"analyze": analyze}
    if not analyze_only:

        @app.agent(analyses, name="project")
        async def project(stream: Any) -> None:
            async for events in stream.take_events(batch * 4, within=within_s):
                await state.project(events)

        agents["project"] = project

    @app.timer(settings.metrics_interval_s, name="consumer-lag")  # type: ignore[untyped-decorator]
    async def consumer_lag() -> None:
        await state.measure_lag()

    app.on_partitions_revoked.connect(state.revoked)  # type: ignore[arg-type]
    app.on_partitions_assigned.connect(state.assigned)  # type: ignore[arg-type]
    app.adamem_state = state
    app.adamem_agents = agents
    app.adamem_topics = {
        "inputs": inputs,
        "analyses": analyses,
        "deadletter": deadletter,
        "changes": changes,
        "control": control,
    }
    return app
