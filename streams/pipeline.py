"""The write path run in-process over any log: analyze new messages, then project new analyses.

This is the embedded default (``adamem project``, the demo, the benchmarks) and the reference the
Faust worker must agree with. Both stages resume from the log itself:

* the analyzer from the ``adamem-source`` header of the last records on the analyses topic
  (which message/control offset they came from), so no separate state can drift from the log;
* the projector from the checkpoint the store wrote with its rows.

Control events are forwarded by the analyzer into the analyses topic, so the folds read one
ordered stream per owner, and replay sees exactly the order live projection saw.
Undecodable or unprocessable records go to the dead-letter topic with the error and their
source position; the stream goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from adamem.analysis.agent import MemoryAgent
from adamem.errors import AdaMemError
from adamem.events import ChatMessage, MemoryCorrected, MemoryForgotten, MessageAnalyzed
from adamem.serde import decode_event, encode_event
from adamem.settings import Settings
from projections.folds.apply import Positioned
from projections.projector import Projector
from streams.log import EventLog, LogRecord, OutgoingRecord

__all__ = [
    "SOURCE_HEADER",
    "PipelineStats",
    "analyze_pending",
    "dead_letter",
    "project_pending",
    "resume_points",
    "run_pipeline",
]

SOURCE_HEADER = "adamem-source"
ERROR_HEADER = "adamem-error"


@dataclass
class PipelineStats:
    """Counts of one pipeline run."""

    analyzed: int = 0
    forwarded: int = 0
    dead_lettered: int = 0
    applied: int = 0
    skipped: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)

    def add(self, other: PipelineStats) -> None:
        """Accumulate another run's counts."""
        self.analyzed += other.analyzed
        self.forwarded += other.forwarded
        self.dead_lettered += other.dead_lettered
        self.applied += other.applied
        self.skipped += other.skipped


def source_of(rec: LogRecord) -> bytes:
    """The ``adamem-source`` header value naming a record's position: ``topic:partition:offset``."""
    return f"{rec.topic}:{rec.partition}:{rec.offset}".encode()


async def dead_letter(log: EventLog, settings: Settings, rec: LogRecord, error: str) -> None:
    """Park an unprocessable record on the dead-letter topic with its error and source position."""
    await log.append(
        settings.topic("deadletter"),
        [
            OutgoingRecord(
                rec.key,
                rec.value,
                headers=((SOURCE_HEADER, source_of(rec)), (ERROR_HEADER, error.encode("utf-8", "replace")[:4000])),
            )
        ],
    )


async def resume_points(log: EventLog, settings: Settings, partition: int) -> dict[str, int]:
    """Next message/control offsets to analyze, from the source headers at the analyses tail.

    Reads back from the tail until both input topics are accounted for: a log whose owners never
    had a control event forwarded is read to its start (once per caller, who keeps the result)."""
    analyses = settings.topic("analyses")
    wanted = {settings.topic("messages"), settings.topic("control")}
    end = (await log.end_offsets(analyses)).get(partition, 0)
    found: dict[str, int] = {}
    window = 256
    start = end
    while start > 0 and set(found) != wanted:
        start = max(0, end - window)
        async for rec in log.read(analyses, from_offsets={partition: start}, until={partition: end}):
            for name, value in rec.headers:
                if name == SOURCE_HEADER:
                    topic, _, offset = value.decode().rpartition(":")
                    topic = topic.rpartition(":")[0]
                    if topic in wanted:
                        found[topic] = max(found.get(topic, 0), int(offset) + 1)
        window *= 4
    return found


async def _read_partition(log: EventLog, topic: str, partition: int, start: int, end: int) -> list[LogRecord]:
    return [r async for r in log.read(topic, from_offsets={partition: start}, until={partition: end})]


async def analyze_pending(
    log: EventLog,
    agent: MemoryAgent,
    settings: Settings,
    partition: int,
    batch: int = 256,
    progress: Callable[[int], None] | None = None,
    resume: dict[str, int] | None = None,
) -> PipelineStats:
    """Analyze every message (and forward every control event) of a partition not yet analyzed.

    ``resume`` (topic -> next offset) caches where the previous call stopped; when None, it is
    read back from the analyses topic. It is updated in place.
    """
    stats = PipelineStats()
    messages_topic, control_topic = settings.topic("messages"), settings.topic("control")
    if resume is None or not resume:
        found = await resume_points(log, settings, partition)
        resume = resume if resume is not None else {}
        resume.update(found)
    m_end = (await log.end_offsets(messages_topic)).get(partition, 0)
    c_end = (await log.end_offsets(control_topic)).get(partition, 0)
    pending = await _read_partition(log, messages_topic, partition, resume.get(messages_topic, 0), m_end)
    pending += await _read_partition(log, control_topic, partition, resume.get(control_topic, 0), c_end)
    pending.sort(key=lambda r: (r.timestamp, r.topic != control_topic, r.offset))  # arrival order
    for i in range(0, len(pending), batch):
        await _analyze_batch(log, agent, settings, pending[i : i + batch], stats)
        if progress is not None:
            progress(len(pending[i : i + batch]))
    resume[messages_topic], resume[control_topic] = m_end, c_end
    return stats


async def _analyze_batch(
    log: EventLog, agent: MemoryAgent, settings: Settings, records: Sequence[LogRecord], stats: PipelineStats
) -> None:
    decoded: list[tuple[LogRecord, ChatMessage | MemoryForgotten | MemoryCorrected]] = []
    for rec in records:
        try:
            event = decode_event(rec.value)
        except AdaMemError as exc:
            await dead_letter(log, settings, rec, f"{type(exc).__name__}: {exc}")
            stats.dead_lettered += 1
            continue
        if isinstance(event, MessageAnalyzed):
            await dead_letter(log, settings, rec, f"a MessageAnalyzed event does not belong on {rec.topic}")
            stats.dead_lettered += 1
            continue
        if event.user_id != rec.key:
            await dead_letter(log, settings, rec, f"record key {rec.key!r} is not the event's owner {event.user_id!r}")
            stats.dead_lettered += 1
            continue
        decoded.append((rec, event))
    messages = [e for _, e in decoded if isinstance(e, ChatMessage)]
    try:
        analyses = iter(agent.analyze(messages))
    except AdaMemError as exc:
        raise AdaMemError(f"the Memory Agent failed on a batch of {len(messages)} message(s): {exc}") from exc
    out: list[OutgoingRecord] = []
    for rec, event in decoded:
        if isinstance(event, ChatMessage):
            out.append(OutgoingRecord(event.user_id, encode_event(next(analyses)), ((SOURCE_HEADER, source_of(rec)),)))
            stats.analyzed += 1
        else:
            out.append(OutgoingRecord(event.user_id, rec.value, ((SOURCE_HEADER, source_of(rec)),)))
            stats.forwarded += 1
    if out:
        await log.append(settings.topic("analyses"), out)


async def project_pending(
    log: EventLog,
    projector: Projector,
    settings: Settings,
    partition: int,
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> PipelineStats:
    """Fold every analysis/control event of a partition past the store's checkpoint."""
    stats = PipelineStats()
    topic = settings.topic("analyses")
    start = projector.store.checkpoint(partition).get(topic, 0)
    end = (await log.end_offsets(topic)).get(partition, 0)
    while start < end:
        stop = min(end, start + batch)
        events: list[Positioned] = []
        async for rec in log.read(topic, from_offsets={partition: start}, until={partition: stop}):
            try:
                event = decode_event(rec.value)
                if isinstance(event, ChatMessage):
                    raise AdaMemError("a raw ChatMessage does not belong on the analyses topic")
            except AdaMemError as exc:
                await dead_letter(log, settings, rec, f"{type(exc).__name__}: {exc}")
                stats.dead_lettered += 1
                continue
            events.append(Positioned(event, rec.topic, rec.partition, rec.offset))
        result = projector.apply_batch(partition, topic, events, upto=stop)
        stats.applied += result.applied
        stats.skipped += result.skipped
        if progress is not None:
            progress(stop - start)
        start = stop
    return stats


async def run_pipeline(
    log: EventLog,
    projector: Projector,
    agent: MemoryAgent,
    settings: Settings,
    *,
    follow: bool = False,
    poll_s: float = 0.5,
    stop: asyncio.Event | None = None,
    agent_factory: Callable[[Settings], MemoryAgent] | None = None,
) -> PipelineStats:
    """Analyze and project everything pending on every partition; with ``follow``, keep going.

    ``settings`` and ``agent`` must be those of the store's generation (``generations.resolve``).
    When the active view switches to another generation while following, the pipeline goes on
    with that generation's analyses topic and an agent from ``agent_factory`` (without one, it
    stops with an error rather than mix two analyzers in one view).
    """
    from streams.generations import FIRST, settings_for

    total = PipelineStats()
    projector.store.bind(log.partitions(settings.topic("analyses")))
    resume: dict[int, dict[str, int]] = {}
    while True:
        record = projector.store.generation()
        if record and record.get("name", FIRST) != settings.generation:
            if agent_factory is None:
                raise AdaMemError(
                    f"the store's active view is generation {record.get('name')}, this pipeline analyses "
                    f"{settings.generation}; restart it"
                )
            settings = settings_for(settings, record)
            agent, resume = agent_factory(settings), {}
            projector.store.bind(log.partitions(settings.topic("analyses")))
        for p in range(log.partitions(settings.topic("messages"))):
            total.add(await analyze_pending(log, agent, settings, p, resume=resume.setdefault(p, {})))
            total.add(await project_pending(log, projector, settings, p))
        if not follow or (stop is not None and stop.is_set()):
            return total
        await asyncio.sleep(poll_s)
