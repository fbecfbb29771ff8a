"""Replay's folding, partition by partition, in this process or in several side by side.

A rebuild folds each partition of the analyses topic into its own shard of the new view, and no
owner spans two partitions, so partitions fold independently: ``FoldRunner`` deals them to
``jobs`` shares (the largest first, each to the least loaded share). This process folds the first
share, processes of their own the others, with the same code a one-process rebuild runs
(``fold_plan``); they report each committed batch to this one.
The rows are the ones a fold in one process writes: each shard is written by one process, in
offset order.

Every fold starts at its shard's checkpoint, and every commit of a bulk view is its rows plus its
checkpoint, so a process that dies is started again and goes on from where its shards' last
commits left them (a shard it was writing is recovered to its checkpoint when opened again); no
event is folded twice. A process that fails with an error is not restarted: the error is raised,
and the view, never switched to, is left for inspection.

The processes are ``streams.processes``'; each opens the log and the store again from their
locations. A log or store held in this process (``memory://``, a catalog object) is folded here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from adamem.errors import AdaMemError, StoreError
from adamem.events import ChatMessage, Event, MemoryForgotten, MessageAnalyzed
from adamem.locations import StoreLocation
from adamem.projections.folds.apply import Positioned
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_views
from adamem.projections.store.ports import ViewCatalog
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.keys import KeyRingLike, keystore_for
from adamem.streams.log import EventLog, LogRecord
from adamem.streams.processes import Channel, JobFailed, Started, reopenable, run_jobs

__all__ = [
    "REBUILD_BATCH",
    "FoldPlan",
    "FoldRunner",
    "Folded",
    "Step",
    "collector_paused",
    "fold_plan",
    "folded_until",
    "prepare",
    "replayed",
]

REBUILD_BATCH = 10_000
"""Events folded per commit of a rebuild: few commits, while the decoded batch stays a few hundred MB at most.
A rest of less than a quarter batch at a fold's end joins the batch before it: a commit of a few events costs
about what a full one does in LanceDB, and leaves one more fragment of each table for ``optimize`` to compact."""

AUTO_EVENTS_PER_PROCESS = 20_000
"""Log records per process when the process count is left to the runner: starting one costs about
1.3 s of CPU (importing LanceDB), which 2 processes on 2 cores won back at 40k records (1.40× one
process) and at 20k (1.09×), and lost at 10k (0.87×) (``bench/results/replay_jobs*.json``)."""

Step = Callable[[int, int], None]
"""Hears of each committed batch: the log records it read and the events it folded."""


@dataclass(frozen=True)
class FoldPlan:
    """What a rebuild folds into its view, partition by partition, each from its shard's checkpoint.

    ``to``: the offset each partition is folded to (None: no such step). Then ``forgets_to``: the
    forgets only up to these offsets, the checkpoint left where it is (the tail past a view as of
    an offset). Then ``catch_up``: on to the log's end as it is then. Then ``optimize`` the shards.
    """

    view: str
    partitions: tuple[int, ...]
    to: Mapping[int, int] | None = None
    until_time: int | None = None
    forgets_to: Mapping[int, int] | None = None
    catch_up: bool = False
    optimize: bool = False
    batch: int = REBUILD_BATCH

    def then(self, other: FoldPlan) -> FoldPlan:
        """This plan's folding followed by ``other``'s remaining steps, in one pass over the partitions."""
        return replace(self, forgets_to=other.forgets_to, catch_up=other.catch_up, optimize=other.optimize)


@dataclass(frozen=True)
class Folded:
    """What carrying out a plan did: the batches whose forgets were erased, and the next offset of the analyses
    topic in the checkpoint of each shard it folded, as the plan left it."""

    erased: int = 0
    offsets: Mapping[int, int] = field(default_factory=dict)

    def __add__(self, other: Folded) -> Folded:
        return Folded(self.erased + other.erased, {**self.offsets, **other.offsets})


def folded_until(event: Event, until_time: int | None) -> bool:
    """Whether a view as of ``until_time`` folds the event: every forget is, whenever it was asked for."""
    if until_time is None or isinstance(event, MemoryForgotten):
        return True
    when = event.message.occurred_at if isinstance(event, MessageAnalyzed) else getattr(event, "occurred_at", 0)
    return bool(when <= until_time)


def replayed(records: Iterable[LogRecord], keys: KeyRingLike, until_time: int | None = None) -> list[Positioned]:
    """The events a rebuild folds of these analyses records: decoded, in their order.

    Records that do not decode were dead-lettered when first projected; a forgotten message comes
    back shredded. Chat messages are not folded, nor events after ``until_time``.
    """
    events: list[Positioned] = []
    for rec in records:
        try:
            event = decode_event(rec.value, keys)
        except AdaMemError:
            continue
        if isinstance(event, ChatMessage) or not folded_until(event, until_time):
            continue
        events.append(Positioned(event, rec.topic, rec.partition, rec.offset))
    return events


async def _fold_range(
    log: EventLog,
    projector: Projector,
    settings: Settings,
    partition: int,
    end: int,
    *,
    until_time: int | None = None,
    step: Step | None = None,
    forgets_only: bool = False,
    batch: int = REBUILD_BATCH,
) -> None:
    """Fold analyses of a partition from its shard's checkpoint up to ``end`` into the projector's store.

    ``forgets_only``: fold only the forgets, leaving the checkpoint where it is (the tail of the log
    after a view as of an offset: what was forgotten later stays forgotten in the past too).
    """
    topic = settings.topic("analyses")
    keys = keystore_for(log, settings)
    pos = projector.store.checkpoint(partition).get(topic, 0)
    while pos < end:
        stop = min(end, pos + batch)
        if end - stop < batch // 4:  # a short rest joins this batch (see REBUILD_BATCH)
            stop = end
        records = [rec async for rec in log.read(topic, from_offsets={partition: pos}, until={partition: stop})]
        events = replayed(records, keys, until_time)
        if forgets_only:
            projector.apply_forgets(partition, events)
        else:
            projector.apply_batch(partition, topic, events, upto=stop)
        if step is not None:
            step(stop - pos, 0 if forgets_only else len(events))
        pos = stop


async def fold_plan(log: EventLog, views: ViewCatalog, settings: Settings, plan: FoldPlan, step: Step) -> Folded:
    """Carry out ``plan`` on its partitions' shards."""
    store = views.open_view(plan.view, optimize_every=0, bulk=True)
    projector = Projector(store, feed=False)  # a rebuild publishes no feed
    topic = settings.topic("analyses")
    offsets: dict[int, int] = {}

    async def fold(partition: int, end: int, *, until_time: int | None = None, forgets_only: bool = False) -> None:
        await _fold_range(
            log, projector, settings, partition, end, until_time=until_time, step=step, forgets_only=forgets_only,
            batch=plan.batch,
        )  # fmt: skip
        offsets[partition] = store.checkpoint(partition).get(topic, 0)  # the writer's own: read from no table

    try:
        for p in plan.partitions:
            if plan.to is not None:
                await fold(p, plan.to[p], until_time=plan.until_time)
            if plan.forgets_to is not None:
                await fold(p, plan.forgets_to[p], forgets_only=True)
        if plan.catch_up:
            ends = await log.end_offsets(topic)  # what arrived since the rebuild began
            for p in plan.partitions:
                await fold(p, ends.get(p, 0))
        if plan.optimize:
            store.optimize()
    finally:
        store.close()
    return Folded(projector.erased, offsets)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a rebuild runs (and restore it after).

    A rebuild allocates rows by the million and leaves almost nothing in reference cycles (a few
    hundred objects for 11,000 events, measured), so the collector's passes only walk live
    objects again and again: ~13 % of a LoCoMo rebuild. Reference counting still frees everything
    else at once. What the rebuild leaves alive is frozen before the collector resumes, or its
    first pass would walk all of it once more (~9 %); frozen objects are still freed by reference
    counting, only a cycle among them would wait for ``gc.unfreeze``. The collector is paused
    for the whole process: a rebuild runs in a command of its own.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _deal(partitions: tuple[int, ...], sizes: Mapping[int, int], jobs: int) -> list[tuple[int, ...]]:
    """Partitions with records, dealt to at most ``jobs`` groups: the largest first, each to the lightest group."""
    todo = sorted((p for p in partitions if sizes.get(p, 0) > 0), key=lambda p: (-sizes[p], p))
    if not todo:
        return [partitions] if partitions else []
    groups: list[list[int]] = [[] for _ in range(min(jobs, len(todo)))]
    loads = [0] * len(groups)
    for p in todo:
        i = loads.index(min(loads))
        groups[i].append(p)
        loads[i] += sizes[p]
    rest = [p for p in partitions if p not in todo]  # nothing to fold now, but a catch-up may find some
    groups[0].extend(rest)
    return [tuple(sorted(g)) for g in groups]


class FoldRunner:
    """Runs fold plans here or, with ``jobs`` > 1 over shareable locations, in processes side by side.

    ``processes``: the most processes that folded a plan side by side, this one among them (0: every
    plan folded here alone); ``restarts``: processes started again after they died; ``pids``: the
    running processes' ids. ``start`` starts the processes a log of given sizes will fold with, before
    this process opens the store (each spends about a second importing LanceDB, as this one does);
    ``close`` ends those no plan took.
    """

    def __init__(
        self, log: EventLog, root: str | StoreLocation | ViewCatalog, settings: Settings, *, jobs: int | None = 1
    ) -> None:
        """``jobs`` None: the cores, one process per ``AUTO_EVENTS_PER_PROCESS`` records at most."""
        if jobs is not None and jobs < 1:
            raise AdaMemError(f"jobs must be at least 1, not {jobs}")
        self.log, self.root, self.settings = log, root, settings
        self.auto = jobs is None
        self.jobs = jobs if jobs is not None else (os.cpu_count() or 1)
        self.shared = reopenable(log.url, root)
        self.restarts = 0
        self.processes = 0
        self.pids: set[int] = set()
        self._started = Started(f"{__name__}:fold_job")

    @functools.cached_property
    def views(self) -> ViewCatalog:
        """The store's views (opening them imports LanceDB: ``start`` processes first)."""
        return open_views(self.root)

    def _groups(self, partitions: tuple[int, ...], sizes: Mapping[int, int]) -> list[tuple[int, ...]]:
        jobs = self.jobs
        if self.auto:
            jobs = max(1, min(jobs, sum(sizes.values()) // AUTO_EVENTS_PER_PROCESS))
        return _deal(partitions, sizes, jobs)

    async def start(self, sizes: Mapping[int, int]) -> None:
        """Start the processes that plans over these partitions (records per partition) will fold in."""
        groups = self._groups(tuple(sorted(sizes)), sizes)
        if len(groups) > 1 and self.shared:
            await self._started.start(len(groups) - 1, self.pids)

    async def close(self) -> None:
        """End the started processes no plan took."""
        await self._started.close(self.pids)

    async def run(self, plan: FoldPlan, step: Step, *, sizes: Mapping[int, int]) -> Folded:
        """Carry out ``plan``; ``sizes`` (records per partition) balance the processes."""
        groups = self._groups(plan.partitions, sizes)
        if len(groups) <= 1 or not self.shared:
            return await fold_plan(self.log, self.views, self.settings, plan, step)
        assert isinstance(self.root, str | StoreLocation)
        self.processes = max(self.processes, len(groups))
        plans = [replace(plan, partitions=g) for g in groups]
        # This process folds the first share while processes fold the others: one start (about 1.3 s of
        # CPU, most of it importing LanceDB) fewer, and the first share is the largest (``_deal``). The
        # processes have their plans before this one begins: it does not pause while it folds.
        handed = asyncio.Event()
        away = asyncio.ensure_future(
            _in_processes(self.log.url, self.root, self.settings, plans[1:], step, self.pids, self._started, handed)
        )
        waiter = asyncio.ensure_future(handed.wait())
        try:
            await asyncio.wait([away, waiter], return_when=asyncio.FIRST_COMPLETED)
            if away.done():  # the processes failed before they had their plans
                await away
            here = await fold_plan(self.log, self.views, self.settings, plans[0], step)
            more, restarts = await away
        finally:
            waiter.cancel()
            if not away.done():  # the share here failed: the processes are stopped
                away.cancel()
                await asyncio.gather(away, return_exceptions=True)
        self.restarts += restarts
        return here + more


def prepare() -> None:
    """A fold process's imports, made while its plan is on the way (``streams.processes``): about a second."""
    import adamem.projections.store.lance
    import adamem.streams.factory  # noqa: F401


async def fold_job(job: tuple[str, str | StoreLocation, Settings, FoldPlan], channel: Channel) -> Folded:
    """A fold process's work (``streams.processes``): the plan carried out, each committed batch noted."""
    from adamem.streams.factory import open_log

    log_url, root, settings, plan = job
    log = open_log(log_url, settings)
    await log.start()
    try:
        with collector_paused():
            return await fold_plan(log, open_views(root), settings, plan, lambda r, e: channel.note((r, e)))
    finally:
        await log.stop()


async def _in_processes(
    log_url: str,
    root: str | StoreLocation,
    settings: Settings,
    plans: list[FoldPlan],
    step: Step,
    pids: set[int],
    started: Started,
    handed: asyncio.Event,
) -> tuple[Folded, int]:
    """Carry out each plan in a process of its own (``streams.processes``), those ``started`` first.

    Returns what they did together and the processes started again after dying.
    """
    try:
        done, restarts = await run_jobs(
            f"{__name__}:fold_job",
            [(log_url, root, settings, p) for p in plans],
            on_note=lambda _, note: step(*note),
            pids=pids,
            started=started,
            handed=handed,
        )
    except JobFailed as exc:
        raise StoreError(f"replay into view {plans[0].view} failed: {exc}") from exc
    return sum(done, Folded()), restarts
