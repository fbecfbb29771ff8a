"""Replay events/s of one process, two source trees alternating on the same kept log.

``python -m bench.replay_percore --log DIR --trees OLD NEW --rounds 4 --json OUT``: ``DIR`` is a
partition folder kept by ``adamem bench replay_jobs --work W`` (``W/p1``: its ``log`` and
``store``). Each round starts a fresh process per tree (``PYTHONPATH=TREE/src:TREE``; the order
turns every round, so a change in the machine's load falls on both), which rebuilds the log into
throwaway views with ``streams.replay.rebuild_view(..., switch=False, jobs=1)``: one untimed
warm-up, then ``--rebuilds`` timed. Reported per rebuild: events/s of wall time, of the process's
CPU time (every thread: LanceDB writes on threads of its own) and of the calling thread's CPU; and
the 1-minute load average before each process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


async def _rebuild(folder: Path, view: str) -> dict[str, float]:
    from adamem.settings import Settings
    from adamem.streams.factory import open_log
    from adamem.streams.replay import rebuild_view

    settings = Settings.from_env(log_url=str(folder / "log"), store_url=str(folder / "store"))
    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
        report = await rebuild_view(log, settings.store_url, settings, view=view, switch=False, jobs=1)
        wall, cpu, thread = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - thread
    finally:
        await log.stop()
        shutil.rmtree(Path(settings.store_url) / "views" / view, ignore_errors=True)
    return {"events": report.events, "wall_s": wall, "cpu_s": cpu, "thread_cpu_s": thread}


def _child(folder: Path, rebuilds: int) -> None:
    """In a fresh process: a warm-up rebuild, then ``rebuilds`` timed ones, one JSON line each."""
    tag = uuid.uuid4().hex[:8]
    asyncio.run(_rebuild(folder, f"warm-{tag}"))
    for i in range(rebuilds):
        print(json.dumps(asyncio.run(_rebuild(folder, f"t{i}-{tag}"))), flush=True)


def _summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    def rates(key: str) -> list[float]:
        return [r["events"] / r[key] for r in runs]

    return {
        "rebuilds": len(runs),
        "events": int(runs[0]["events"]) if runs else 0,
        "wall_events_per_s_median": round(statistics.median(rates("wall_s"))),
        "wall_events_per_s_max": round(max(rates("wall_s"))),
        "cpu_events_per_s_median": round(statistics.median(rates("cpu_s"))),
        "main_thread_cpu_events_per_s_median": round(statistics.median(rates("thread_cpu_s"))),
        "runs": [{k: round(v, 3) for k, v in r.items()} for r in runs],
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replay_percore", description=__doc__)
    p.add_argument("--log", required=True, help="a kept partition folder (its log/ and store/)")
    p.add_argument("--trees", nargs=2, metavar=("OLD", "NEW"), help="the two source trees to alternate")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--rebuilds", type=int, default=3, help="timed rebuilds per process, after a warm-up")
    p.add_argument("--json", dest="out", help="result file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    folder = Path(args.log)
    if args.child:
        _child(folder, args.rebuilds)
        return 0
    if not args.trees:
        p.error("--trees OLD NEW is required")
    trees = [str(Path(t).resolve()) for t in args.trees]
    runs: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    loads: list[float] = []
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            loads.append(os.getloadavg()[0])
            env = {**os.environ, "PYTHONPATH": f"{tree}/src:{tree}"}
            child = ["--child", "--log", str(folder), "--rebuilds", str(args.rebuilds)]
            # this file run as it is (the other tree may not have it), importing adamem from the tree
            argv_set = f"import runpy, sys; sys.argv = {[__file__, *child]!r}; "
            run = argv_set + f"runpy.run_path({__file__!r}, run_name='__main__')"
            out = subprocess.run([sys.executable, "-c", run], env=env, cwd=tree, check=True, capture_output=True)
            done = [json.loads(line) for line in out.stdout.decode().splitlines() if line.startswith("{")]
            runs[tree].extend(done)
            rates = ", ".join(f"{d['events'] / d['wall_s']:,.0f}" for d in done)
            print(f"round {r + 1}, {tree}: {rates} events/s (load {loads[-1]:.2f})", file=sys.stderr, flush=True)
    result = {
        "command": " ".join(["python -m bench.replay_percore", *(argv if argv is not None else sys.argv[1:])]),
        "log": str(folder),
        "rounds": args.rounds,
        "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        "trees": {t: _summary(runs[t]) for t in trees},
    }
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
