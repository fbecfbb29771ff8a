"""What the memory-building subcommands do: project, worker, memory and the demo's memory part."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from typing import Any

from adamem.errors import ConfigError
from adamem.events import ms_to_iso
from adamem.runtime import build_agent
from adamem.settings import Settings

__all__ = [
    "print_memory",
    "run_forget",
    "run_project",
    "run_provenance",
    "run_query",
    "run_replay",
    "run_serve",
    "run_worker",
]

LAYERS = {"working": "messages", "episodic": "episodic", "persona": "persona", "graph": "graph_nodes"}


async def run_project(settings: Settings, *, follow: bool, quiet: bool = False) -> int:
    """Analyze and project everything pending (``follow``: keep going until interrupted)."""
    from projections.projector import Projector
    from projections.store import open_store
    from streams.log import open_log
    from streams.pipeline import run_pipeline

    log = open_log(settings.log_url, settings)
    await log.start()
    store = open_store(settings.store_url)
    try:
        stats = await run_pipeline(log, Projector(store), build_agent(settings), settings, follow=follow)
    finally:
        store.close()
        await log.stop()
    if not quiet:
        print(
            f"analyzed {stats.analyzed} message(s), forwarded {stats.forwarded} control event(s), "
            f"applied {stats.applied} event(s) to {store.url} ({stats.skipped} already applied, "
            f"{stats.dead_lettered} dead-lettered)"
        )
    return 0


def run_worker(settings: Settings, *, loglevel: str = "info") -> int:
    """Run the Faust worker against the Kafka log until it is stopped (SIGINT/SIGTERM)."""
    if not settings.log_url.startswith("kafka://"):
        raise ConfigError(f"the worker needs a Kafka log (kafka://host:port), not {settings.log_url!r}")
    import faust

    from projections.projector import Projector
    from projections.store import open_store
    from streams.kafka_log import KafkaLog
    from streams.worker import create_app

    bootstrap = settings.log_url.removeprefix("kafka://").rstrip("/")
    asyncio.run(KafkaLog(bootstrap, settings).ensure_topics())  # Faust does not create them
    app = create_app(
        settings,
        bootstrap,
        lambda: build_agent(settings),
        lambda: Projector(open_store(settings.store_url)),
        batch=settings.worker_batch,
    )
    faust.Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
    return 0


def _row_json(row: Any) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data.pop("vector", None)
    data.pop("extraction_json", None)
    return data


def print_memory(settings: Settings, user: str, layer: str | None, as_json: bool) -> int:
    """Show an owner's memory: a per-layer summary, or every row of one layer."""
    from projections.folds.state import OwnerMemory
    from projections.folds.summary import owner_summary
    from projections.store import open_store

    store = open_store(settings.store_url, read_only=True)
    rows = store.load_owner(user)
    if not rows:
        print(
            f"adamem: no memory for {user!r} in {store.url}; known owners: {', '.join(store.owners()) or 'none'}",
            file=sys.stderr,
        )
        return 3
    state = OwnerMemory.from_rows(user, rows)
    if layer is not None:
        selected = [
            r for r in state.rows() if LAYERS[layer] == r.TABLE or (layer == "graph" and r.TABLE == "graph_edges")
        ]
        if layer == "working":
            selected = sorted((r for r in selected if r.in_working), key=lambda r: r.working_seq)  # type: ignore[union-attr]
        if as_json:
            print(json.dumps([{"table": r.TABLE, **_row_json(r)} for r in selected], ensure_ascii=False, indent=1))
        else:
            for r in selected:
                print(_row_line(r))
        return 0
    summary = owner_summary(state)
    if as_json:
        print(json.dumps(summary, ensure_ascii=False, indent=1))
        return 0
    print(_summary_text(summary))
    return 0


def _row_line(row: Any) -> str:
    table = row.TABLE
    if table == "messages":
        return f"[{ms_to_iso(row.occurred_at)}] {row.speaker}: {row.text}"
    if table == "episodic":
        valid = "" if row.status == "active" else f" (superseded at {ms_to_iso(row.valid_to)})"
        return f"{row.type:9} {row.confidence:.2f} {row.content}{valid}"
    if table == "persona":
        flags = ", ".join(f for f, on in (("stable", row.stable), ("disputed", row.disputed)) if on)
        return (
            f"{row.kind:18} {row.key}={row.value} strength {row.strength:.2f}, {row.mention_count} mention(s) {flags}"
        )
    if table == "graph_nodes":
        return f"node {row.node_type:9} {row.label[:80]}"
    return f"edge {row.edge_type:15} {row.weight:.2f} {row.src[:8]}→{row.dst[:8]} ({row.direction})"


def _summary_text(s: dict[str, Any]) -> str:
    ep, pe, gr = s["episodic"], s["persona"], s["graph"]
    lines = [
        f"{s['user_id']}: {s['archive']['messages']} message(s) archived, last event "
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
) -> int:
    """Rebuild memory from the recorded analyses (see ``streams.replay``); 1 when verification found diffs."""
    from adamem.ingest import parse_time
    from projections.store.lance import LanceStore
    from streams.log import open_log
    from streams.replay import rebuild_owner, rebuild_view

    until_offset = until_time = None
    if until is not None:
        if until.isdigit():
            until_offset = int(until)
        else:
            try:
                until_time = parse_time(until)
            except ValueError as exc:
                raise ConfigError(f"--until {until!r}: {exc}; or give a log offset (a whole number)") from exc
    log = open_log(settings.log_url, settings)
    await log.start()
    bar = None
    try:
        if user is not None:
            store = LanceStore(settings.store_url)
            report = await rebuild_owner(log, store, settings, user, layers=layers, verify_only=verify)
        else:
            total = sum((await log.end_offsets(settings.topic("analyses"))).values())
            if not quiet and sys.stderr.isatty():
                from tqdm import tqdm

                bar = tqdm(total=total, unit="ev", desc="replaying", file=sys.stderr)
            report = await rebuild_view(
                log,
                settings.store_url,
                settings,
                view=view,
                until_offset=until_offset,
                until_time=until_time,
                verify=verify,
                layers=layers,
                switch=switch,
                progress=bar.update if bar else None,
            )
    finally:
        if bar is not None:
            bar.close()
        await log.stop()
    print(f"rebuilt {report.view}: {report.events} event(s) folded, offsets {report.offsets}")
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
        print(f"not switched; inspect with --view {report.view}")
    return 0 if report.verified in (None, True) else 1


async def run_forget(
    settings: Settings, user: str, *, item: str | None, message: str | None, everything: bool, reason: str
) -> int:
    """Publish a MemoryForgotten control event for an item, a message, or the whole owner."""
    import time
    import uuid

    from adamem.events import MemoryForgotten
    from adamem.serde import encode_event
    from streams.log import OutgoingRecord, open_log

    chosen = [x for x in (item, message) if x is not None]
    if len(chosen) + int(everything) != 1:
        raise ConfigError("say exactly one of --item ID, --message ID or --all")
    scope = "user" if everything else ("item" if item is not None else "message")
    event = MemoryForgotten(
        event_id=str(uuid.uuid4()),
        user_id=user,
        scope=scope,  # type: ignore[arg-type]
        occurred_at=int(time.time() * 1000),
        target_id=item or message,
        reason=reason,
        tenant=settings.default_tenant,
    )
    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        [(p, off)] = await log.append(settings.topic("control"), [OutgoingRecord(user, encode_event(event))])
    finally:
        await log.stop()
    print(f"published MemoryForgotten({scope}) {event.event_id} for {user} at {settings.topic('control')} p{p}:{off}")
    return 0


def build_retriever(settings: Settings) -> Any:
    """A Retriever over the configured store (read-only) with the configured embedder."""
    from adamem.runtime import build_embedder
    from projections.store import open_store
    from retrieval.service import Retriever

    return Retriever(open_store(settings.store_url, read_only=True), build_embedder(settings))


def run_query(
    settings: Settings, user: str, question: str, *, top_k: int, as_of: str | None, as_json: bool, url: str | None
) -> int:
    """Ask a question in-process (or of a running service with ``url``) and print the evidence."""
    from adamem.ingest import parse_time

    if url is not None:
        from adamem.client import MemoryClient

        with MemoryClient(url, settings.api_keys.partition(":")[2].split(",")[0] or None) as client:
            answer = client.query(user, question, top_k, as_of)
    else:
        retriever = build_retriever(settings)
        try:
            point = None if as_of is None else (int(as_of) if as_of.isdigit() else parse_time(as_of))
            answer = retriever.query(user, question, top_k, point).to_dict()
        finally:
            retriever.close()
    if as_json:
        print(json.dumps(answer, ensure_ascii=False, indent=1))
        return 0
    route = answer["route"]
    print(f"route: {route.get('route')} ({route.get('reason', '')}); whose: {answer['whose'].get('target', '')}")
    for item in answer["items"]:
        when = ms_to_iso(item["occurred_at"]) if item.get("occurred_at", -1) >= 0 else ""
        print(f"{item['rank']:2}. [{item['layer']}/{item['kind']}] {item['score']:.3f} {when} {item['content'][:140]}")
    print(f"timing (ms): {answer['timing_ms']}")
    return 0


def run_serve(settings: Settings, *, with_log: bool) -> int:
    """Serve the HTTP API (uvicorn) until interrupted."""
    import uvicorn

    from api.app import create_app
    from streams.log import open_log

    log = open_log(settings.log_url, settings) if with_log else None
    app = create_app(settings, build_retriever(settings), log, api_keys=settings.api_keys)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
    return 0


async def run_provenance(settings: Settings, user: str, item: str, *, as_json: bool) -> int:
    """Walk from a memory item back to the analyses and messages that made it (the CLI twin of the API)."""
    from api.provenance import trace
    from streams.log import open_log

    retriever = build_retriever(settings)
    log = open_log(settings.log_url, settings)
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
        print(f"  <- [{ms_to_iso(m['occurred_at'])}] {m['speaker']}: {m['text']}")
        print(
            f"     message {m['message_id']} ({m['conversation_id']}) at {pos.get('topic', '?')} "
            f"p{pos.get('partition', '?')}:{pos.get('offset', '?')}; analysis {a.get('event_id', '')[:8]} by "
            f"{a.get('analyzer', '')} at {a['topic']} p{a['partition']}:{a['offset']}"
        )
    if out["origin_event_id"]:
        print(f"  <- control event {out['origin_event_id']}")
    return 0
