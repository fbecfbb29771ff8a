"""The write path run in-process over any log: analyze new messages, then project new analyses.

This is the embedded default (``adamem project``, the demo, the benchmarks) and the reference the
Faust worker must agree with. Both stages resume from the log itself:

* the analyzer from the headers of the last record on the analyses topic: its ``adamem-resume``
  header holds how far both input topics of the partition are accounted for (logs written before
  that header fall back to the ``adamem-source`` headers, which name the message/control offset
  each record came from), so no separate state can drift from the log (``streams.resume``);
* the projector from the checkpoint the store wrote with its rows.

Control events are forwarded by the analyzer into the analyses topic, so the folds read one
ordered stream per owner, and replay sees exactly the order live projection saw. With
``ADAMEM_COMPRESSION`` set (rules, openai), the owners a batch folded events of then get the
compressions their records call for (``streams.compress``: control events too), analysed and
folded in the same pass.

Crypto-shredding (``streams.keys``): messages are read and analyses written through the log's
keystore — an analysis is sealed under its message's key, and its new keys are flushed before it
is appended. A forget destroys keys (the message's, or all of the owner's) before it is forwarded
and again, idempotently, before it is folded, so a replay never reads what was forgotten. Live
projection saw the message readable and replay will not, so after a batch that folded a message
forget the owner is rebuilt in place from the log (``replay.rebuild_owner``, the forgotten
message now shredded): the live state is then the state any replay gives. A shredded message is
not analysed (there is nothing to read) and is folded as nothing.
Undecodable or unprocessable records — and records on a partition other than their key's (the
rule: every record is where Kafka's murmur2 partitioner puts its key) — go to the dead-letter topic,
on the partition they arrived on, with the error and their source position; the stream goes on.
A dead letter carries progress like an analysis does (``adamem-resume``, for the analyses topic
named by ``adamem-for``), and the resume point is the higher of the two, so a record is
dead-lettered once however often the analyzer restarts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from adamem import metrics
from adamem.analysis.agent import MemoryAgent
from adamem.errors import AdaMemError, LogError
from adamem.events import ChatMessage
from adamem.feed import MemoryChanged
from adamem.projections.folds.apply import Positioned
from adamem.projections.projector import Projector
from adamem.projections.store.base import MemoryStore
from adamem.settings import Settings
from adamem.streams.feed import publish_feed, recover_feed
from adamem.streams.keys import keystore_for
from adamem.streams.log import EventLog, LogRecord, OutgoingRecord
from adamem.streams.resume import ResumeTracker, dead_lettered_below, resume_points
from adamem.streams.step import (
    ERROR_HEADER,
    analyse,
    classify,
    dead_letter_record,
    decode_analysis,
    emit,
    fold,
)

__all__ = [
    "ANALYSIS_BATCH",
    "ERROR_HEADER",
    "PROGRESS_BATCH",
    "PipelineStats",
    "analyze_pending",
    "dead_letter",
    "pending_work",
    "project_pending",
    "run_pipeline",
]


@dataclass
class PipelineStats:
    """Counts of one pipeline run."""

    analyzed: int = 0
    forwarded: int = 0
    dead_lettered: int = 0
    applied: int = 0
    skipped: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)
    # owners whose events this call folded (compression looks at them); not accumulated by ``add``
    owners: set[str] = field(default_factory=set)

    def add(self, other: PipelineStats) -> None:
        """Accumulate another run's counts."""
        self.analyzed += other.analyzed
        self.forwarded += other.forwarded
        self.dead_lettered += other.dead_lettered
        self.applied += other.applied
        self.skipped += other.skipped


async def dead_letter(
    log: EventLog, settings: Settings, rec: LogRecord, error: str, points: Mapping[str, int] | None = None
) -> None:
    """Park an unprocessable record on the dead-letter topic with its error and source position."""
    await log.append(settings.topic("deadletter"), [dead_letter_record(rec, error, points, settings.topic("analyses"))])


def _refuse_lost(log: EventLog, topic: str, partition: int, seen: int, end: int, who: str) -> None:
    """Refuse to go on when downstream has seen offsets the log no longer has (they would be given out again)."""
    if seen > end:
        raise LogError(
            f"{who} has seen offsets of {topic} partition {partition} up to {seen - 1}, but the log {log.url} ends "
            f"at offset {end}: offsets {end}-{seen - 1} are missing (a file cut short or replaced by an older copy, "
            "or the wrong log). Nothing was changed. See it with `adamem log check`; `adamem log repair` records "
            "the missing offsets as a gap so they are never given out again."
        )


async def _read_partition(log: EventLog, topic: str, partition: int, start: int, end: int) -> list[LogRecord]:
    return [r async for r in log.read(topic, from_offsets={partition: start}, until={partition: end})]


ANALYSIS_BATCH = 256
"""Messages the Memory Agent analyses at once (one embedding batch, one append)."""
PROGRESS_BATCH = 32
"""The same, while a progress bar is shown: it moves after each batch."""


async def analyze_pending(
    log: EventLog,
    agent: MemoryAgent,
    settings: Settings,
    partition: int,
    batch: int = ANALYSIS_BATCH,
    progress: Callable[[int], None] | None = None,
    resume: dict[str, int] | None = None,
    stats: PipelineStats | None = None,
) -> PipelineStats:
    """Analyze every message (and forward every control event) of a partition not yet analyzed.

    ``resume`` (topic -> next offset) caches where the previous call stopped; when None, it is
    read back from the analyses topic. It is updated in place. The counts go into ``stats`` (a new
    one by default) batch by batch, before ``progress`` hears of the batch, and it is returned.
    """
    stats = PipelineStats() if stats is None else stats
    messages_topic, control_topic = settings.topic("messages"), settings.topic("control")
    if resume is None or not resume:
        found = await resume_points(log, settings, partition)
        resume = resume if resume is not None else {}
        resume.update(found)
    m_end = (await log.end_offsets(messages_topic)).get(partition, 0)
    c_end = (await log.end_offsets(control_topic)).get(partition, 0)
    for topic, end in ((messages_topic, m_end), (control_topic, c_end)):
        _refuse_lost(log, topic, partition, resume.get(topic, 0), end, f"the analyses on {settings.topic('analyses')}")
    pending = await _read_partition(log, messages_topic, partition, resume.get(messages_topic, 0), m_end)
    pending += await _read_partition(log, control_topic, partition, resume.get(control_topic, 0), c_end)
    pending.sort(key=lambda r: (r.timestamp, r.topic != control_topic, r.offset))  # arrival order
    start = {messages_topic: resume.get(messages_topic, 0), control_topic: resume.get(control_topic, 0)}
    tracker = ResumeTracker(start, ((r.topic, r.offset) for r in pending))
    for i in range(0, len(pending), batch):
        await _analyze_batch(log, agent, settings, pending[i : i + batch], stats, {partition: tracker})
        if progress is not None:
            progress(len(pending[i : i + batch]))
    resume[messages_topic], resume[control_topic] = m_end, c_end
    return stats


async def _analyze_batch(
    log: EventLog,
    agent: MemoryAgent,
    settings: Settings,
    records: Sequence[LogRecord],
    stats: PipelineStats,
    trackers: Mapping[int, ResumeTracker],
) -> None:
    """Analyse a batch (in arrival order), forward its control events, dead-letter the rest (``step``).

    The results are appended in arrival order — runs of analyses, runs of dead letters — and
    each record, either kind, carries its source and its partition's points (``trackers``) just after it, so
    whatever is on the log when the process dies says exactly what is handled.
    """
    keys = keystore_for(log, settings)
    handled = [(rec, classify(rec, log.partitions(rec.topic), keys)) for rec in records]
    try:
        items = analyse(agent, handled)
    except AdaMemError as exc:
        count = sum(1 for _, e in handled if isinstance(e, ChatMessage) and not e.shredded)
        raise AdaMemError(f"the Memory Agent failed on a batch of {count} message(s): {exc}") from exc
    run: list[OutgoingRecord] = []
    run_topic = ""
    for out in emit(items, trackers, settings, keys):
        if out.dead:
            stats.dead_lettered += 1
            metrics.DEAD_LETTERS.labels("analyze", metrics.dead_letter_reason(str(out.source.event))).inc()
        elif out.source.analysis is not None:
            stats.analyzed += 1
            metrics.EVENTS_ANALYSED.inc()
        else:
            stats.forwarded += 1
            metrics.EVENTS_FORWARDED.inc()
        if run and out.topic != run_topic:
            keys.flush()  # the keys of what is appended are durable first
            await log.append(run_topic, run)  # acked before anything after it claims it
            run = []
        run_topic = out.topic
        run.append(out.record)
    if run:
        keys.flush()
        await log.append(run_topic, run)


async def project_pending(
    log: EventLog,
    projector: Projector,
    settings: Settings,
    partition: int,
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
    stats: PipelineStats | None = None,
) -> PipelineStats:
    """Fold every analysis/control event of a partition past the store's checkpoint; publish each batch's feed.

    Each batch's change events go to the changes topic once the batch is committed (at least once:
    ``streams.feed``). The counts go into ``stats`` as in ``analyze_pending``.
    """
    stats = PipelineStats() if stats is None else stats
    topic = settings.topic("analyses")
    end = (await log.end_offsets(topic)).get(partition, 0)
    dead_below: int | None = None  # read from the dead-letter topic when a record first needs it
    keys = keystore_for(log, settings)

    async def publish(feed: Sequence[MemoryChanged], reach: int) -> None:
        await publish_feed(log, settings, feed, reach)

    while True:
        # A batch reads its checkpoint and commits past it in one view; a switch is followed at the next batch,
        # which goes on from the new view's own checkpoint.
        with projector.store.held_view():
            start = projector.store.checkpoint(partition).get(topic, 0)
            _refuse_lost(log, topic, partition, start, end, f"the store {projector.store.url}")
            if projector.feed and partition not in projector.feed_checked:
                await recover_feed(log, projector, settings, partition)  # a crash between a commit and its publish
                projector.feed_checked.add(partition)
            if start >= end:
                break
            stop = min(end, start + batch)
            events: list[Positioned] = []
            async for rec in log.read(topic, from_offsets={partition: start}, until={partition: stop}):
                event = decode_analysis(rec, keys)
                if isinstance(event, str):
                    if dead_below is None:
                        dead_below = await dead_lettered_below(log, settings, topic, partition)
                    if rec.offset >= dead_below:  # else dead-lettered before a crash, not yet checkpointed
                        await dead_letter(log, settings, rec, event, {topic: rec.offset + 1})
                        dead_below = rec.offset + 1
                        stats.dead_lettered += 1
                        metrics.DEAD_LETTERS.labels("project", metrics.dead_letter_reason(event)).inc()
                    continue
                events.append(event)
                stats.owners.add(event.event.owner_id)
            result = await fold(log, projector, settings, partition, events, stop, publish, rebuild_from=start)
            stats.applied += result.applied
            stats.skipped += result.skipped
        if progress is not None:
            progress(stop - start)
    return stats


async def pending_work(log: EventLog, store: MemoryStore, settings: Settings) -> int:
    """How many steps ``run_pipeline`` has to do now: inputs to analyse (each then folded too) and analyses to fold.

    From the log's end offsets, the resume points and the store's checkpoints; an estimate where an
    input is dead-lettered (analysed, never folded).
    """
    analyses, messages, control = settings.topic("analyses"), settings.topic("messages"), settings.topic("control")
    ends = {topic: await log.end_offsets(topic) for topic in (analyses, messages, control)}
    work = 0
    for p in range(log.partitions(messages)):
        resume = await resume_points(log, settings, p)
        inputs = sum(max(0, ends[t].get(p, 0) - resume.get(t, 0)) for t in (messages, control))
        work += 2 * inputs + max(0, ends[analyses].get(p, 0) - store.checkpoint(p).get(analyses, 0))
    return work


async def _record_lag(
    log: EventLog, projector: Projector, settings: Settings, partition: int, resume: Mapping[str, int]
) -> None:
    """``adamem_consumer_lag_events`` of a partition: input records not analysed, analyses not projected."""
    analyses = settings.topic("analyses")
    done = {**resume, analyses: projector.store.checkpoint(partition).get(analyses, 0)}
    for topic in (settings.topic("messages"), settings.topic("control"), analyses):
        end = (await log.end_offsets(topic)).get(partition, 0)
        metrics.CONSUMER_LAG.labels(topic, str(partition)).set(max(0, end - done.get(topic, 0)))


async def _compress_owners(log: EventLog, projector: Projector, settings: Settings, owners: set[str]) -> int:
    """Append the compressions proposed for the owners a batch folded events of (``streams.compress``); how many."""
    from adamem.streams.compress import compress_owners, compressor_for

    compressor = compressor_for(settings)
    return await compress_owners(log, projector.store, settings, projector.params, compressor, owners=owners)


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
    progress: Callable[[int], None] | None = None,
) -> PipelineStats:
    """Analyze and project everything pending on every partition; with ``follow``, keep going.

    ``progress`` is called with the number of inputs analysed and of analyses folded, as they are
    (``pending_work`` says how many there are to do).

    ``settings`` and ``agent`` must be those of the store's generation (``generations.resolve``).
    When the active view switches to another generation while following, the pipeline goes on
    with that generation's analyses topic and an agent from ``agent_factory`` (without one, it
    stops with an error rather than mix two analyzers in one view).
    """
    from adamem.streams.generations import FIRST, settings_for

    total = PipelineStats()
    projector.feed &= settings.change_feed  # ADAMEM_CHANGE_FEED=false: no feed computed or published
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
        analyses = settings.topic("analyses")
        ends = await log.end_offsets(analyses)
        for p in range(log.partitions(settings.topic("messages"))):
            # Before anything is analysed: analyses appended to a log that lost some would reuse their offsets.
            seen = projector.store.checkpoint(p).get(analyses, 0)
            _refuse_lost(log, analyses, p, seen, ends.get(p, 0), f"the store {projector.store.url}")
            # With a progress bar to move, smaller analysis batches: at e5's 10-40 messages a second, a
            # batch of 256 left the bar still for up to half a minute; e5 embeds as fast in batches of 32.
            batch = PROGRESS_BATCH if progress is not None else ANALYSIS_BATCH
            total.add(
                await analyze_pending(
                    log, agent, settings, p, batch=batch, progress=progress, resume=resume.setdefault(p, {})
                )
            )
            projected = await project_pending(log, projector, settings, p, progress=progress)
            total.add(projected)
            compressing = settings.compression != "off" and projected.applied
            if compressing and await _compress_owners(log, projector, settings, projected.owners):
                total.add(await analyze_pending(log, agent, settings, p, batch=batch, resume=resume[p]))
                total.add(await project_pending(log, projector, settings, p))
            await _record_lag(log, projector, settings, p, resume[p])
        if not follow or (stop is not None and stop.is_set()):
            return total
        await asyncio.sleep(poll_s)
