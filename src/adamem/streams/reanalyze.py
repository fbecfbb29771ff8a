"""Reanalysis: a new generation of analyses from the same messages, projected side by side.

``reanalyze`` runs the Memory Agent with another extractor (or embedder) over every message and
control event of the log, writing generation ``gN`` to its own analyses topic
(``<prefix>.analyses.gN``); it projects that topic into a new view of the store (named ``gN``
unless told otherwise) and compares the new view with the active one, layer by layer: items
added, removed and altered. The active view keeps serving queries; nothing switches unless asked
(``switch=True`` here, or ``switch_to`` later — ``adamem views switch NAME``), and a switch first
catches the view up with whatever reached the log since.

After a switch the write path follows the new generation: the in-process pipeline and the Faust
worker read the generation of the active view and analyse new messages with its analyzer.
A reanalysis that stops halfway leaves an unfinished view that is never active; run it again
(a new generation number is taken) and remove the unfinished view's folder when convenient.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_agent, build_embedder, build_extractor
from adamem.errors import AdaMemError, ConfigError, LogError, StoreError
from adamem.locations import StoreLocation
from adamem.projections.folds.rows import Row
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_views
from adamem.projections.store.ports import MemoryStore, StoreReader, ViewCatalog
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.generations import FIRST, generation_record, next_generation, resolve, settings_for
from adamem.streams.log import EventLog, LogRecord, OutgoingRecord
from adamem.streams.pipeline import PipelineStats, analyze_pending, project_pending
from adamem.streams.processes import Channel, JobFailed, reopenable, run_jobs
from adamem.streams.reanalyze_group import ReanalysisJob, open_reanalysis, targets_of, wait_for_members
from adamem.streams.replay import LAYER_TABLES, store_rows

__all__ = ["LayerChanges", "ReanalyzeReport", "catch_up", "layer_changes", "reanalyze", "switch_to", "view_generations"]

PROVENANCE_FIELDS = frozenset(
    {
        "analysis_event_id",
        "analyzer",
        "generation",
        "source_topic",
        "source_partition",
        "source_offset",
        "origin_event_id",
    }
)
"""Fields that say which analysis event a row came from; they differ between generations by
construction, so they do not make a row "altered"."""

EXAMPLES = 5  # examples kept per layer and kind of change


@dataclass
class LayerChanges:
    """How one layer differs between the active view and the new one."""

    added: int = 0
    removed: int = 0
    altered: int = 0
    unchanged: int = 0
    examples: list[tuple[str, str, str, str]] = field(default_factory=list)  # (kind, owner, table, text)


@dataclass
class ReanalyzeReport:
    """What a reanalysis wrote and how its memory differs from the active one."""

    view: str
    generation: str
    analyzer: dict[str, str]
    previous_view: str
    previous_generation: str
    stats: PipelineStats = field(default_factory=PipelineStats)
    layers: dict[str, LayerChanges] = field(default_factory=dict)
    switched: bool = False
    group: bool = False
    """Analysed by members of the generation's consumer group (``streams.reanalyze_group``)."""
    accounted: int = 0
    """With ``group``: the input records (messages and control events) the members accounted for."""


def row_text(row: Row) -> str:
    """A short human description of a row, for the change report."""
    for name in ("text", "content", "label"):
        value = getattr(row, name, None)
        if isinstance(value, str) and value:
            return value[:120]
    if row.TABLE == "persona":
        return f"{getattr(row, 'key', '')}: {getattr(row, 'value', '')}"[:120]
    if row.TABLE == "graph_edges":
        return f"{getattr(row, 'edge_type', '')} {getattr(row, 'src', '')[:8]}→{getattr(row, 'dst', '')[:8]}"
    return row.id


def _content(row: Row) -> dict[str, object]:
    return {k: v for k, v in dataclasses.asdict(row).items() if k not in PROVENANCE_FIELDS}


def layer_changes(live: StoreReader, new: StoreReader, owners: Sequence[str] | None = None) -> dict[str, LayerChanges]:
    """Per layer, the items only in the new store (added), only in the live one (removed), changed (altered).

    Rows are matched by table and id (ids are derived from content and source message, not from
    the analysis event, so the same finding gets the same id in every generation).
    """
    who = list(owners) if owners is not None else sorted(set(live.owners()) | set(new.owners()))
    report: dict[str, LayerChanges] = {}
    for layer, tables in LAYER_TABLES.items():
        wanted = set(tables)
        a = {(r.owner_id, r.TABLE, r.id): r for r in store_rows(live, wanted, who)}
        b = {(r.owner_id, r.TABLE, r.id): r for r in store_rows(new, wanted, who)}
        changes = report[layer] = LayerChanges()
        for key in sorted(set(a) | set(b)):
            if key not in a:
                kind, row = "added", b[key]
            elif key not in b:
                kind, row = "removed", a[key]
            elif _content(a[key]) != _content(b[key]):
                kind, row = "altered", b[key]
                was, now = _content(a[key]), _content(b[key])
                fields = [f for f in now if was[f] != now[f]]
            else:
                changes.unchanged += 1
                continue
            setattr(changes, kind, getattr(changes, kind) + 1)
            if sum(1 for e in changes.examples if e[0] == kind) < EXAMPLES:
                text = row_text(row) + (f"  [{', '.join(fields)}]" if kind == "altered" else "")
                changes.examples.append((kind, key[0], key[1], text))
    return report


def view_generations(root: str | ViewCatalog) -> dict[str, dict[str, str]]:
    """The recorded generation of every view of a store (folder or catalog; {} for a view that records none)."""
    views = open_views(root)
    return {name: views.open_view(name, read_only=True).generation() for name in views.views()}


async def _analyze_and_project(
    log: EventLog, store: MemoryStore, settings: Settings, agent: MemoryAgent, progress: Callable[[int], None] | None
) -> PipelineStats:
    """Analyse every pending message of ``settings``' generation with ``agent``; project its analyses into ``store``."""
    topic = settings.topic("analyses")
    partitions = log.partitions(settings.topic("messages"))
    store.bind(log.partitions(topic))
    projector = Projector(store, feed=False)  # a view nobody reads until a switch: subscribers hear nothing of it
    stats = PipelineStats()
    for p in range(partitions):
        stats.add(await analyze_pending(log, agent, settings, p, progress=progress))
        stats.add(await project_pending(log, projector, settings, p))
    return stats


class _AppendsThroughParent:
    """A log read here and appended to by the parent process: an embedded log has one writing process."""

    def __init__(self, log: EventLog, channel: Channel) -> None:
        self._log, self._channel, self.url = log, channel, log.url

    async def start(self) -> None:
        await self._log.start()

    async def stop(self) -> None:
        await self._log.stop()

    def hold_writer_lock(self) -> None:
        raise LogError(f"a reanalysis process appends to {self.url} through its parent")

    def partitions(self, topic: str) -> int:
        return self._log.partitions(topic)

    async def append(self, topic: str, records: Sequence[OutgoingRecord]) -> list[tuple[int, int]]:
        answer: list[tuple[int, int]] = await self._channel.call((topic, list(records)))
        return answer

    async def end_offsets(self, topic: str) -> dict[int, int]:
        return await self._log.end_offsets(topic)

    def read(
        self,
        topic: str,
        *,
        from_offsets: dict[int, int] | None = None,
        key: str | None = None,
        until: dict[int, int] | None = None,
    ) -> AsyncIterator[LogRecord]:
        return self._log.read(topic, from_offsets=from_offsets, key=key, until=until)


_COUNTS = ("analyzed", "forwarded", "dead_lettered", "applied", "skipped")

AnalyseJob = tuple[str, str | StoreLocation, str, Settings, tuple[int, ...]]
"""A reanalysis process's job: the log's URL, the store, the view, the new generation's settings, partitions."""


async def analyse_job(job: AnalyseJob, channel: Channel) -> int:
    """A reanalysis process's work (``streams.processes``): its partitions analysed, then projected into the view.

    Each partition goes on from the resume points its analyses carry and the shard's checkpoint, so
    a process started again after dying analyses no message twice. Each durable batch is noted
    with what it added to the counts (a process killed between a batch's append and its note
    leaves that batch out of the report's counts, not out of the log). An embedded log is appended
    to through the parent (its one writer); Kafka directly. Returns the partitions done.
    """
    log_url, root, view, settings, partitions = job
    log: EventLog = open_log(log_url, settings)
    if not log_url.startswith("kafka://"):
        log = _AppendsThroughParent(log, channel)
    await log.start()
    store = open_views(root).open_view(view, optimize_every=0)
    try:
        projector = Projector(store, feed=False)
        agent = build_agent(settings)
        counts = PipelineStats()
        told = PipelineStats()

        def tell(records: int) -> None:  # what each durable batch added, so a process that dies loses no count
            delta = [getattr(counts, f) - getattr(told, f) for f in _COUNTS]
            for f in _COUNTS:
                setattr(told, f, getattr(counts, f))
            channel.note((records, *delta))

        for p in partitions:
            await analyze_pending(log, agent, settings, p, progress=tell, stats=counts)
            await project_pending(log, projector, settings, p, progress=lambda _: tell(0), stats=counts)
        return len(partitions)
    finally:
        store.close()
        await log.stop()


async def _analyze_in_processes(
    log: EventLog,
    root: str | StoreLocation,
    view: str,
    settings: Settings,
    jobs: int,
    progress: Callable[[int], None] | None,
) -> PipelineStats:
    """The partitions dealt round-robin to ``jobs`` processes (``analyse_job``); their appends made here."""
    partitions = log.partitions(settings.topic("messages"))
    groups = [tuple(range(partitions))[i::jobs] for i in range(min(jobs, partitions))]

    async def append(_: int, call: tuple[str, list[OutgoingRecord]]) -> list[tuple[int, int]]:
        return await log.append(*call)

    stats = PipelineStats()

    def note(_: int, body: tuple[int, ...]) -> None:
        records, *delta = body
        for f, n in zip(_COUNTS, delta, strict=True):
            setattr(stats, f, getattr(stats, f) + n)
        if progress is not None and records:
            progress(records)

    try:
        await run_jobs(
            f"{__name__}:analyse_job",
            [(log.url, root, view, settings, g) for g in groups],
            on_note=note,
            on_call=append,
        )
    except JobFailed as exc:
        raise StoreError(f"reanalysis into view {view} failed: {exc}") from exc
    return stats


async def reanalyze(
    settings: Settings,
    root: str | ViewCatalog,
    *,
    extractor: str | None = None,
    embedder: str | None = None,
    packs: str | None = None,
    view: str | None = None,
    switch: bool = False,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
    group: bool = False,
    announce: Callable[[str], None] | None = None,
) -> ReanalyzeReport:
    """Write a new analysis generation with another analyzer (or other ``packs``), project it into a new view,
    compare, maybe switch.

    ``root`` is the store's folder (URL) or its view catalog. ``jobs``: processes analysing and
    projecting partitions side by side (``streams.processes``), each partition in one of them; a
    log or store held in this process, or a log of one partition, is analysed here. ``group``: on
    a Kafka log, members started with ``adamem worker --reanalyze VIEW`` analyse, and this process
    waits for them, then folds (``streams.reanalyze_group``); ``announce`` hears the line that
    names the view. With ``group`` and the ``view`` of a reanalysis begun earlier (its coordinator
    stopped), this process waits for that one's members again instead of beginning another.
    """
    if jobs < 1:
        raise AdaMemError(f"jobs must be at least 1, not {jobs}")
    if group and not settings.log_url.startswith("kafka://"):
        raise ConfigError(f"a reanalysis shared by a group needs a kafka:// log, not {settings.log_url}; drop --group")
    views = open_views(root)
    active = views.active_view()
    live = views.open_view(active, read_only=True)
    before = resolve(settings, live)
    if group and view is not None and view in views.views() and view != active:
        report = await _resume_group(settings, views, view, before, live, extractor, embedder, progress, announce)
        if switch:
            report.stats.add(await switch_to(settings, views, view))
            report.switched = True
        return report
    generations = view_generations(views)
    taken = [g.get("name", FIRST) for g in generations.values()] + [before.generation]
    gen = next_generation(taken)
    new_settings = dataclasses.replace(
        before,
        generation=gen,
        extractor=extractor or before.extractor,
        embedder=embedder or before.embedder,
    )
    if packs is not None:  # other domain packs: read from their files now, recorded with the new generation
        new_settings = dataclasses.replace(new_settings, packs=packs, packs_record="")
    # a bad extractor/embedder name fails here, before anything is written
    parts = build_extractor(new_settings), build_embedder(new_settings)
    name = view or gen
    if name in views.views():
        raise StoreError(f"view {name!r} already exists in {views.url}; pick another name with --view")
    log = open_log(settings.log_url, new_settings)
    await log.start()
    try:
        topic = new_settings.topic("analyses")
        while any((await log.end_offsets(topic)).values()):
            # an earlier reanalysis stopped before recording its view: never append to its topic
            gen = next_generation([*taken, gen])
            new_settings = dataclasses.replace(new_settings, generation=gen)
            topic = new_settings.topic("analyses")
            name = view or gen
        agent = MemoryAgent(*parts, gen)
        store = views.open_view(name, optimize_every=0)
        store.bind(log.partitions(topic))
        store.record_generation(generation_record(new_settings))
        report = ReanalyzeReport(
            view=name,
            generation=gen,
            analyzer=generation_record(new_settings),
            previous_view=active,
            previous_generation=before.generation,
        )
        partitions = log.partitions(new_settings.topic("messages"))
        if group:
            job = ReanalysisJob(name, await targets_of(log, new_settings))
            store.record_rebuild_job(job.record())
            await _fold_after_members(log, store, new_settings, job, report, progress, announce)
        elif jobs > 1 and partitions > 1 and reopenable(log.url, root):
            assert isinstance(root, str | StoreLocation)
            report.stats = await _analyze_in_processes(log, root, name, new_settings, jobs, progress)
        else:
            report.stats = await _analyze_and_project(log, store, new_settings, agent, progress)
        store.optimize()
    finally:
        await log.stop()
    report.layers = layer_changes(live, store)
    if switch:
        report.stats.add(await switch_to(settings, views, name))
        report.switched = True
    return report


async def _fold_after_members(
    log: EventLog,
    store: MemoryStore,
    settings: Settings,
    job: ReanalysisJob,
    report: ReanalyzeReport,
    progress: Callable[[int], None] | None,
    announce: Callable[[str], None] | None,
) -> None:
    """Wait until the members have analysed the job, then fold the generation's analyses into the view."""
    await wait_for_members(log, settings, job, progress=progress, announce=announce)
    projector = Projector(store, feed=False)
    for p in range(log.partitions(settings.topic("analyses"))):
        report.stats.add(await project_pending(log, projector, settings, p))
    report.group, report.accounted = True, job.total


async def _resume_group(
    settings: Settings,
    views: ViewCatalog,
    view: str,
    before: Settings,
    live: StoreReader,
    extractor: str | None,
    embedder: str | None,
    progress: Callable[[int], None] | None,
    announce: Callable[[str], None] | None,
) -> ReanalyzeReport:
    """Wait again for the members of a reanalysis ``view`` records (its coordinator stopped), then fold and compare."""
    job, recorded = open_reanalysis(views, view)
    record = recorded.generation()
    for option, given in (("extractor", extractor), ("embedder", embedder)):
        if given is not None and given != record.get(option):
            raise ConfigError(
                f"view {view!r} is a reanalysis with {option} {record.get(option)!r}, not {given!r}; "
                "name another view to begin a new one"
            )
    ours = settings_for(settings, record)
    report = ReanalyzeReport(view, ours.generation, record, views.active_view(), before.generation)
    log = open_log(settings.log_url, ours)
    await log.start()
    try:
        store = views.open_view(view, optimize_every=0)
        await _fold_after_members(log, store, ours, job, report, progress, announce)
        store.optimize()
    finally:
        await log.stop()
    report.layers = layer_changes(live, store)
    return report


async def catch_up(settings: Settings, root: str | ViewCatalog, view: str) -> PipelineStats:
    """Analyse and project into ``view`` whatever reached the log since it was last written."""
    store = open_views(root).open_view(view)
    gen_settings = settings_for(settings, store.generation() or generation_record(settings))
    log = open_log(settings.log_url, gen_settings)
    await log.start()
    try:
        return await _analyze_and_project(log, store, gen_settings, build_agent(gen_settings), None)
    finally:
        await log.stop()
        store.close()


async def switch_to(settings: Settings, root: str | ViewCatalog, view: str) -> PipelineStats:
    """Catch ``view`` up with the log, then make it the active view (atomically)."""
    views = open_views(root)
    if view not in views.views():
        raise StoreError(f"store {views.url} has no view {view!r}; views: {views.views()}")
    stats = await catch_up(settings, views, view)
    views.switch_view(view)
    return stats
