"""What the memory-building subcommands do: project, worker, memory and the demo's memory part."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from adamem.analysis.factory import build_agent
from adamem.cli.rows import row_line
from adamem.errors import ConfigError, NotFound, UnknownOwner
from adamem.events import ms_to_iso
from adamem.retrieval.answer import when_text
from adamem.settings import Settings
from adamem.streams.log import EventLog

__all__ = [
    "print_memory",
    "run_forget",
    "run_forget_verify",
    "run_log_check",
    "run_project",
    "run_provenance",
    "run_query",
    "run_replay",
    "run_serve",
    "run_worker",
]

LAYERS = {
    "working": "messages",
    "episodic": "episodic",
    "persona": "persona",
    "graph": "graph_nodes",
    "archive": "messages",
}


def _hold_writer_lock(log: EventLog, settings: Settings) -> None:
    """Be the embedded log's one writer, or say who is: an ``adamem serve`` names itself in the folder."""
    from adamem.api.notice import serving_url
    from adamem.errors import LogError

    try:
        log.hold_writer_lock()
    except LogError as exc:
        url = serving_url(settings)
        if url is None:
            raise
        raise LogError(f"{exc} (the adamem serve at {url} analyses and projects this folder already)") from exc


async def run_project(settings: Settings, *, follow: bool, quiet: bool = False) -> int:
    """Analyze and project everything pending (``follow``: keep going until interrupted); ``quiet``: no progress."""
    from adamem.progress import Progress
    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_store
    from adamem.streams.factory import open_log
    from adamem.streams.generations import resolve_on_log
    from adamem.streams.pipeline import pending_work, run_pipeline

    log = open_log(settings.log, settings)
    # Before the store is opened for writing: a second projector of the folder (a running
    # `adamem serve`) would be fenced out of the store's shards, even with nothing pending.
    _hold_writer_lock(log, settings)
    store = None
    try:
        store = open_store(settings.store)
        await log.start()  # refuses a damaged log: the writer lock and the store are let go then too
        settings = await resolve_on_log(settings, store, log)
    except BaseException:
        if store is not None:
            store.close()
        await log.stop()  # the writer lock
        raise
    bar = None
    try:
        store.bind(log.partitions(settings.topic("analyses")))
        total = await pending_work(log, store, settings)
        bar = Progress("project", total, unit="step", quiet=quiet, every=settings.progress_seconds)
        stats = await run_pipeline(
            log,
            Projector(store),
            build_agent(settings),
            settings,
            follow=follow,
            agent_factory=build_agent,
            progress=bar.update,
        )
    finally:
        if bar is not None:
            bar.close()
        store.close()
        await log.stop()
    print(
        f"analyzed {stats.analyzed} message(s), forwarded {stats.forwarded} control event(s), "
        f"applied {stats.applied} event(s) to {store.url} ({stats.skipped} already applied, "
        f"{stats.dead_lettered} dead-lettered)"
    )
    return 0


def run_worker(settings: Settings, *, loglevel: str = "info", verbose: bool = False, logfile: str | None = None) -> int:
    """Run the Faust worker against the Kafka log until it is stopped (SIGINT/SIGTERM).

    The worker analyses with the generation of the store's active view; when a reanalysis is
    switched to, it stops gracefully and this process starts again (exec) with the new one. It
    prints a status line to stderr every ``settings.progress_seconds``; Faust's own output goes to
    ``logfile`` (default ``worker-<pid>.log`` here), or to the terminal when ``verbose``.
    """
    if settings.log.kind != "kafka":
        raise ConfigError(f"the worker needs a Kafka log (kafka://host:port), not {settings.log_url!r}")
    import os

    import faust

    from adamem.projections.projector import Projector
    from adamem.projections.store.factory import open_store
    from adamem.streams.generations import resolve_on_log
    from adamem.streams.kafka_log import KafkaLog
    from adamem.streams.worker import create_app

    bootstrap = settings.log.bootstrap

    async def prepared() -> Settings:
        """The topics made (Faust does not create them), and the store's generation resolved on the log."""
        log = KafkaLog(bootstrap, settings)
        await log.ensure_topics()
        await log.start()
        try:
            return await resolve_on_log(settings, open_store(settings.store), log)
        finally:
            await log.stop()

    settings = asyncio.run(prepared())
    app = create_app(
        settings,
        bootstrap,
        lambda: build_agent(settings),
        lambda: Projector(open_store(settings.store)),
        batch=settings.worker_batch,
    )
    from adamem.cli.worker_status import WorkerStatus

    status = WorkerStatus(
        settings,
        app.adamem_counts,  # type: ignore[attr-defined]
        app.adamem_partitions,  # type: ignore[attr-defined]
        KafkaLog(bootstrap, settings),
        open_store(settings.store, read_only=True),
    )

    # Faust points sys.stderr at its log once it runs: the status line keeps the terminal's stderr.
    terminal = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")

    @app.timer(interval=settings.progress_seconds)  # type: ignore[untyped-decorator]
    async def report_status() -> None:
        print(await status.line(), file=terminal, flush=True)

    async def close_status(sender: Any, **kwargs: Any) -> None:
        await status.close()

    app.on_before_shutdown.connect(close_status)  # type: ignore[arg-type]

    logfile = None if verbose else (logfile or f"worker-{os.getpid()}.log")
    if logfile is not None:
        print(
            f"worker: generation {settings.generation} on {settings.log_url}, store {settings.store_url}; "
            f"Faust's log: {os.path.abspath(logfile)} (--verbose shows it here); a status line every "
            f"{settings.progress_seconds:g} s",
            file=sys.stderr,
            flush=True,
        )
    try:
        faust.Worker(app, loglevel=loglevel, quiet=not verbose, logfile=logfile).execute_from_commandline()
    except SystemExit:
        following = getattr(app, "adamem_restart", None)
        if not following:
            raise
    print(f"worker: restarting to follow analysis generation {following}", file=terminal, flush=True)
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return 0  # pragma: no cover (exec does not return)


def print_memory(settings: Settings, user: str, layer: str | None, as_json: bool) -> int:
    """Show an owner's memory: a per-layer summary, or every row of one layer."""
    from adamem.projections.folds.rows import row_json
    from adamem.projections.folds.state import OwnerMemory
    from adamem.projections.folds.summary import owner_summary
    from adamem.projections.store.factory import open_store

    store = open_store(settings.store, read_only=True)
    rows = store.load_owner(user)
    if not rows:
        raise UnknownOwner(user, store.url, store.owners())
    state = OwnerMemory.from_rows(user, rows)
    if layer is not None:
        selected = [
            r for r in state.rows() if LAYERS[layer] == r.TABLE or (layer == "graph" and r.TABLE == "graph_edges")
        ]
        if layer == "working":
            selected = sorted((r for r in selected if r.in_working), key=lambda r: r.working_seq)  # type: ignore[union-attr]
        if as_json:
            print(json.dumps([row_json(r) for r in selected], ensure_ascii=False, indent=1))
        else:
            for r in selected:
                print(row_line(r))
        return 0
    summary = owner_summary(state)
    if as_json:
        print(json.dumps(summary, ensure_ascii=False, indent=1))
        return 0
    print(_summary_text(summary))
    return 0


def _summary_text(s: dict[str, Any]) -> str:
    ep, pe, gr = s["episodic"], s["persona"], s["graph"]
    lines = [
        f"{s['user_id']} (tenant {s['tenant']}): {s['archive']['messages']} message(s) archived, last event "
        f"{ms_to_iso(s['last_event_time']) if s['last_event_time'] >= 0 else '-'}",
        f"  working   {s['working']['size']} message(s) in the FIFO",
        f"  episodic  {sum(ep['active'].values())} active {ep['active']}, {ep['superseded']} superseded",
    ]
    lines += [f"            - {r['type']}: {r['content']}" for r in ep["latest"]]
    lines.append(f"  persona   {pe['traits']} trait(s), {pe['stable']} stable, {pe['disputed']} disputed")
    lines += [
        f"            - {t['key']}={t['value']} (strength {t['strength']:.2f}, {t['mentions']} mention(s)"
        f"{', stable' if t['stable'] else ''})"
        for t in pe["strongest"]
    ]
    lines.append(f"  graph     nodes {gr['nodes']}, edges {gr['edges']}")
    if gr["top_topics"]:
        lines.append(
            "            top topics: " + ", ".join(f"{t['topic']} ({t['mentions']})" for t in gr["top_topics"])
        )
    return "\n".join(lines)


async def run_replay(
    settings: Settings,
    *,
    layers: list[str] | None,
    user: str | None,
    until: str | None,
    verify: bool,
    view: str | None,
    switch: bool,
    quiet: bool = False,
    jobs: int | None = 1,
    group: bool = False,
) -> int:
    """Rebuild memory from the recorded analyses (see ``streams.replay``); 1 when verification found diffs.

    ``group``: the fold is shared by ``adamem worker --rebuild VIEW`` members (``streams.replay_group``).
    """
    from adamem.ingest import parse_time
    from adamem.progress import Progress
    from adamem.projections.store.base import store_folder
    from adamem.projections.store.factory import open_views
    from adamem.streams.factory import open_log
    from adamem.streams.generations import resolve
    from adamem.streams.replay import rebuild_owner, rebuild_view

    until_offset = until_time = None
    if until is not None:
        if until.isdigit():
            until_offset = int(until)
        else:
            try:
                until_time = parse_time(until)
            except ValueError as exc:
                raise ConfigError(f"--until {until!r}: {exc}; or give a log offset (a whole number)") from exc
    root = store_folder(settings.store_url)
    settings = resolve(settings, open_views(root).open_view(read_only=True))  # the active view's generation
    log = open_log(settings.log, settings)
    await log.start()
    bar = None
    try:
        if user is not None:
            store = open_views(root).open_view()
            report = await rebuild_owner(log, store, settings, user, layers=layers, verify_only=verify)
        else:
            total = sum((await log.end_offsets(settings.topic("analyses"))).values())
            bar = Progress("replay", total, unit="ev", quiet=quiet, every=settings.progress_seconds)
            options: dict[str, Any] = {
                "view": view,
                "until_offset": until_offset,
                "until_time": until_time,
                "verify": verify,
                "layers": layers,
                "switch": switch,
                "progress": bar.update if bar else None,
            }
            if group:
                from adamem.streams.replay_group import rebuild_in_group

                def announce(line: str) -> None:  # members need the view's name now
                    print(line, flush=True)

                report = await rebuild_in_group(log, root, settings, announce=announce, **options)
            else:
                report = await rebuild_view(log, root, settings, jobs=jobs, **options)
    finally:
        if bar is not None:
            bar.close()
        await log.stop()
    by = f" by {report.processes} processes" if report.processes > 1 else ""
    by = f" here after the members of {report.group} folded to the targets" if report.group else by
    print(f"rebuilt {report.view}: {report.events} event(s) folded{by}, offsets {report.offsets}")
    if report.restarts:
        print(f"{report.restarts} fold process(es) died and went on from their checkpoints")
    if report.verified is not None:
        verdict = "equal to the live view" if report.verified else f"{len(report.diffs)} row(s) differ"
        print(f"verify: {verdict}; checksum rebuilt {report.checksum[:16]} live {report.live_checksum[:16]}")
        for d in report.diffs[:50]:
            extra = f" fields {', '.join(d.fields)}" if d.fields else ""
            print(f"  {d.kind:12} {d.owner} {d.table} {d.id}{extra}")
        if len(report.diffs) > 50:
            print(f"  ... and {len(report.diffs) - 50} more")
    if report.switched:
        print(f"switched: queries now read {report.view}" if user is None else f"replaced {user}'s rows")
    elif user is None:
        why = "verification found differences; " if report.verified is False else ""
        print(f"not switched; {why}inspect the view {report.view}, switch with: adamem views switch {report.view}")
    return 0 if report.verified in (None, True) else 1


async def run_reanalyze(
    settings: Settings,
    *,
    extractor: str | None,
    embedder: str | None,
    view: str | None,
    switch: bool,
    packs: str | None = None,
    quiet: bool = False,
    jobs: int = 1,
    group: bool = False,
) -> int:
    """Write a new analysis generation, project it into a new view, print what changed per layer.

    ``group``: members (``adamem worker --reanalyze VIEW``) analyse; the line naming the view is printed first.
    """
    from adamem.progress import Progress
    from adamem.projections.store.base import store_folder
    from adamem.streams.factory import open_log
    from adamem.streams.reanalyze import reanalyze

    if extractor is None and embedder is None and packs is None:
        raise ConfigError("say what to analyse with: --extractor NAME, --embedder NAME and/or --packs SPEC")
    root = store_folder(settings.store_url)
    log = open_log(settings.log, settings)
    await log.start()
    try:  # every message and control event is analysed again: the total is their end offsets
        ends = [await log.end_offsets(settings.topic(kind)) for kind in ("messages", "control")]
    finally:
        await log.stop()
    bar = Progress(
        "reanalyze", sum(sum(e.values()) for e in ends), unit="ev", quiet=quiet, every=settings.progress_seconds
    )
    try:
        report = await reanalyze(
            settings,
            root,
            extractor=extractor,
            embedder=embedder,
            packs=packs,
            view=view,
            switch=switch,
            progress=bar.update if bar else None,
            jobs=jobs,
            group=group,
            announce=lambda line: print(line, flush=True),
        )
    finally:
        if bar is not None:
            bar.close()
    from adamem.streams.generations import analyzer_summary

    analyzer = analyzer_summary(report.analyzer)
    if report.group:
        print(
            f"generation {report.generation} ({analyzer}) on {report.analyzer['topic']}: members accounted for "
            f"{report.accounted} input record(s); {report.stats.applied} folded into view {report.view}"
        )
    else:
        print(
            f"generation {report.generation} ({analyzer}) on {report.analyzer['topic']}: analysed "
            f"{report.stats.analyzed} message(s), forwarded {report.stats.forwarded} control event(s), "
            f"{report.stats.dead_lettered} dead-lettered; projected into view {report.view}"
        )
    print(f"changes against the active view {report.previous_view} ({report.previous_generation}):")
    print(f"  {'layer':10} {'added':>8} {'removed':>8} {'altered':>8} {'unchanged':>10}")
    for layer, c in report.layers.items():
        print(f"  {layer:10} {c.added:>8} {c.removed:>8} {c.altered:>8} {c.unchanged:>10}")
    for layer, c in report.layers.items():
        for kind, owner, table, text in c.examples:
            print(f"  {kind:8} {layer:9} {owner:12} {table:12} {text}")
    if report.switched:
        print(f"switched: queries and the write path now use {report.view} ({report.generation})")
    else:
        print(f"not switched; queries still read {report.previous_view}; switch: adamem views switch {report.view}")
    return 0


async def run_views(settings: Settings, *, switch: str | None) -> int:
    """List the store's views with their generation and progress, or switch to one (after catching it up)."""
    from adamem.projections.store.base import store_folder
    from adamem.projections.store.factory import open_views
    from adamem.streams.generations import analyzer_summary
    from adamem.streams.reanalyze import switch_to

    root = store_folder(settings.store_url)
    if switch is not None:
        stats = await switch_to(settings, root, switch)
        print(
            f"caught {switch} up (analysed {stats.analyzed}, applied {stats.applied} event(s)); "
            f"switched: queries and the write path now use {switch}"
        )
        return 0
    active = open_views(root).active_view()
    names = open_views(root).views()
    if not names:
        print(f"{root} has no views yet")
        return 0
    for name in names:
        store = open_views(root).open_view(name, read_only=True)
        record = store.generation()
        topic = record.get("topic", settings.topic("analyses"))
        reached = sum(store.checkpoint(p).get(topic, 0) for p in range(store.partition_count()))
        analyzer = analyzer_summary(record) or "not recorded"
        mark = "*" if name == active else " "
        print(f"{mark} {name:12} {record.get('name', 'g1'):4} {analyzer:40} {reached} analyses folded")
    return 0


async def run_forget(
    settings: Settings,
    user: str,
    *,
    tenant: str,
    item: str | None,
    message: str | None,
    everything: bool,
    reason: str,
) -> int:
    """Publish a MemoryForgotten control event for an item, a message, or the whole owner ``(tenant, user)``.

    A message or owner forget then destroys the keys it names in the log's keystore: from that
    moment no copy of the message (or of any of the owner's messages) on the log can be read.
    """
    import time

    from adamem.cli.remote import serving_url
    from adamem.core import forget_event
    from adamem.errors import InvalidArgument
    from adamem.schemas.serde import encode_event
    from adamem.streams.factory import open_log
    from adamem.streams.keys import destroy_keys, keystore_for
    from adamem.streams.log import OutgoingRecord

    try:
        event = forget_event(
            user,
            tenant,
            item=item,
            message=message,
            everything=everything,
            reason=reason,
            at_ms=int(time.time() * 1000),
        )
    except InvalidArgument:
        raise ConfigError("say exactly one of --item ID, --message ID or --all") from None
    scope = event.scope
    url = serving_url(settings)  # the folder's one writer is a running `adamem serve`: forget through it
    if url is not None:
        return await _forget_through(url, settings, user, tenant, item, message, everything, reason)
    log = open_log(settings.log, settings)
    await log.start()
    try:
        if message is not None or everything:
            _check_forget_target(await _owner_messages(log, settings, tenant, user), message, user, tenant, log.url)
        [(p, off)] = await log.append(settings.topic("control"), [OutgoingRecord(user, encode_event(event))])
        keys = keystore_for(log, settings)
        destroyed = destroy_keys(keys, event)  # after the event is on the log: the projection destroys them too
    finally:
        await log.stop()
    print(
        f"published MemoryForgotten({scope}) {event.event_id} for {user} of tenant {tenant}"
        f" at {settings.topic('control')} p{p}:{off}"
    )
    if scope == "item":
        print("an item forget erases the item from the store; its messages stay readable on the log (forget them)")
    else:
        what = "key was" if scope == "message" else "keys were"
        state = "destroyed" if destroyed else "not there (already destroyed, or never made)"
        print(f"the {what} {state} in {getattr(keys, 'root', 'the keystore')}: the log's copies cannot be read")
    print(_until_projected(settings))
    return 0


def _until_projected(settings: Settings) -> str:
    """What a forget leaves to do: the store answers as before until a projection applies the control event."""
    project = f"adamem project --log {settings.log_url} --store {settings.store_url}"
    if settings.log.kind == "kafka":
        return (
            f"the store answers as before until the workers (`adamem worker`) apply this event; with none running: "
            f"`{project}`"
        )
    return f"the store answers as before until this event is projected: run `{project}`"


async def _owner_messages(log: Any, settings: Settings, tenant: str, user: str) -> dict[str, str]:
    """The owner's messages on the log: event id -> message id (the partition key is the bare user id)."""
    from adamem.streams.publish import read_as_json

    found: dict[str, str] = {}
    async for row in read_as_json(log, settings.topic("messages"), user=user):
        event = row.get("event") or {}
        if event.get("user_id") == user and event.get("tenant", settings.default_tenant) == tenant:
            found[str(event.get("event_id"))] = str(event.get("message_id") or "")
    return found


def _check_forget_target(messages: dict[str, str], message: str | None, user: str, tenant: str, url: str) -> None:
    """Refuse a forget that names nothing of the owner's: an unknown message id, or an owner with no messages."""
    owner = f"user {user!r} of tenant {tenant!r}"
    if not messages:
        raise NotFound(
            f"{owner} has no messages on {url}; nothing to forget. Check the user id and --tenant "
            f"(`adamem log dump --log {url} --user {user}` lists what the log holds)"
        )
    if message is None or message in messages:
        return
    by_message_id = [event_id for event_id, message_id in messages.items() if message_id == message]
    if by_message_id:
        raise NotFound(
            f"{message!r} is the message_id of {owner}'s message {by_message_id[0]}; --message takes its event id: "
            f"--message {by_message_id[0]}"
        )
    raise NotFound(
        f"no message with event id {message!r} of {owner} on {url} (it has {len(messages)} message(s)); "
        f"nothing was published. `adamem log dump --log {url} --user {user}` shows their event ids"
    )


async def _forget_through(
    url: str,
    settings: Settings,
    user: str,
    tenant: str,
    item: str | None,
    message: str | None,
    everything: bool,
    reason: str,
) -> int:
    """``adamem forget`` on a folder a running ``adamem serve`` writes: through its forget endpoint, at once."""
    from adamem.api.client import AsyncMemoryClient
    from adamem.cli.remote import service_key

    print(f"adamem forget: an adamem serve writes {settings.log_url}; forgetting through it at {url}", file=sys.stderr)
    async with AsyncMemoryClient(url, service_key(settings, tenant), tenant=tenant) as client:
        done = await client.forget(user, item=item, message=message, everything=everything, reason=reason)
    where = ", ".join(f"p{p['partition']}:{p['offset']}" for p in done["positions"])
    print(
        f"published MemoryForgotten({done['scope']}) {done['event_id']} for {user} of tenant {tenant} at "
        f"{settings.topic('control')} {where}; memory no longer holds it (the serve projected it)"
    )
    return 0


async def run_forget_verify(settings: Settings, texts: list[str]) -> int:
    """``adamem forget --verify``: every place in the store, the log and the keystore a text remains; 1 if any.

    An embedded log is searched file by file; a Kafka log record by record, every topic of the
    deployment, read from the broker. Sealed events are opened with the keystore.
    """
    from pathlib import Path

    from adamem.projections.store.base import store_folder
    from adamem.streams.erasure import Trace, find_text, find_text_in_log
    from adamem.streams.factory import open_log
    from adamem.streams.keys import Keystore, keystore_path

    if not texts:
        raise ConfigError("say what to look for: --verify --text TEXT (repeatable)")
    url = settings.log_url
    kafka = settings.log.kind == "kafka"
    if settings.log.kind == "memory":
        raise ConfigError(f"`adamem forget --verify` searches an embedded log (a folder) or kafka://, not {url!r}")
    log_root = settings.log.folder
    store_root = Path(store_folder(settings.store_url))
    keys_root = keystore_path(settings.log, settings)
    keys = Keystore(keys_root, fsync=False) if keys_root is not None else None
    roots = [r for r in (log_root, store_root, keys_root) if r is not None and r.is_dir()]
    if not roots and not kafka:
        raise ConfigError(f"none of the log {log_root}, the store {store_root}, the keystore {keys_root} exists")
    log = open_log(settings.log, settings) if kafka else None
    if log is not None:
        await log.start()
    found = 0
    try:
        for text in texts:
            traces: list[Trace] = []
            if log is not None:
                traces += await find_text_in_log(log, settings, text, keys)
            traces += find_text(
                text,
                log_root=log_root if log_root in roots else None,
                store_root=store_root if store_root in roots else None,
                keys_root=keys_root if keys_root in roots else None,
                keys=keys,
            )
            found += len(traces)
            searched = " and ".join([*([url] if kafka else []), *(str(r) for r in roots)])
            if not traces:
                print(f"{text!r}: found nowhere in {searched} (every file and record, decoded, opened and raw)")
                continue
            print(f"{text!r}: remains in {len(traces)} place(s):")
            for trace in traces:
                print(f"  {'MAY REMAIN' if trace.unverifiable else 'FOUND'} {trace}")
    finally:
        if log is not None:
            await log.stop()
    return 1 if found else 0


def run_log_check(settings: Settings, *, repair: bool, upgrade: bool = False) -> int:
    """``adamem log check|repair``: report damage of the embedded log (and repair it); 1 when damage remains."""

    from adamem.streams.log_repair import check_log, repair_log

    url = settings.log_url
    if settings.log.folder is None:
        raise ConfigError(
            f"`adamem log check|repair` are for the embedded log (a folder), not {url!r}; "
            "Kafka checks its own record batches (CRC-32C)"
        )
    root = settings.log.folder
    if not root.is_dir():
        raise NotFound(f"no embedded log at {root}: the folder does not exist. Check --log (or $ADAMEM_LOG)")
    if repair:
        report = repair_log(root, store=settings.store_url, upgrade=upgrade, fsync=True)
    else:
        report = check_log(root, store=settings.store_url)
    print(f"{'repaired' if repair else 'checked'} the embedded log at {root}")
    print(f"  compared with {'; '.join(report.compared)}")
    if len(report.compared) == 1:
        print(f"  (no store at {settings.store_url}; give --store to compare with its checkpoints)")
    for part in report.partitions:
        status = ("repaired" if part.actions else "ok") if repair else ("DAMAGED" if part.problems else "ok")
        gaps = f", {len(part.gaps)} gap(s)" if part.gaps else ""
        kind = "checksummed" if part.checked else (f"codec {part.codec}, no checksums" if part.codec else "no file")
        print(f"{status:8} {part.name}: {part.records} record(s), next offset {part.end_offset}{gaps} ({kind})")
        for text in part.problems:
            print(f"         {'was' if repair else 'damage'}: {text}")
        for text in part.notes:
            print(f"         note: {text}")
        for text in part.actions:
            print(f"         repair: {text}")
    if repair:
        after = check_log(root, store=settings.store_url)
        if after.damaged:
            names = ", ".join(p.name for p in after.damaged)
            print(f"still damaged: {names}; restore those files from a copy", file=sys.stderr)
            return 1
        done = sum(1 for p in report.partitions if p.actions)
        print(f"{done} partition(s) repaired; every partition verifies now")
        return 0
    if report.damaged:
        print(
            f"{len(report.damaged)} partition(s) damaged; the log refuses them until repaired. "
            f"`adamem log repair --log {root}` sets the damaged bytes aside in <topic>/{'damaged'}/, keeps "
            "every record that still verifies and never gives an offset out twice (or restore the files from a copy).",
            file=sys.stderr,
        )
        return 1
    print(f"{len(report.partitions)} partition(s), all verified")
    return 0


def build_retriever(settings: Settings) -> Any:
    """A Retriever over the configured store (read-only) with the embedder of its analysis generation."""
    from adamem.core import open_retriever

    return open_retriever(settings)


def run_query(
    settings: Settings,
    user: str,
    question: str,
    *,
    tenant: str,
    top_k: int,
    as_of: str | None,
    as_json: bool,
    url: str | None,
) -> int:
    """Ask a question about ``tenant``'s user in-process (or of a running service with ``url``); print the evidence."""
    from adamem.ingest import parse_time
    from adamem.owners import owner_key

    if url is not None:
        from adamem.api.client import MemoryClient
        from adamem.cli.remote import service_key

        with MemoryClient(url, service_key(settings, tenant), tenant=tenant) as client:
            answer = client.query(user, question, top_k, as_of)
    else:
        retriever = build_retriever(settings)
        try:
            point = None if as_of is None else (int(as_of) if as_of.isdigit() else parse_time(as_of))
            answer = retriever.query(owner_key(tenant, user), question, top_k, point).to_dict()
        finally:
            retriever.close()
    if as_json:
        print(json.dumps(answer, ensure_ascii=False, indent=1))
        return 0
    route = answer["route"]
    print(f"route: {route.get('route')} ({route.get('reason', '')}); whose: {whose_text(answer['whose'])}")
    for notice in answer.get("notices", []):
        print(f"notice: {notice}")
    items = answer["items"]
    if any(item.get("ordered_by") for item in items):
        print("ranked by score, except items a rule moved (the rule is shown after them)")
    for item in items:
        when = when_text(item.get("occurred_at", -1), item.get("event_time", -1), item.get("utc_offset_minutes"))
        rule = f"  [moved: {item['ordered_by']}]" if item.get("ordered_by") else ""
        print(
            f"{item['rank']:2}. [{item['layer']}/{item['kind']}] {item['score']:.3f} {when} "
            f"{item['content'][:140]}{rule}"
        )
    if not items:
        print("no items")
    print(f"timing (ms): {answer['timing_ms']}")
    return 0


WHOSE = {
    "user": "the user's own",
    "assistant": "the other party's",
    "both": "both sides'",
    "ambiguous": "either side's (unclear: both kept)",
}


def whose_text(whose: dict[str, Any]) -> str:
    """Whose memory a question was about, in words (never empty): subject, named speakers, why."""
    subject = str(whose.get("subject") or "")
    text = f"{WHOSE.get(subject, subject or 'anyone')} memory"
    speakers = whose.get("speakers") or []
    if speakers:
        text += f" (speakers {', '.join(map(str, speakers))})"
    if whose.get("restrict"):
        text += ", only that side"
    reason = whose.get("reason") or "no cue in the question"
    return f"{text}; {reason}"


def run_serve(
    settings: Settings, *, with_log: bool, read_only: bool = False, access_log: bool = True, workers: int = 1
) -> int:
    """Serve the HTTP API (uvicorn) until interrupted.

    On an embedded log (a folder) the service is the embedded default's one process: it holds the
    log's writer lock and analyses and projects in-process (mode ``embedded``). On a ``kafka://``
    log, or with ``read_only``, it only reads the store (mode ``read-only``); ``with_log`` then
    says whether it opens the log at all (to publish and to measure lag).

    ``workers`` > 1: that many read-only query processes on the port. Each is a replica with its own
    caches over the same store; they follow the store's commits by its change tokens
    (``retrieval/cache.py``), so none answers from memory older than the last commit it could see.
    Worker processes rebuild the service from the environment (``service_app``).
    """
    import os

    import uvicorn

    from adamem.api.app import create_app
    from adamem.streams.embedded_log import EmbeddedLog
    from adamem.streams.factory import open_log
    from adamem.streams.follow import Follower

    embedded = not read_only and settings.log.projected_here
    base = f"http://{settings.host}:{settings.port}"
    if workers > 1:
        if embedded:
            raise ConfigError(
                f"--workers {workers}: several query processes only read the store, and the embedded log has one "
                "writer; add --read-only (another process projects: `adamem project --follow`) or use a kafka:// log"
            )
        os.environ.update(
            {
                "ADAMEM_STORE": settings.store_url,
                "ADAMEM_LOG": settings.log_url,
                "ADAMEM_API_KEYS": settings.api_keys,
                _SERVE_WITH_LOG: "1" if with_log else "",
            }
        )
        print(
            f"adamem serve: listening on {base} (OpenAPI at {base}/docs)\n"
            f"  mode  read-only: reads the store, {workers} query processes\n  store {settings.store_url}\n"
            f"  log   {settings.log_url if with_log else '-'}",
            file=sys.stderr,
            flush=True,
        )
        from adamem.cli.replicas import run_replicas

        run_replicas(
            "adamem.cli.commands:service_app",
            host=settings.host,
            port=settings.port,
            workers=workers,
            access_log=access_log,
        )
        return 0
    log = open_log(settings.log, settings) if (with_log or embedded) else None
    writer = Follower(log, settings, build_agent) if embedded and log is not None else None
    app = create_app(settings, build_retriever(settings), log, api_keys=settings.api_keys, writer=writer)
    if writer is not None and log is not None:  # after the keys' check: a bad key creates nothing
        log.hold_writer_lock()  # refused here, naming the folder, when another process writes to it
    if writer is not None:
        mode = "embedded: ingests, analyses and projects in this process"
    elif log is not None:
        mode = "read-only: reads the store; other processes project the log"
    else:
        mode = "read-only: reads the store; no log (cannot publish)"
    print(
        f"adamem serve: listening on {base} (OpenAPI at {base}/docs)\n"
        f"  mode  {mode}\n  store {settings.store_url}\n  log   {log.url if log is not None else '-'}",
        file=sys.stderr,
        flush=True,
    )
    from adamem.cli.remote import ServiceNotice
    from adamem.cli.replicas import log_config

    # On the folder it writes, the service says where it listens: `adamem add` there goes through it.
    notice = ServiceNotice(log.root) if writer is not None and isinstance(log, EmbeddedLog) else None
    try:
        uvicorn.run(
            app if notice is None else notice.around(app, settings.host, settings.port),
            host=settings.host,
            port=settings.port,
            log_level="info",
            access_log=access_log,
            log_config=log_config(),
        )
    finally:
        if notice is not None:
            notice.remove()
    return 0


_SERVE_WITH_LOG = "ADAMEM_SERVE_WITH_LOG"  # set by ``run_serve`` for its worker processes only


def service_app() -> Any:
    """The read-only query service of one ``adamem serve --workers N`` process (uvicorn's app factory)."""
    import os

    from adamem.api.app import create_app
    from adamem.streams.factory import open_log

    settings = Settings.from_env()
    log = open_log(settings.log, settings) if os.environ.get(_SERVE_WITH_LOG) else None
    return create_app(settings, build_retriever(settings), log, api_keys=settings.api_keys)


async def run_provenance(settings: Settings, user: str, item: str, *, as_json: bool) -> int:
    """Walk from a memory item back to the analyses and messages that made it (the CLI twin of the API)."""
    from adamem.api.provenance import trace
    from adamem.streams.factory import open_log

    retriever = build_retriever(settings)
    log = open_log(settings.log, settings)
    await log.start()
    try:
        out = await trace(retriever, log, settings, user, item)
    finally:
        await log.stop()
        retriever.close()
    if as_json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    print(f"{out['kind']} {item}: {out['content']}")
    for m in out["messages"]:
        a = m["analysis"]
        pos = a.get("message_position", {})
        print(f"  <- [{ms_to_iso(m['occurred_at'], m.get('utc_offset_minutes'))}] {m['speaker']}: {m['text']}")
        print(
            f"     message {m['message_id']} ({m['conversation_id']}) at {pos.get('topic', '?')} "
            f"p{pos.get('partition', '?')}:{pos.get('offset', '?')}; analysis {a.get('event_id', '')[:8]} by "
            f"{a.get('analyzer', '')} at {a['topic']} p{a['partition']}:{a['offset']}"
        )
    if out["origin_event_id"]:
        print(f"  <- control event {out['origin_event_id']}")
    return 0
