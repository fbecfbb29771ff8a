"""``adamem bench replay``: rebuild every layer from the recorded analyses; events/s and the ratio to live ingest.

One run: the LoCoMo turns (``--repeat`` copies with renamed owners for a longer log) are published
to an embedded log (or, with ``--log kafka://host:port``, to fresh topics on a real broker) and
ingested live with the in-process pipeline (``run_pipeline``: Memory Agent + projections into
LanceDB), timed; then ``streams.replay.rebuild_view`` folds the recorded analyses into a new view
of the same store, timed, and the rebuilt rows are compared with the live ones. Copies after the
first are analysed with a memoising embedder (their texts repeat), so live ingest is timed on the
first copy only, with the real embedder. When a target is missed the rebuild is run again under
cProfile and the top functions are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_embedder, build_extractor
from adamem.projections.store.lance import LanceStore
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.replay import RebuildReport, diff_stores, rebuild_view
from bench.build import build_memory
from bench.common import (
    DEFAULT_LOCOMO,
    RESULTS,
    CachingEmbedder,
    drop_run_topics,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    run_topics,
    spread,
    standalone_main,
)

__all__ = ["main", "run"]

TARGET_EVENTS_S = 5000.0
TARGET_RATIO = 10.0


async def _rebuild(settings: Settings, view: str) -> tuple[RebuildReport, float]:
    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        t = time.perf_counter()
        report = await rebuild_view(log, settings.store_url, settings, view=view, switch=False)
        return report, time.perf_counter() - t
    finally:
        await log.stop()


def profile_rebuild(settings: Settings, view: str, top: int = 30) -> tuple[list[dict[str, Any]], str]:
    """Rebuild once more under cProfile: the top functions by own time, and the printed stats."""
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(_rebuild(settings, view))
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).sort_stats("tottime")
    stats.print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    rows = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values()) or 1.0
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]:
        rows.append(
            {
                "function": f"{Path(file).name}:{line}({fn})",
                "calls": nc,
                "tottime_s": round(tt, 3),
                "cumtime_s": round(ct, 3),
                "share_of_own_time": round(tt / total, 3),
            }
        )
    return rows, buf.getvalue()


def run(
    data: str | Path,
    *,
    repeat: int = 1,
    samples: Sequence[str] | None = None,
    work: str | None = None,
    profile: bool | None = None,
    log_url: str | None = None,
) -> dict[str, Any]:
    """Ingest live, rebuild from the analyses, compare; ``profile`` None = only when a target is missed.

    ``log_url`` ``kafka://host:port``: the log is a real broker instead of the embedded folder, on
    topics of a fresh prefix (``<prefix>`` = bench + 8 hex digits), deleted at the end.
    """
    docs = load_locomo(data)
    if samples:
        docs = [d for d in docs if d.get("sample_id") in set(samples)]
    root = Path(work) if work else Path(tempfile.mkdtemp(prefix="adamem-bench-replay-"))
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"{root} is not empty; the replay benchmark needs a fresh folder")
    if log_url is None:
        settings = Settings.from_env(log_url=str(root / "log"), store_url=str(root / "store"))
    elif log_url.startswith("kafka://"):
        settings = run_topics(log_url, str(root / "store"))
    else:
        raise SystemExit(f"--log takes kafka://host:port (the embedded log is the default), not {log_url!r}")
    try:
        return _measure(docs, data, settings, root, repeat, profile, keep=bool(work))
    finally:
        if settings.log_url.startswith("kafka://"):
            drop_run_topics(settings)


def _measure(
    docs: list[dict[str, Any]],
    data: str | Path,
    settings: Settings,
    root: Path,
    repeat: int,
    profile: bool | None,
    *,
    keep: bool,
) -> dict[str, Any]:
    base = locomo_messages(docs, settings)
    embedder = build_embedder(settings)
    extractor = build_extractor(settings)
    print(f"live ingest of {len(base)} messages …", file=sys.stderr, flush=True)
    live = build_memory(base, settings, MemoryAgent(extractor, embedder))
    extra: dict[str, Any] = {}
    if repeat > 1:
        more = spread(base, len(base) * (repeat - 1), len(docs) * (repeat - 1), "replay-")
        cached = CachingEmbedder(embedder)
        t = time.perf_counter()
        built = build_memory(more, settings, MemoryAgent(extractor, cached))
        extra = {
            "messages": len(more),
            "pipeline_s": round(built.pipeline_s, 2),
            "embedder_cache": cached.stats(),
            "note": "copies after the first: texts repeat, so their embeddings are memoised",
        }
        print(f"added {len(more)} messages in {time.perf_counter() - t:.0f}s", file=sys.stderr, flush=True)
    print("replaying …", file=sys.stderr, flush=True)
    report, seconds = asyncio.run(_rebuild(settings, "bench-r1"))
    live_store = LanceStore(settings.store_url, read_only=True, view="main")
    rebuilt = LanceStore(settings.store_url, read_only=True, view="bench-r1")
    diffs = diff_stores(live_store, rebuilt)
    live_rate = live.messages / live.pipeline_s
    rate = report.events / seconds
    kafka = settings.log_url.startswith("kafka://")
    result: dict[str, Any] = {
        "data": str(data),
        "log": {
            "kind": "kafka" if kafka else "embedded",
            "topic_prefix": settings.topic_prefix,
            "partitions": settings.partitions if kafka else settings.embedded_partitions,
        },
        "messages": len(base) + int(extra.get("messages", 0)),
        "live": {
            "messages": live.messages,
            "seconds": round(live.pipeline_s, 2),
            "events_per_s": round(live_rate, 2),
            "analyzed": live.stats.analyzed,
            "applied": live.stats.applied,
            "fsync": settings.fsync,
            "embedder": embedder.name,
            "extractor": extractor.name,
        },
        "extra_copies": extra,
        "replay": {
            "events": report.events,
            "seconds": round(seconds, 2),
            "events_per_s": round(rate, 1),
            "rows_equal_to_live": not diffs,
            "differing_rows": len(diffs),
        },
        "ratio_replay_to_live": round(rate / live_rate, 1),
        "targets": {"events_per_s": TARGET_EVENTS_S, "ratio": TARGET_RATIO},
        "met": {"events_per_s": rate >= TARGET_EVENTS_S, "ratio": rate / live_rate >= TARGET_RATIO},
    }
    missed = not all(result["met"].values())
    if profile or (profile is None and missed):
        print("profiling a second rebuild …", file=sys.stderr, flush=True)
        rows, text = profile_rebuild(settings, "bench-r2")
        result["profile_top"] = rows
        RESULTS.mkdir(parents=True, exist_ok=True)
        name = "replay_kafka_profile.txt" if kafka else "replay_profile.txt"  # one per kind of log
        (RESULTS / name).write_text(text)
        result["profile_file"] = f"bench/results/{name}"
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return result


def print_report(r: dict[str, Any]) -> None:
    """The table."""
    print_table(
        [
            "log",
            "messages",
            "live ingest ev/s",
            "replay events",
            "replay s",
            "replay ev/s",
            "replay / live",
            "rows equal",
        ],
        [
            [
                f"{r['log']['kind']}, {r['log']['partitions']} partition(s)" if "log" in r else "embedded",
                r["messages"],
                r["live"]["events_per_s"],
                r["replay"]["events"],
                r["replay"]["seconds"],
                r["replay"]["events_per_s"],
                r["ratio_replay_to_live"],
                r["replay"]["rows_equal_to_live"],
            ]
        ],
    )
    print(
        f"targets: ≥ {TARGET_EVENTS_S:.0f} events/s ({'met' if r['met']['events_per_s'] else 'MISSED'}), "
        f"≥ {TARGET_RATIO:.0f}× live ({'met' if r['met']['ratio'] else 'MISSED'})"
    )
    for row in r.get("profile_top", [])[:12]:
        print(f"  {row['share_of_own_time'] * 100:5.1f}% own {row['tottime_s']:7.2f}s  {row['function']}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``adamem bench replay``."""
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="a LoCoMo-format JSON file")
    p.add_argument("--samples", nargs="*", help="only these sample ids")
    p.add_argument("--repeat", type=int, default=1, help="copies of the turns (owners renamed) for a longer log")
    p.add_argument("--work", help="an empty folder to keep the log and store in (default: a temp dir)")
    p.add_argument("--log", help="kafka://host:port: a real broker as the log, on fresh topics (default: embedded)")
    p.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="profile the rebuild (default: only when a target is missed)",
    )
    p.add_argument("--json", dest="out", help="result file (default bench/results/replay.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run from parsed arguments."""
    return measure_and_record(
        "replay",
        argv,
        args.out,
        lambda: run(
            args.data, repeat=args.repeat, samples=args.samples, work=args.work, profile=args.profile, log_url=args.log
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.replay``."""
    return standalone_main("replay", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    sys.exit(main())
