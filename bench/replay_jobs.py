"""``adamem bench replay_jobs``: replay events/s by fold processes (``--jobs``) and log partitions.

For each partition count a log is built (the LoCoMo turns, ``--repeat`` copies with renamed
owners, ingested with the in-process pipeline; every copy after the first, and every log after
the first, embeds through a memoising embedder since their texts repeat). Then, round after round,
the same log is rebuilt into a new view with each ``--jobs`` value in turn (the runs alternate,
so a change in the machine's load falls on all of them), timed, and every rebuilt view is compared
row by row with the live one. One process (``--jobs 1``) is replay's fold as it runs without
processes: the baseline of each row. ``--reanalysis`` also analyses every message again with each
``--jobs`` value (the model runs again, so keep such a log small): messages/s. The figures include
starting the processes (about 1.3 s of CPU each, most of it importing LanceDB).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
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
from adamem.streams.reanalyze import reanalyze
from adamem.streams.replay import diff_stores, rebuild_view
from bench.build import build_memory
from bench.common import (
    DEFAULT_LOCOMO,
    CachingEmbedder,
    load_locomo,
    locomo_messages,
    measure_and_record,
    print_table,
    spread,
    standalone_main,
)

__all__ = ["main", "run"]


async def _reanalyze(settings: Settings, view: str, jobs: int) -> tuple[int, float]:
    """A new generation with the same analyzer (``--extractor`` the current one), timed: (messages analysed, s)."""
    t = time.perf_counter()
    report = await reanalyze(settings, settings.store_url, extractor=settings.extractor, view=view, jobs=jobs)
    seconds = time.perf_counter() - t
    shutil.rmtree(Path(settings.store_url) / "views" / view, ignore_errors=True)
    return report.stats.analyzed, seconds


async def _rebuild(settings: Settings, view: str, jobs: int) -> tuple[int, float]:
    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        t = time.perf_counter()
        report = await rebuild_view(log, settings.store_url, settings, view=view, switch=False, jobs=jobs)
        return report.events, time.perf_counter() - t
    finally:
        await log.stop()


def run(
    data: str | Path,
    *,
    samples: Sequence[str] | None = None,
    repeat: int = 8,
    partitions: Sequence[int] = (1, 4),
    jobs: Sequence[int] = (1, 2),
    rounds: int = 3,
    owners: int = 32,
    work: str | None = None,
    reuse: bool = False,
    reanalysis: bool = False,
) -> dict[str, Any]:
    """Build a log per partition count; rebuild it ``rounds`` times with each ``jobs``; events/s.

    The copies of the turns go to ``owners`` renamed owners, spread over the partitions.
    ``reuse``: ``work`` holds the logs and stores of an earlier run with the same data; only time.
    ``reanalysis``: also analyse every message again (the model runs: keep the log small) once per
    ``jobs`` value, messages/s.
    """
    docs = load_locomo(data)
    if samples:
        docs = [d for d in docs if d.get("sample_id") in set(samples)]
    root = Path(work) if work else Path(tempfile.mkdtemp(prefix="adamem-bench-replay-jobs-"))
    if root.exists() and any(root.iterdir()) and not reuse:
        raise SystemExit(f"{root} is not empty; the benchmark needs a fresh folder (or --reuse)")
    embedder = CachingEmbedder(build_embedder(Settings.from_env()))
    rows: list[dict[str, Any]] = []
    for p in partitions:
        settings = Settings.from_env(
            log_url=str(root / f"p{p}" / "log"), store_url=str(root / f"p{p}" / "store"), embedded_partitions=p
        )
        if not (reuse and (root / f"p{p}" / "store").exists()):
            base = locomo_messages(docs, settings)
            messages = base + spread(base, len(base) * (repeat - 1), owners, "replay-")
            print(f"{p} partition(s): ingesting {len(messages)} messages …", file=sys.stderr, flush=True)
            build_memory(messages, settings, MemoryAgent(build_extractor(settings), embedder))
        times: dict[int, list[float]] = {j: [] for j in jobs}
        events: dict[int, int] = {}
        equal: dict[int, bool] = {}
        for r in range(rounds):
            for j in jobs:
                view = f"j{j}-r{r}"
                events[j], seconds = asyncio.run(_rebuild(settings, view, j))
                times[j].append(seconds)
                if r == 0:
                    live = LanceStore(settings.store_url, read_only=True, view="main")
                    equal[j] = not diff_stores(live, LanceStore(settings.store_url, read_only=True, view=view))
                shutil.rmtree(Path(settings.store_url) / "views" / view, ignore_errors=True)
                print(f"  jobs {j}, round {r + 1}: {events[j] / seconds:,.0f} events/s", file=sys.stderr, flush=True)
        analysed: dict[int, tuple[int, float]] = {}
        for j in jobs if reanalysis else ():
            analysed[j] = asyncio.run(_reanalyze(settings, f"a{j}", j))
            print(f"  reanalysis, jobs {j}: {analysed[j][0] / analysed[j][1]:,.1f} messages/s", file=sys.stderr)
        one = statistics.median(times[jobs[0]])
        for j in jobs:
            median = statistics.median(times[j])
            rows.append(
                {
                    "partitions": p,
                    "jobs": j,
                    "events": events[j],
                    "seconds": [round(t, 2) for t in times[j]],
                    "median_s": round(median, 2),
                    "events_per_s": round(events[j] / median, 1),
                    f"speedup_vs_jobs_{jobs[0]}": round(one / median, 2),
                    "rows_equal_to_live": equal[j],
                    **(
                        {
                            "reanalysis_messages": analysed[j][0],
                            "reanalysis_s": round(analysed[j][1], 2),
                            "reanalysis_messages_per_s": round(analysed[j][0] / analysed[j][1], 1),
                        }
                        if j in analysed
                        else {}
                    ),
                }
            )
    if not work:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "data": str(data),
        "samples": list(samples or []),
        "repeat": repeat,
        "owners": owners,
        "rounds": rounds,
        "runs": rows,
    }


def print_report(r: dict[str, Any]) -> None:
    """The table."""
    first = min(row["jobs"] for row in r["runs"])
    print_table(
        [
            "partitions",
            "jobs",
            "events",
            "median s",
            "events/s",
            f"× jobs {first}",
            "rows equal to live",
            "reanalysis msg/s",
        ],
        [
            [
                row["partitions"],
                row["jobs"],
                row["events"],
                row["median_s"],
                row["events_per_s"],
                row[f"speedup_vs_jobs_{first}"],
                row["rows_equal_to_live"],
                row.get("reanalysis_messages_per_s"),
            ]
            for row in r["runs"]
        ],
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark's options."""
    p.add_argument("--data", default=str(DEFAULT_LOCOMO), help="a LoCoMo-format JSON file")
    p.add_argument("--samples", nargs="*", help="only these sample ids")
    p.add_argument("--repeat", type=int, default=8, help="copies of the turns (owners renamed) for a longer log")
    p.add_argument("--partitions", type=int, nargs="+", default=[1, 4], help="partition counts of the logs built")
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="fold processes; the first is the baseline")
    p.add_argument("--rounds", type=int, default=3, help="rebuilds per jobs value (alternating)")
    p.add_argument("--owners", type=int, default=32, help="renamed owners of the copies (spread over partitions)")
    p.add_argument("--work", help="an empty folder to keep the logs and stores in (default: a temp dir)")
    p.add_argument("--reuse", action="store_true", help="time the logs and stores --work holds from an earlier run")
    p.add_argument("--reanalysis", action="store_true", help="also time analysing every message again, per --jobs")
    p.add_argument("--json", dest="out", help="result file (default bench/results/replay_jobs.json)")


def execute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run and record."""
    return measure_and_record(
        "replay_jobs",
        argv,
        args.out,
        lambda: run(
            args.data,
            samples=args.samples,
            repeat=args.repeat,
            partitions=args.partitions,
            jobs=args.jobs,
            rounds=args.rounds,
            owners=args.owners,
            work=args.work,
            reuse=args.reuse,
            reanalysis=args.reanalysis,
        ),
        print_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.replay_jobs``."""
    return standalone_main("replay_jobs", __doc__, add_arguments, execute, argv)


if __name__ == "__main__":
    raise SystemExit(main())
