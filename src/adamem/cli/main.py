"""The ``adamem`` command line: publish, read the log, and run the embedded demo."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from importlib import resources

from adamem import __version__
from adamem.cli.errors import (
    EXIT_HELP,
    INTERRUPTED,
    OUTPUT_CLOSED,
    exit_code,
    require_free_port,
    require_log,
    require_store,
)
from adamem.errors import AdaMemError, ConfigError, InputError
from adamem.ingest import load_messages, read_input
from adamem.progress import Progress
from adamem.settings import Settings

__all__ = ["main"]

QUESTION_MAX = 2000  # characters, as the API's QueryBody allows
LOG_HELP = """\
tail, dump: the records of a topic as JSON Lines (any log). --user keeps one user id's records
(the log is keyed by the bare user id, so every tenant's); add --tenant for one tenant's events.

check, repair (the embedded log): every block of the embedded log carries a checksum (Avro's
snappy codec; files written before have none and stay readable), and each partition's
<partition>.avro.end records how far it was committed. Damage anywhere - a changed byte, a file
cut short or replaced by an older copy, a damaged header - is refused by every command, which
names the file, the bytes and the offsets. `check` verifies every entry and compares each
partition with what downstream has seen (the analyses' source headers, the dead letters, the
store's checkpoints) and exits 1 when something is damaged. `repair` sets damaged bytes aside in
<topic>/damaged/, keeps every record that still verifies, and records the offsets it cannot keep
as a gap so that no offset is ever given out twice; analyses and store rows of lost records stay.
"""
MCP_HELP = """\
Serve the memory to agents over MCP (Model Context Protocol).

tools: remember (publish messages, return once visible), recall (ranked evidence with route, why
and sources), research (evidence in rounds, graded, conflicts shown), as_of (recall as of a past
time), persona, timeline (events between two times), forget, feedback (which recalled items
helped: later answers put that kind first). resources: adamem://users/{user_id}/persona,
adamem://users/{user_id}/working.

stdio (default): for a client that starts the server itself; acts for --tenant. Nothing but the
protocol is written to standard output.
http: streamable HTTP on --host:--port at --path, with the tenant keys of `adamem serve`
(ADAMEM_API_KEYS, sent as X-API-Key or Authorization: Bearer; missing 401, wrong 403).

remember/forget publish to --log and wait until the store shows them: an embedded log is
projected in-process (do not also run `adamem project --follow` on the same store); a Kafka log
is projected by `adamem worker`, waited for up to --wait seconds.
"""
SERVICE_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
"""Thread pools of the numeric libraries (e5's OpenMP, NumPy's BLAS), one thread each in the query service."""


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        log_url=getattr(args, "log", None),
        store_url=getattr(args, "store", None),
        api_key=getattr(args, "api_key", None),
    )


def _tenant(args: argparse.Namespace, settings: Settings) -> str:
    return str(getattr(args, "tenant", None) or settings.default_tenant)


def _owner(args: argparse.Namespace, settings: Settings) -> str:
    """The owner key of ``args.user`` in ``--tenant`` (default: the settings' tenant)."""
    from adamem.owners import owner_key

    return owner_key(_tenant(args, settings), args.user)


def _metrics_port(args: argparse.Namespace) -> None:
    """Expose the process' Prometheus metrics on ``--metrics-port`` (``adamem.metrics``)."""
    if getattr(args, "metrics_port", None):
        from adamem.metrics import serve_metrics

        serve_metrics(args.metrics_port, args.metrics_host)


async def _project(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_project

    settings = _settings(args)
    require_log(settings)  # creating the store is project's job; creating an empty log is a typo's
    _metrics_port(args)
    return await run_project(settings, follow=args.follow, quiet=args.quiet)


def _worker(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_worker

    _metrics_port(args)
    if args.rebuild and args.reanalyze:
        raise ConfigError("a worker is a member of one job: --rebuild or --reanalyze, not both")
    if args.reanalyze:
        from adamem.cli.reanalysis_member import run_reanalysis_member

        settings = _settings(args)
        require_store(settings)
        return run_reanalysis_member(
            settings, args.reanalyze, loglevel=args.loglevel, verbose=args.verbose, logfile=args.worker_log
        )
    if args.rebuild:
        from adamem.cli.rebuild_member import run_rebuild_member

        settings = _settings(args)
        require_store(settings)
        return asyncio.run(run_rebuild_member(settings, args.rebuild, quiet=args.quiet))
    return run_worker(_settings(args), loglevel=args.loglevel, verbose=args.verbose, logfile=args.worker_log)


async def _replay(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_replay

    _metrics_port(args)
    layers = [x.strip() for x in args.layers.split(",")] if args.layers else None
    settings = _settings(args)
    if args.group and settings.log.kind != "kafka":
        raise ConfigError(f"--group shares a rebuild through Kafka: it needs a kafka:// log, not {settings.log_url!r}")
    require_log(settings)
    if args.user or args.verify:
        require_store(settings)  # both read the live view
    if args.group and (args.user or args.jobs is not None):
        raise ConfigError("--group shares a rebuild of every owner with its members: drop --user and --jobs")
    return await run_replay(
        settings,
        layers=layers,
        user=_owner(args, settings) if args.user else None,
        until=args.until,
        verify=args.verify,
        view=args.view,
        switch=not args.no_switch,
        quiet=args.quiet,
        jobs=args.jobs,
        group=args.group,
    )


async def _reanalyze(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_reanalyze

    settings = _settings(args)
    if args.group and settings.log.kind != "kafka":
        raise ConfigError(f"--group shares a reanalysis through Kafka: it needs kafka://, not {settings.log_url!r}")
    if args.group and args.jobs != 1:
        raise ConfigError("--group leaves the analysis to its members: drop --jobs")
    require_log(settings)
    require_store(settings)  # the new generation is compared with the active view
    return await run_reanalyze(
        settings,
        extractor=args.extractor,
        embedder=args.embedder,
        packs=args.packs,
        view=args.view,
        switch=args.switch,
        quiet=args.quiet,
        jobs=args.jobs,
        group=args.group,
    )


async def _views(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_views

    settings = _settings(args)
    require_store(settings)
    if args.action == "switch":
        require_log(settings)  # the view is caught up with the log first
    return await run_views(settings, switch=args.name if args.action == "switch" else None)


async def _forget(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_forget, run_forget_verify

    settings = _settings(args)
    if args.verify:
        return await run_forget_verify(settings, args.text)
    if args.text:
        raise ConfigError("--text is what `--verify` looks for; give --verify too")
    require_log(settings)  # a forget names what the log holds
    return await run_forget(
        settings,
        args.user,
        tenant=_tenant(args, settings),
        item=args.item,
        message=args.message,
        everything=args.all,
        reason=args.reason,
    )


def _query(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_query

    settings = _settings(args)
    if not args.question.strip():
        raise ConfigError(
            "the question is empty; ask something, e.g. adamem query alice 'What food do I like?' "
            "(the HTTP API refuses an empty question too)"
        )
    if len(args.question) > QUESTION_MAX:
        raise ConfigError(f"the question has {len(args.question)} characters; at most {QUESTION_MAX} (as in the API)")
    if args.url is None:
        require_store(settings)
    return run_query(
        settings,
        args.user,
        args.question,
        tenant=_tenant(args, settings),
        top_k=args.top_k,
        as_of=args.as_of,
        as_json=args.json,
        url=args.url,
    )


def _research(args: argparse.Namespace) -> int:
    from adamem.cli.research import run_research

    settings = _settings(args)
    if args.url is None:
        require_store(settings)
    return run_research(
        settings,
        args.user,
        args.query,
        tenant=_tenant(args, settings),
        depth=args.depth,
        context=args.context,
        hints=args.hint,
        top_k=args.top_k,
        as_of=args.as_of,
        as_json=args.json,
        url=args.url,
    )


def _one_thread_per_request() -> None:
    """Query-side commands run their numeric libraries one thread each (a value in the environment wins).

    Requests already run in parallel threads; a pool of threads per embedding or matrix product
    on top oversubscribes the cores: with 8 clients on 2 cores, OpenMP's and OpenBLAS's spinning
    workers took half the service's CPU. One query at a time suffers too: with e5's two OpenMP
    threads a question embeds in 11 ms instead of 19, but on a 10k-message owner about one query
    in five stalled 60-120 ms in the embedding and base search (in-process p95 118 ms); with one
    thread none did (p95 46 ms). Must run before NumPy or e5 load.
    """
    for name in SERVICE_THREADS:
        os.environ.setdefault(name, "1")


def _serve(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_serve

    settings = Settings.from_env(log_url=args.log, store_url=args.store, host=args.host, port=args.port)
    with_log = args.log is not None or "ADAMEM_LOG" in os.environ
    # A store named without a log is served read-only: no log opened.
    store_only = not with_log and (args.store is not None or "ADAMEM_STORE" in os.environ)
    read_only = args.read_only or store_only
    if store_only:
        require_store(settings)  # a read-only service over a store that is not there would answer 404 to all
    require_free_port(settings.host, settings.port)  # before the models load and the log is locked
    return run_serve(
        settings, with_log=with_log, read_only=read_only, access_log=not args.no_access_log, workers=args.workers
    )


def _mcp(args: argparse.Namespace) -> int:
    try:
        from adamem.integrations.mcp_server import serve
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"adamem mcp needs the MCP SDK ({exc.name}): install the mcp extra, `pip install -e '.[mcp]'` in a "
            "checkout of adamem-stream (or `pip install 'mcp>=2.3,<3'`)"
        ) from exc
    from adamem.memory import Memory

    settings = Settings.from_env(log_url=args.log, store_url=args.store, host=args.host, port=args.port)
    if args.transport == "http":
        from adamem.api.auth import KeyRing

        KeyRing(settings.api_keys)  # a malformed ADAMEM_API_KEYS stops here, before anything listens
    serve(
        Memory(settings, wait_timeout_s=args.wait),
        transport=args.transport,
        tenant=args.tenant,
        host=settings.host,
        port=args.port or 8765,
        path=args.path,
    )
    return 0


async def _add(args: argparse.Namespace) -> int:
    from adamem.cli.add import run_add

    settings = _settings(args)
    return await run_add(
        settings,
        args.user,
        args.text,
        tenant=_tenant(args, settings),
        speaker=args.speaker,
        role=args.role,
        at=args.at,
        conversation=args.conversation,
        url=args.url,
        wait_s=args.wait,
        as_json=args.json,
        message_id=args.message_id,
    )


async def _provenance(args: argparse.Namespace) -> int:
    from adamem.cli.commands import run_provenance

    settings = _settings(args)
    require_store(settings)
    require_log(settings)
    return await run_provenance(settings, _owner(args, settings), args.item, as_json=args.json)


def _memory(args: argparse.Namespace) -> int:
    from adamem.cli.commands import print_memory

    settings = _settings(args)
    if args.url is not None:
        from adamem.cli.remote import print_memory_at

        tenant = _tenant(args, settings)
        return print_memory_at(args.url, settings, args.user, tenant=tenant, layer=args.layer, as_json=args.json)
    require_store(settings)
    return print_memory(settings, _owner(args, settings), args.layer, args.json)


async def _publish(args: argparse.Namespace) -> int:
    from adamem.streams.factory import open_log
    from adamem.streams.publish import publish_messages

    settings = _settings(args)
    data, source = read_input(args.file)
    messages = load_messages(data, settings, source, args.format)
    if not messages:
        raise InputError([f"{source}: no messages found"])
    log = open_log(settings.log, settings)
    await log.start()
    bar = Progress("publish", len(messages), unit="msg", quiet=args.quiet, every=settings.progress_seconds)
    try:
        report = await publish_messages(log, messages, settings, progress=bar.update)
    finally:
        bar.close()
        await log.stop()
    spans = ", ".join(f"p{p}:{report.first[p]}-{report.last[p]}" for p in sorted(report.first))
    print(
        f"published {report.messages} message(s) for {report.owners} owner(s) to {report.topic} at {log.url} ({spans})"
    )
    return 0


async def _log(args: argparse.Namespace) -> int:
    if args.action in ("check", "repair"):
        from adamem.cli.commands import run_log_check

        return run_log_check(_settings(args), repair=args.action == "repair", upgrade=args.upgrade)
    if args.upgrade:
        raise ConfigError("--upgrade goes with `adamem log repair`")
    from adamem.streams.factory import open_log
    from adamem.streams.generations import generation_number
    from adamem.streams.publish import read_as_json

    generation_number(args.generation)  # a clear error for a name that is not g<N>
    settings = dataclasses.replace(_settings(args), generation=args.generation)
    require_log(settings)  # opening a missing embedded log would create it
    log = open_log(settings.log, settings)
    await log.start()
    try:
        tail = args.lines if args.action == "tail" else None
        async for row in read_as_json(
            log,
            settings.topic(args.topic),
            from_offset=args.from_offset,
            user=args.user,
            tenant=args.tenant,
            tail=tail,
            settings=settings,
        ):
            print(json.dumps(row, ensure_ascii=False))
    finally:
        await log.stop()
    return 0


async def _demo(args: argparse.Namespace) -> int:
    from adamem.cli.commands import print_memory, run_project
    from adamem.streams.factory import open_log
    from adamem.streams.publish import publish_messages, read_as_json

    settings = _settings(args)
    if not args.no_serve:
        require_free_port(settings.host, settings.port)  # before the build, not after it
    data = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
    messages = load_messages(data, settings, "sample_conversation.jsonl", "jsonl")
    log = open_log(settings.log, settings)
    await log.start()
    try:
        # Run again, the demo publishes only what the log lacks: the sample's event ids are derived
        # from its messages, and publishing a forgotten message again would bring it back.
        held = {
            row["event"]["event_id"] async for row in read_as_json(log, settings.topic("messages")) if "event" in row
        }
        missing = [m for m in messages if m.event_id not in held]
        report = await publish_messages(log, missing, settings) if missing else None
    finally:
        await log.stop()
    if report is None:
        print(f"the sample's {len(messages)} messages are already in {log.url}: nothing published")
    else:
        print(f"published {report.messages} sample message(s) for {report.owners} owner(s) into {log.url}")
    await run_project(settings, follow=False)
    for owner in sorted({m.owner_id for m in messages}):
        print()
        await asyncio.to_thread(print_memory, settings, owner, None, False)
    print(f"\nmore: adamem memory alice --layer persona --store {settings.store_url}")
    print(f"      adamem query xiaoming '我为什么开始健身？' --store {settings.store_url}")
    print(f"      adamem log tail --log {settings.log_url} --user xiaoming")
    if args.no_serve:
        return 0
    from adamem.cli.commands import run_serve

    require_free_port(settings.host, settings.port)  # still free after the build
    base = f"http://{settings.host}:{settings.port}"
    key = "" if not settings.api_keys else " -H 'X-API-Key: <your key>'"
    print(f"\nserving the query API at {base} (OpenAPI: {base}/docs); Ctrl-C stops it. Try:")
    print(f"  curl -s {base}/v1/users/alice/query{key} -H 'content-type: application/json' \\")
    print('       -d \'{"question": "Why did I start working out?", "top_k": 5}\'')
    await asyncio.to_thread(run_serve, settings, with_log=True)
    return 0


EXAMPLES: dict[str, tuple[str, ...]] = {
    "publish": (
        "adamem publish src/adamem/samples/sample_conversation.jsonl --log ./data/log",
        "cat more.jsonl | adamem publish - --log kafka://127.0.0.1:9092 --quiet",
    ),
    "log": (
        "adamem log dump --log ./data/log --user alice | head -3",
        "adamem log tail --log ./data/log --topic deadletter -n 5",
        "adamem log check --log ./data/log --store ./data/store",
    ),
    "project": (
        "adamem project --log ./data/log --store ./data/store",
        "adamem project --log ./data/log --store ./data/store --follow --quiet",
    ),
    "worker": (
        "adamem worker --log kafka://127.0.0.1:9092 --store ./data/store",
        "adamem worker --log kafka://127.0.0.1:9092 --store ./data/store --verbose   # Faust's own output",
        "adamem worker --log kafka://127.0.0.1:9092 --store ./data/store --rebuild r2   # a member of replay --group",
        "adamem worker --log kafka://127.0.0.1:9092 --store ./data/store --reanalyze g2   # of reanalyze --group",
    ),
    "memory": (
        "adamem memory alice --store ./data/store",
        "adamem memory alice --layer persona --json --store ./data/store",
        "adamem memory alice --layer persona --url http://127.0.0.1:8000",
    ),
    "serve": (
        "adamem serve                                                   # embedded: ingests, projects, serves",
        "adamem serve --read-only --store ./data/store --log kafka://127.0.0.1:9092   # workers project",
    ),
    "add": (
        "adamem add alice 'I moved to Lisbon last month.'",
        "adamem add alice 'I moved to Lisbon.' --url http://127.0.0.1:8000 --json",
    ),
    "query": (
        "adamem query alice 'Why did I start working out?' --store ./data/store",
        "adamem query xiaoming '我为什么开始健身？' --json --url http://127.0.0.1:8000",
    ),
    "research": (
        "adamem research alice 'Where do I live now?' --depth 2 --store ./data/store",
        "adamem research xiaoming '我为什么开始健身？' --hint 体检 --json --url http://127.0.0.1:8000",
    ),
    "provenance": ("adamem provenance alice <item id from adamem query --json> --log ./data/log --store ./data/store",),
    "replay": (
        "adamem replay --log ./data/log --store ./data/store --verify",
        "adamem replay --log ./data/log --store ./data/store --until 2024-04-01T00:00:00Z",
        "adamem replay --log kafka://127.0.0.1:9092 --store ./data/store --group --verify   # members fold",
    ),
    "reanalyze": ("adamem reanalyze --extractor none --log ./data/log --store ./data/store",),
    "views": ("adamem views --store ./data/store", "adamem views switch g2 --log ./data/log --store ./data/store"),
    "forget": (
        "adamem forget alice --message <event id from adamem log dump --user alice> --log ./data/log",
        "adamem forget alice --verify --text peanuts --log ./data/log --store ./data/store",
    ),
    "demo": ("adamem demo --no-serve --log ./data/log --store ./data/store",),
    "mcp": (
        "adamem mcp --store ./data/store --log ./data/log --tenant acme   # stdio: the client starts it",
        "ADAMEM_API_KEYS=acme:<key> adamem mcp --transport http --port 8765   # HTTP at /mcp",
    ),
}
"""Each subcommand's examples, shown at the end of its ``--help``."""

README_POINTER = (
    "Documentation: docs/ in the source tree (mkdocs serve), starting at docs/index.md; README.md is the overview."
)
"""Where the documentation is, shown at the end of every ``--help``."""
MAIN_EPILOG = f"""\
examples:
  adamem demo --no-serve                                           # the sample, end to end
  adamem publish chat.jsonl --log ./data/log                       # messages onto the log
  adamem project --log ./data/log --store ./data/store             # build memory from the log
  adamem query alice 'What food do I like?' --store ./data/store   # ask
  adamem serve --store ./data/store --log ./data/log               # the HTTP API
  adamem COMMAND --help                                            # each command, with examples

{EXIT_HELP}

progress bars and status lines go to stderr (a bar on a terminal, a line every few seconds
otherwise; --quiet silences them); what a command prints on stdout is unchanged.

{README_POINTER}
"""


def _examples(parser: argparse.ArgumentParser, name: str) -> None:
    """Show ``EXAMPLES[name]`` and the documentation pointer at the end of the parser's help."""
    shown = "\n".join(f"  {line}" for line in EXAMPLES.get(name, ()))
    parser.epilog = f"example{'s' if len(EXAMPLES.get(name, ())) > 1 else ''}:\n{shown}\n\n{README_POINTER}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def _api_key_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-key",
        help="with --url: the key of a service that checks keys (default $ADAMEM_API_KEY, else the tenant's key "
        "in $ADAMEM_API_KEYS)",
    )


def _metrics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (/metrics)")
    p.add_argument("--metrics-host", default="127.0.0.1", help="address of --metrics-port (default 127.0.0.1)")


def build_parser(*, bench: bool = False) -> argparse.ArgumentParser:
    """The argument parser of every subcommand.

    The benchmarks' own subcommands are added only when ``bench`` is asked for (``bench=True``):
    they are not part of what a library user loads, and building them imports NumPy.
    """
    parser = argparse.ArgumentParser(
        prog="adamem",
        description="AdaMem Stream: event-sourced four-layer memory.",
        epilog=MAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"adamem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("publish", help="publish messages (JSON Lines or LoCoMo JSON) to the log")
    p.add_argument("file", help="input file, or - for standard input")
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument(
        "--format",
        choices=["auto", "jsonl", "locomo"],
        default="auto",
        help="JSON Lines or LoCoMo JSON (default auto: from the content)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar or status lines on stderr")
    p.set_defaults(run=_publish)

    p = sub.add_parser(
        "log",
        help="read the log back as JSON Lines; check the embedded log for damage, repair it",
        description=LOG_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["tail", "dump", "check", "repair"])
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument(
        "--store",
        help="check/repair: the store whose checkpoints to compare with (default $ADAMEM_STORE or ./data/store)",
    )
    p.add_argument("--upgrade", action="store_true", help="repair: also rewrite files without checksums with them")
    p.add_argument(
        "--topic",
        default="messages",
        choices=["messages", "analyses", "control", "deadletter"],
        help="tail, dump: the topic to read (default messages)",
    )
    p.add_argument("--generation", default="g1", help="analysis generation of --topic analyses (g1, g2, ...)")
    p.add_argument("--from-offset", type=int, default=0, help="first offset to read, in every partition")
    p.add_argument("--user", help="only this user id's records (of every tenant, unless --tenant)")
    p.add_argument("--tenant", help="only events of this tenant (undecodable records name none and are left out)")
    p.add_argument("-n", "--lines", type=int, default=10, help="records shown by tail")
    p.set_defaults(run=_log)

    p = sub.add_parser("project", help="analyze and project pending events in-process (any log)")
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument("--follow", action="store_true", help="keep following the log until interrupted")
    p.add_argument("--quiet", action="store_true", help="no progress bar or status lines on stderr")
    _metrics_arguments(p)
    p.set_defaults(run=_project)

    p = sub.add_parser("worker", help="run the Faust worker (analyze + project agents) on Kafka")
    p.add_argument("--log", help="kafka://host:port (default $ADAMEM_LOG)")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument(
        "--loglevel",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="Faust's log level (default info)",
    )
    p.add_argument("--verbose", action="store_true", help="Faust's own log and tables on the terminal, not in a file")
    p.add_argument("--worker-log", help="file for Faust's own log (default worker-<pid>.log in the current folder)")
    p.add_argument(
        "--rebuild",
        metavar="VIEW",
        help="be a member of the group that rebuilds VIEW (begun by `adamem replay --group`) until it is done",
    )
    p.add_argument(
        "--reanalyze",
        metavar="VIEW",
        help="be a member of the group that analyses VIEW's generation (begun by `adamem reanalyze --group`) "
        "until every partition is analysed",
    )
    p.add_argument("--quiet", action="store_true", help="with --rebuild: no line per committed batch on stderr")
    _metrics_arguments(p)
    p.set_defaults(run=_worker, sync=True)

    p = sub.add_parser("memory", help="show a memory owner's four layers")
    p.add_argument("user", help="memory owner (user_id)")
    p.add_argument("--tenant", help="the tenant of the user (default $ADAMEM_TENANT or default)")
    p.add_argument(
        "--layer",
        choices=["working", "episodic", "persona", "graph", "archive"],
        help="list one layer's rows (archive: every message kept)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument(
        "--url", help="read a running service instead, e.g. http://127.0.0.1:8000 (without --layer: rows per layer)"
    )
    _api_key_argument(p)
    p.set_defaults(run=_memory, sync=True)

    p = sub.add_parser(
        "serve",
        help="serve the HTTP API (OpenAPI at /docs); on the embedded log it also analyses and projects",
        description="Serve the HTTP API. On an embedded log (a folder: --log, $ADAMEM_LOG, or with no --store "
        "either the default ./data/log) this one process ingests, analyses and projects: a message posted to "
        "/v1/messages is in the answer of the next query (mode embedded; it is then the log's one writer). On a "
        "kafka:// log, with --read-only, or given a store and no log, it only reads the store, which workers or "
        "`adamem project` build (mode read-only). /health says which.",
    )
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument(
        "--log", help="a folder (embedded) or kafka://host:port (default $ADAMEM_LOG; ./data/log if no store is given)"
    )
    p.add_argument(
        "--read-only",
        action="store_true",
        help="only read the store: no in-process write path (the log only if --log or $ADAMEM_LOG is given)",
    )
    p.add_argument("--no-access-log", action="store_true", help="no line per request on stderr")
    p.add_argument("--host", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument(
        "--workers", type=int, default=1, help="query processes on the port (replicas with their own caches; default 1)"
    )
    p.set_defaults(run=_serve, sync=True)

    p = sub.add_parser(
        "mcp",
        help="serve the memory to agents over MCP (stdio or streamable HTTP)",
        description=MCP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default stdio")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument("--log", help="log that remember/forget publish to (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--tenant", help="stdio: the tenant the server acts for (default $ADAMEM_TENANT or default)")
    p.add_argument("--host", help="http: listen address (default $ADAMEM_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, help="http: port (default 8765)")
    p.add_argument("--path", default="/mcp", help="http: the endpoint's path (default /mcp)")
    p.add_argument(
        "--wait", type=float, default=60.0, help="seconds remember/forget wait for a Kafka log's workers (default 60)"
    )
    p.set_defaults(run=_mcp, sync=True)

    p = sub.add_parser(
        "add",
        help="add one message and wait until the memory reflects it (read your writes)",
        description="Publish one message of USER and return once it is in memory: in-process on an embedded log "
        "(analysed and projected here), through a running `adamem serve` with --url (or by itself when that "
        "serve writes the --log folder), or on a kafka:// log once the workers projected it. Prints the log "
        "position it was written at.",
    )
    p.add_argument("user", help="memory owner (user_id)")
    p.add_argument("text", help="the message text")
    p.add_argument("--speaker", help="who said it (default: the user)")
    p.add_argument("--role", choices=["user", "assistant", "other"], default="user", help="the speaker's role")
    p.add_argument("--at", help="when it was said: RFC 3339 or ms since the epoch (default: now)")
    p.add_argument("--conversation", help="conversation id (default 'default')")
    p.add_argument(
        "--message-id", help="your id of the message in its conversation: adding it again keeps it once (idempotent)"
    )
    p.add_argument("--tenant", help="the tenant of the user (default $ADAMEM_TENANT or default)")
    p.add_argument("--url", help="add through a running service, e.g. http://127.0.0.1:8000")
    _api_key_argument(p)
    p.add_argument("--wait", type=float, default=10.0, help="seconds to wait for the memory (default 10)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.set_defaults(run=_add)

    p = sub.add_parser("query", help="ask a question about a user's memory")
    p.add_argument("user", help="memory owner")
    p.add_argument("--tenant", help="the tenant of the user (default $ADAMEM_TENANT or default)")
    p.add_argument("question", help="the question, English or Chinese")
    p.add_argument("--top-k", type=int, default=10, help="how many ranked items to show (default 10)")
    p.add_argument("--as-of", help="memory as it was at an event time (ISO-8601) or ms")
    p.add_argument("--json", action="store_true", help="the full answer as JSON")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument("--url", help="ask a running service instead, e.g. http://127.0.0.1:8000")
    _api_key_argument(p)
    p.set_defaults(run=_query, sync=True)

    p = sub.add_parser("research", help="gather graded evidence in rounds (the Research Agent)")
    p.add_argument("user", help="memory owner")
    p.add_argument("query", help="the question, English or Chinese")
    p.add_argument("--tenant", help="the tenant of the user (default $ADAMEM_TENANT or default)")
    p.add_argument(
        "--depth",
        type=int,
        default=1,
        choices=range(1, 6),
        metavar="{1..5}",
        help="rounds at most (default 1): later rounds search with cues from the evidence found",
    )
    p.add_argument("--context", default="", help="text around the question; its rarest words help round 1")
    p.add_argument("--hint", action="append", default=[], help="a word or name known to matter (repeatable)")
    p.add_argument("--top-k", type=int, default=10, help="how many graded items to show (default 10)")
    p.add_argument("--as-of", help="memory as it was at an event time (ISO-8601) or ms")
    p.add_argument("--json", action="store_true", help="the full answer as JSON")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument("--url", help="ask a running service instead, e.g. http://127.0.0.1:8000")
    _api_key_argument(p)
    p.set_defaults(run=_research, sync=True)

    p = sub.add_parser("provenance", help="walk from a memory item back to its messages and analyses")
    p.add_argument("user", help="memory owner")
    p.add_argument("--tenant", help="the tenant of the user (default $ADAMEM_TENANT or default)")
    p.add_argument("item", help="item id (episodic record, persona trait, graph node or message event id)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.set_defaults(run=_provenance)

    p = sub.add_parser("replay", help="rebuild memory from the recorded analyses into a new view and switch")
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.add_argument("--layers", help="comma-separated: working,episodic,persona,graph (what is verified/replaced)")
    p.add_argument("--user", help="rebuild only this owner, in place")
    p.add_argument("--tenant", help="the tenant of the user (default $ADAMEM_TENANT or default)")
    p.add_argument("--until", help="build memory as of an event time (ISO-8601) or a log offset; no switch")
    p.add_argument("--verify", action="store_true", help="compare the rebuilt rows with the live ones")
    p.add_argument("--view", help="name of the new view (default r<N>)")
    p.add_argument("--no-switch", action="store_true", help="build the view but keep serving the current one")
    p.add_argument(
        "--jobs",
        type=int,
        help="processes folding partitions side by side, at most the log's partitions (default: the cores, "
        "one per 20,000 records of the log)",
    )
    p.add_argument(
        "--group",
        action="store_true",
        help="on a kafka:// log: members started with `adamem worker --rebuild VIEW` fold the view; this "
        "command waits for them, then verifies, catches up and switches",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar or status lines on stderr")
    _metrics_arguments(p)
    p.set_defaults(run=_replay)

    p = sub.add_parser(
        "reanalyze", help="analyse every message again with another extractor/embedder into a new view; compare"
    )
    p.add_argument("--extractor", help="rules, openai, none or package.module:factory (default: the current one)")
    p.add_argument("--embedder", help="e5, e5-pair or openai (default: the current one)")
    p.add_argument(
        "--packs",
        help="domain packs per tenant, tenant:pack[+pack],... ('' for none; default: the current ones, as recorded)",
    )
    p.add_argument("--view", help="name of the new view (default: the generation's name, g<N>)")
    p.add_argument("--switch", action="store_true", help="switch to the new view when done (default: only compare)")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes analysing partitions side by side, at most the log's partitions (default 1: the e5 "
        "model already uses every core; more pay off for an extractor that waits, such as an LLM)",
    )
    p.add_argument(
        "--group",
        action="store_true",
        help="on a kafka:// log: members started with `adamem worker --reanalyze VIEW` analyse; this command "
        "waits for them, then folds the view and compares",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar or status lines on stderr")
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.set_defaults(run=_reanalyze)

    p = sub.add_parser("views", help="list the store's views (replays, reanalyses) or switch to one")
    p.add_argument("action", nargs="?", choices=["list", "switch"], default="list")
    p.add_argument("name", nargs="?", help="the view to switch to (it is caught up with the log first)")
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--store", help="store folder (default $ADAMEM_STORE or ./data/store)")
    p.set_defaults(run=_views)

    p = sub.add_parser("forget", help="publish a MemoryForgotten control event")
    p.add_argument("user", help="memory owner")
    p.add_argument("--tenant", help="the tenant of the user (default $ADAMEM_TENANT or default)")
    p.add_argument("--item", help="a memory item id (episodic record, persona trait, graph node)")
    p.add_argument("--message", help="a message event id: the message and all derived only from it")
    p.add_argument("--all", action="store_true", help="everything of the owner")
    p.add_argument("--reason", default="", help="why (kept for audit)")
    p.add_argument(
        "--verify",
        action="store_true",
        help="publish nothing: search every file of the store and the embedded log for each --text; exit 1 if found",
    )
    p.add_argument(
        "--text", action="append", default=[], help="a forgotten text to look for (with --verify; repeatable)"
    )
    p.add_argument("--log", help="kafka://host:port or a folder (default $ADAMEM_LOG or ./data/log)")
    p.add_argument("--store", help="store folder, searched by --verify (default $ADAMEM_STORE or ./data/store)")
    p.set_defaults(run=_forget)

    from adamem.cli.benchmarks import HELP as BENCH_HELP
    from adamem.cli.benchmarks import register as register_bench

    if bench:
        register_bench(sub)
    else:
        sub.add_parser("bench", help=BENCH_HELP, add_help=False)  # listed here; parsed only with bench=True

    p = sub.add_parser("demo", help="the embedded default: publish the sample, build memory, show it")
    p.add_argument("--log", help="folder of the embedded log (default ./data/log)")
    p.add_argument("--store", help="store folder (default ./data/store)")
    p.add_argument("--no-serve", action="store_true", help="build and show memory, then exit")
    p.set_defaults(run=_demo)
    for name, command in sub.choices.items():
        if name in EXAMPLES:
            _examples(command, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``adamem`` console script."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] in (["serve"], ["query"]) or words[:2] == ["bench", "latency"]:
        _one_thread_per_request()  # before the parser: building the bench commands loads NumPy
    try:
        args = build_parser(bench=words[:1] == ["bench"]).parse_args(words)
        code = int(args.run(args)) if getattr(args, "sync", False) else int(asyncio.run(args.run(args)))
        sys.stdout.flush()  # here, so that a reader gone away is seen below and not at exit
        return code
    except AdaMemError as exc:
        print(f"adamem: error: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`adamem log dump | head -3`): stop quietly, as Unix tools
        # do. Python would report the pipe again when it flushes stdout at exit; point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return OUTPUT_CLOSED


if __name__ == "__main__":
    sys.exit(main())
