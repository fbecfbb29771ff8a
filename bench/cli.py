"""``adamem bench {locomo,ingest,replay,latency,footprint,report}``: the benchmarks of issue 6.

``register(subparsers)`` adds the ``bench`` command to the ``adamem`` parser; ``python -m adamem.bench.cli …``
runs the same commands on their own. Each subcommand prints a table and writes JSON under
``bench/results/``; ``report`` turns the latest JSON files into ``bench/results/README.md`` and plots.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["build_parser", "main", "register"]


def _runner(module: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        mod = importlib.import_module(f"adamem.bench.{module}")
        argv = getattr(args, "bench_argv", None)
        if argv is None:  # run from ``adamem bench …``: the words after "bench" (for the result's command line)
            words = sys.argv[1:]
            argv = words[words.index("bench") + 1 :] if "bench" in words else [module]
        return int(mod.execute(args, argv))

    return run


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``bench`` with its subcommands to an ``argparse`` subparsers object; returns the ``bench`` parser.

    Every subcommand sets ``run`` (a function of the parsed arguments returning an exit code) and
    ``sync=True``, the convention of ``adamem.cli``.
    """
    import adamem.bench.report as report
    from adamem.bench import HELP, footprint, ingest, latency, locomo, objectstore, replay, scale

    bench = subparsers.add_parser("bench", help=HELP)
    sub = bench.add_subparsers(dest="bench_command", required=True)
    parts: tuple[tuple[str, Any, str], ...] = (
        ("locomo", locomo, "evidence recall@k and answer coverage on LoCoMo, with ablations and flat baselines"),
        ("ingest", ingest, "end-to-end throughput through a real broker and worker vs. raw Kafka and the embedder"),
        ("replay", replay, "rebuild all layers from recorded analyses: events/s and ratio to live ingest"),
        ("latency", latency, "query latency per route, in-process and over HTTP with concurrent clients"),
        ("footprint", footprint, "disk per message per layer, process memory, vector index compression"),
        ("objectstore", objectstore, "commit and read latency a store on s3:// adds, against a local folder"),
        ("scale", scale, "query latency and memory as an owner and the owner count grow (synthetic rows)"),
        ("report", report, "write bench/results/README.md and the plots from the latest results"),
    )
    for name, module, help_text in parts:
        p = sub.add_parser(
            name, help=help_text, description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(p)
        p.set_defaults(run=_runner(name), sync=True, bench_name=name)
    return bench  # type: ignore[no-any-return]


def build_parser() -> argparse.ArgumentParser:
    """A parser with only the ``bench`` command (for ``python -m adamem.bench.cli``)."""
    parser = argparse.ArgumentParser(prog="adamem", description="AdaMem Stream benchmarks")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m adamem.bench.cli bench locomo …`` (or without the leading ``bench``)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0] != "bench":
        args_list = ["bench", *args_list]
    args = build_parser().parse_args(args_list)
    args.bench_argv = args_list[1:]
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
