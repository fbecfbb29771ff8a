"""Replay: rebuild memory from the recorded analyses, verify it, switch to it, travel in time.

Replay folds the analyses topic again — no model is called (analyses are recorded). A full
rebuild writes a new *view* of the store beside the active one (``ROOT/views/<name>``), up to
exactly the offsets the active view has reached, so the two can be compared row by row
(``--verify``); it then catches up to the end of the log and switches ``CURRENT`` atomically:
queries are served from the old view until that moment. ``until`` builds a view as of an event
time or a log offset and does not switch. A single owner can be rebuilt in place.

Views are reached through the store's view catalog (``projections.store.ports.ViewCatalog``): a
store folder's, or any catalog given instead of one (the in-memory store's, in tests).

A rebuild writes its view in bulk (``open_view(bulk=True)``): commits of ``REBUILD_BATCH`` events,
new rows appended rather than merged, no change log (nobody reads the view yet), and the full-text,
``user_id`` and (for large tables) vector indexes made by one ``optimize`` at the end. Every commit
is still atomic with its checkpoint. Partitions are folded side by side in ``jobs`` processes
(``streams.replay_jobs``): a process that dies is started again and goes on from its shards'
checkpoints; a rebuild that stops half-way leaves a view that was never switched to (and is never
resumed: the next rebuild picks a new name).

Layers are rebuilt together: persona and graph are distilled from the same consolidation
steps as episodic memory, so a fold of one layer alone would not be the same fold. ``layers``
limits what is verified (and, for one owner, which tables are replaced).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from adamem import metrics
from adamem.errors import AdaMemError, StoreError
from adamem.events import ChatMessage
from adamem.locations import StoreLocation
from adamem.projections.folds.apply import Positioned, apply
from adamem.projections.folds.changes import Delete, Upsert
from adamem.projections.folds.params import SEED_DEFAULT
from adamem.projections.folds.rows import TABLES, Row
from adamem.projections.folds.state import OwnerMemory
from adamem.projections.packs import owner_parameters, recorded_parameters
from adamem.projections.store.ports import MemoryStore, StoreReader, ViewCatalog
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.generations import generation_record
from adamem.streams.keys import KeyRingLike, keystore_for
from adamem.streams.log import EventLog
from adamem.streams.replay_jobs import REBUILD_BATCH, Folded, FoldPlan, FoldRunner, collector_paused

__all__ = [
    "LAYER_TABLES",
    "REBUILD_BATCH",
    "Members",
    "RebuildReport",
    "RowDiff",
    "diff_stores",
    "rebuild_owner",
    "rebuild_view",
    "rows_checksum",
]


LAYER_TABLES: dict[str, tuple[str, ...]] = {
    "working": ("owners", "messages"),
    "episodic": ("episodic",),
    "persona": ("persona",),
    "graph": ("graph_nodes", "graph_edges"),
}


@dataclass(frozen=True)
class RowDiff:
    """One row that differs between two stores: only in one of them, or changed."""

    owner: str
    table: str
    id: str
    kind: str  # only_live | only_rebuilt | changed
    fields: tuple[str, ...] = ()


@dataclass
class RebuildReport:
    """What a rebuild did and found (``adamem replay``, ``Memory.replay``).

    ``view`` is the view built (or the live one, for one owner rebuilt in place); ``events`` the
    events folded and ``offsets`` how far, per partition; ``verified`` whether the rebuilt rows equal
    the live ones (``None``: not compared), with their ``checksum`` / ``live_checksum`` and the
    ``diffs``; ``switched`` whether the store now reads the new view; ``processes`` and ``restarts``
    the processes that folded partitions and how many were started again; ``group`` the consumer group
    of the members that folded the view (``streams.replay_group``), if they did.
    """

    view: str
    events: int = 0
    offsets: dict[int, int] = field(default_factory=dict)
    verified: bool | None = None
    checksum: str = ""
    live_checksum: str = ""
    diffs: list[RowDiff] = field(default_factory=list)
    switched: bool = False
    removed_views: list[str] = field(default_factory=list)
    processes: int = 0
    restarts: int = 0
    group: str = ""


Members = Callable[[MemoryStore, FoldPlan, Callable[[int], None]], Awaitable[None]]
"""Folds a plan's partitions up to its ``to`` offsets in other processes, and returns once all have reached them.

Given the new view's writer (to record the job where the members find it), the plan, and a tick
to hear of the log records folded."""


def _canonical(row: Row) -> str:
    return json.dumps(asdict(row), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def rows_checksum(rows: Sequence[Row]) -> str:
    """SHA-256 over the canonical JSON of rows in (table, id) order: equal rows, equal checksum."""
    digest = hashlib.sha256()
    for row in sorted(rows, key=lambda r: (r.TABLE, r.id)):
        digest.update(row.TABLE.encode() + b"\x1f" + _canonical(row).encode() + b"\n")
    return digest.hexdigest()


def _tables(layers: Sequence[str] | None) -> set[str]:
    if not layers:
        return set(TABLES)
    unknown = [layer for layer in layers if layer not in LAYER_TABLES]
    if unknown:
        raise AdaMemError(f"unknown layer(s) {unknown}; use {', '.join(LAYER_TABLES)}")
    return {t for layer in layers for t in LAYER_TABLES[layer]}


def store_rows(store: StoreReader, tables: set[str], owners: Sequence[str] | None = None) -> list[Row]:
    """Every row of the given tables for the given owners (default: all owners)."""
    return [
        r for o in (owners if owners is not None else store.owners()) for r in store.load_owner(o) if r.TABLE in tables
    ]


def diff_stores(
    live: StoreReader, rebuilt: StoreReader, layers: Sequence[str] | None = None, owners: Sequence[str] | None = None
) -> list[RowDiff]:
    """Row-by-row differences between two stores over the chosen layers."""
    tables = _tables(layers)
    who = owners if owners is not None else sorted(set(live.owners()) | set(rebuilt.owners()))
    a = {(r.owner_id, r.TABLE, r.id): r for r in store_rows(live, tables, who)}
    b = {(r.owner_id, r.TABLE, r.id): r for r in store_rows(rebuilt, tables, who)}
    diffs = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            diffs.append(RowDiff(*key, "only_live"))
        elif key not in a:
            diffs.append(RowDiff(*key, "only_rebuilt"))
        elif a[key] != b[key]:
            da, db = asdict(a[key]), asdict(b[key])
            diffs.append(RowDiff(*key, "changed", tuple(k for k in da if da[k] != db[k])))
    return diffs


async def rebuild_view(
    log: EventLog,
    root: str | StoreLocation | ViewCatalog,
    settings: Settings,
    *,
    view: str | None = None,
    until_offset: int | None = None,
    until_time: int | None = None,
    verify: bool = False,
    layers: Sequence[str] | None = None,
    switch: bool = True,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = 1,
    members: Members | None = None,
) -> RebuildReport:
    """Rebuild every layer into a new view; verify against the active view; catch up; switch.

    ``root`` is the store's folder (URL) or its view catalog. ``settings`` are those of the active
    view's generation (``generations.resolve``): its analyses topic is the one folded, and the new
    view records the same generation. ``jobs``: processes folding partitions side by side
    (``streams.replay_jobs``; None: the cores, for a log long enough to gain from them); one, a log
    of one partition, or a log or store held in this process
    (``memory://``, a catalog object) fold here. ``members``: the fold up to the target is left to
    other processes (``streams.replay_group``: a group of members on Kafka), which this one waits
    for; the verification, catch-up and switch that follow are this function's, as without them.
    """
    runner = FoldRunner(log, root, settings, jobs=jobs)
    topic = settings.topic("analyses")
    ends = await log.end_offsets(topic)
    try:
        if members is None:  # the processes import LanceDB while this one does, and opens the store
            await runner.start(ends)
        views = runner.views
        active = views.active_view()
        name = view or _next_view_name(views)
        if name in views.views():
            raise StoreError(f"view {name!r} already exists in {views.url}; pick another name")
        live = views.open_view(active, read_only=True)
        travel = until_offset is not None or until_time is not None
        target = {p: min(end, until_offset) if until_offset is not None else end for p, end in ends.items()}
        if verify and not travel:  # exactly where the live view is, so rows compare one to one
            target = {p: live.checkpoint(p).get(topic, 0) for p in ends}
        rebuilt = views.open_view(name, optimize_every=0, bulk=True)
        rebuilt.bind(len(ends))
        rebuilt.record_generation(live.generation() or generation_record(settings))
        report = RebuildReport(view=name)
        tick = _measured(progress, sum(target.values()))

        def step(records: int, events: int) -> None:
            tick(records)
            report.events += events
            metrics.REPLAY_EVENTS.inc(events)

        fold = FoldPlan(name, tuple(sorted(ends)), to=target, until_time=until_time)
        # A rebuild publishes nothing (``streams.feed.compute_feed`` recomputes its feed), and what it
        # leaves is the tail of the log past a view as of an offset (its forgets only) or the log's end.
        finish = FoldPlan(
            name,
            tuple(sorted(ends)),
            forgets_to=ends if until_offset is not None else None,
            catch_up=not travel,
            optimize=True,
        )
        folded = Folded()
        with collector_paused():
            if members is not None:  # other processes fold to the target; this one waits for them
                await members(rebuilt, fold, tick)
                folded = Folded(len(views.open_view(name, read_only=True).rebuild_job().get("erased", ())))
            elif verify:
                folded = await runner.run(fold, step, sizes=target)
            if verify:
                reader = views.open_view(name, read_only=True)
                tables = _tables(layers)
                report.diffs = diff_stores(live, reader, layers)
                report.live_checksum = rows_checksum(store_rows(live, tables))
                report.checksum = rows_checksum(store_rows(reader, tables))
                report.verified = not report.diffs
            if members is not None or verify:
                folded += await runner.run(finish, step, sizes=target)
            else:
                folded = await runner.run(fold.then(finish), step, sizes=target)
        report.processes, report.restarts = runner.processes, runner.restarts
        if set(folded.offsets) >= set(ends):  # the folds' own checkpoints, without opening every shard again
            report.offsets = {p: folded.offsets[p] for p in sorted(ends)}
        else:
            reader = views.open_view(name, read_only=True)
            report.offsets = {p: reader.checkpoint(p).get(topic, 0) for p in sorted(ends)}
        # A rebuild that verification found different from the live view is kept for inspection, never
        # switched to: which of the two is right is a question for a person (`adamem views switch`).
        if switch and not travel and report.verified is not False:
            views.switch_view(name)
            report.switched = True
            if folded.erased:  # the rebuild folded a forget: the views it replaces may still hold it
                report.removed_views = views.remove_other_views(name)
        return report
    finally:
        await runner.close()


def _measured(progress: Callable[[int], None] | None, total: int) -> Callable[[int], None]:
    """``progress``, also setting ``adamem_replay_progress_ratio`` (records read / the target's; at most 1)."""
    read = [0]
    metrics.REPLAY_PROGRESS.set(0.0 if total else 1.0)

    def tick(n: int) -> None:
        read[0] += n
        metrics.REPLAY_PROGRESS.set(min(1.0, read[0] / total) if total else 1.0)
        if progress is not None:
            progress(n)

    return tick


def _next_view_name(views: ViewCatalog) -> str:
    taken = set(views.views())
    n = 1
    while f"r{n}" in taken:
        n += 1
    return f"r{n}"


async def rebuild_owner(
    log: EventLog,
    store: MemoryStore,
    settings: Settings,
    user: str,
    *,
    layers: Sequence[str] | None = None,
    verify_only: bool = False,
    keys: KeyRingLike | None = None,
    forgets: bool = False,
) -> RebuildReport:
    """Fold one owner's recorded events again; report differences; replace their rows unless ``verify_only``.

    ``user`` is the owner key (``tenant:user_id``); the owner's records are keyed by its bare user id.
    ``forgets``: the rows replaced hold effects of forgotten messages, so the commit owes the shard's
    erasure (``note_forgets``; the caller erases).
    """
    from adamem.owners import partition_key
    from adamem.partitioning import owner_partition

    topic = settings.topic("analyses")
    partitions = log.partitions(topic)
    p = owner_partition(user, partitions)
    upto = store.checkpoint(p).get(topic, 0)
    state = OwnerMemory(user)
    params = owner_parameters(recorded_parameters(store, SEED_DEFAULT), user, SEED_DEFAULT)  # its recorded packs
    count = 0
    ring = keys if keys is not None else keystore_for(log, settings)
    async for rec in log.read(topic, from_offsets={p: 0}, until={p: upto}, key=partition_key(user)):
        try:
            event = decode_event(rec.value, ring)
        except AdaMemError:
            continue
        if isinstance(event, ChatMessage) or event.owner_id != user:
            continue
        apply(state, Positioned(event, rec.topic, rec.partition, rec.offset), params)
        count += 1
    tables = _tables(layers)
    fresh = [r for r in state.rows() if r.TABLE in tables]
    current = [r for r in store.load_owner(user) if r.TABLE in tables]
    report = RebuildReport(view=f"owner:{user}", events=count, offsets={p: upto})
    report.checksum, report.live_checksum = rows_checksum(fresh), rows_checksum(current)
    have = {(r.TABLE, r.id): r for r in current}
    want = {(r.TABLE, r.id): r for r in fresh}
    for key in sorted(set(have) | set(want)):
        if key not in want:
            report.diffs.append(RowDiff(user, key[0], key[1], "only_live"))
        elif key not in have:
            report.diffs.append(RowDiff(user, key[0], key[1], "only_rebuilt"))
        elif have[key] != want[key]:
            report.diffs.append(RowDiff(user, key[0], key[1], "changed"))
    report.verified = not report.diffs
    if not verify_only and report.diffs:
        changes: list[Any] = [Delete(t, i) for (t, i) in have if (t, i) not in want]
        changes += [Upsert(t, r) for (t, _), r in want.items() if have.get((t, r.id)) != r]
        if forgets:
            store.note_forgets(p)
        store.commit(p, changes, {})
        report.switched = True
    return report
