"""``adamem bench <name>``: the project's benchmarks (locomo, ingest, replay, replay_jobs, latency, … report).

``register(subparsers)`` adds the ``bench`` command to the ``adamem`` parser; ``python -m bench.cli …``
runs the same commands on their own. Each subcommand prints a table and writes JSON under
``bench/results/``; ``report`` turns the latest JSON files into ``bench/results/README.md`` and plots.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["build_parser", "main", "register"]


def _runner(module: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        if getattr(args, "quiet", False):  # every Settings.from_env of the run reads it (ADAMEM_PROGRESS)
            os.environ["ADAMEM_PROGRESS"] = "false"
        mod = importlib.import_module(f"bench.{module}")
        argv = getattr(args, "bench_argv", None)
        if argv is None:  # run from ``adamem bench …``: the words after "bench" (for the result's command line)
            words = sys.argv[1:]
            argv = words[words.index("bench") + 1 :] if "bench" in words else [module]
        return int(mod.execute(args, argv))

    return run


EXAMPLES = {
    "locomo": "adamem bench locomo --limit 20 --systems full   # a quick look; progress on stderr, --quiet hides it",
    "ingest": "adamem bench ingest --log kafka://127.0.0.1:9092 --messages 500",
    "replay": "adamem bench replay --repeat 4",
    "replay_jobs": "adamem bench replay_jobs --samples conv-26 --repeat 4 --rounds 1   # a quick look",
    "reanalysis_group": "adamem bench reanalysis_group --samples conv-26 --members 1 2   # a broker at 9092",
    "research": "adamem bench research --work /tmp/loc-base --depths 1 2 3   # reuses bench locomo's store",
    "latency": "adamem bench latency --per-route 20 --no-http",
    "concurrency": "adamem bench concurrency --baseline-commit 1b50de1 --clients 1 8",
    "metrics_overhead": "adamem bench metrics_overhead --rounds 40",
    "footprint": "adamem bench footprint",
    "visible": "adamem bench visible --samples 100 --preload 400",
    "objectstore": "adamem bench objectstore --s3 127.0.0.1:9000   # after bash deploy/s3.sh start",
    "scale": "adamem bench scale --per-owner 1000 10000 --owners 1000 10000",
    "scaleout": "adamem bench scaleout --log kafka://127.0.0.1:9092 --partitions 1 4 --workers 1 2",
    "ui_render": "adamem bench ui_render --messages 10000   # the inspector's panels in headless Chromium",
    "report": "adamem bench report",
}
"""One example per benchmark, at the end of its ``--help``."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``bench`` with its subcommands to an ``argparse`` subparsers object; returns the ``bench`` parser.

    Every subcommand sets ``run`` (a function of the parsed arguments returning an exit code) and
    ``sync=True``, the convention of ``adamem.cli``.
    """
    import bench.report as report
    from bench import (
        HELP,
        concurrency,
        footprint,
        ingest,
        latency,
        locomo,
        metrics_overhead,
        objectstore,
        reanalysis_group,
        replay,
        replay_jobs,
        research,
        scale,
        scaleout,
        ui_render,
        visible,
    )

    bench = subparsers.add_parser("bench", help=HELP)
    sub = bench.add_subparsers(dest="bench_command", required=True)
    parts: tuple[tuple[str, Any, str], ...] = (
        ("locomo", locomo, "evidence recall@k and answer coverage on LoCoMo, with ablations and flat baselines"),
        ("ingest", ingest, "end-to-end throughput through a real broker and worker vs. raw Kafka and the embedder"),
        ("replay", replay, "rebuild all layers from recorded analyses: events/s and ratio to live ingest"),
        ("replay_jobs", replay_jobs, "replay events/s by fold processes (--jobs) and log partitions"),
        (
            "reanalysis_group",
            reanalysis_group,
            "reanalysis messages/s by members of a group on Kafka (worker --reanalyze), beside one process",
        ),
        ("research", research, "the Research Agent's recall on LoCoMo by depth, per conversation, and its latency"),
        ("latency", latency, "query latency per route, in-process and over HTTP with concurrent clients"),
        (
            "concurrency",
            concurrency,
            "cold and warm latency and CPU per question over HTTP by concurrent clients, old code beside new",
        ),
        ("metrics_overhead", metrics_overhead, "query p95 of adamem serve with and without Prometheus metrics"),
        ("footprint", footprint, "disk per message per layer, process memory, vector index compression"),
        ("visible", visible, "publish → visible over HTTP on the embedded default (one adamem serve), p50/p95"),
        ("objectstore", objectstore, "commit and read latency a store on s3:// adds, against a local folder"),
        ("scale", scale, "query latency and memory as an owner and the owner count grow (synthetic rows)"),
        ("scaleout", scaleout, "ingest and replay events/s per CPU-second as partitions and workers grow"),
        ("ui_render", ui_render, "time to first render of each inspector panel for a 10k-message owner"),
        ("report", report, "write bench/results/README.md and the plots from the latest results"),
    )
    for name, module, help_text in parts:
        p = sub.add_parser(
            name,
            help=help_text,
            description=module.__doc__,
            epilog="example:\n  " + EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        if not any("--quiet" in a.option_strings for a in p._actions):
            p.add_argument("--quiet", action="store_true", help="no progress bars or status lines on stderr")
        p.set_defaults(run=_runner(name), sync=True, bench_name=name)
    return bench  # type: ignore[no-any-return]


def build_parser() -> argparse.ArgumentParser:
    """A parser with only the ``bench`` command (for ``python -m bench.cli``)."""
    parser = argparse.ArgumentParser(prog="adamem", description="AdaMem Stream benchmarks")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.cli bench locomo …`` (or without the leading ``bench``)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0] != "bench":
        args_list = ["bench", *args_list]
    args = build_parser().parse_args(args_list)
    args.bench_argv = args_list[1:]
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
