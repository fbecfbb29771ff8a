"""``register`` adds ``adamem bench`` with its subcommands, following ``adamem.cli``'s conventions."""

from __future__ import annotations

import argparse

import pytest

from bench.cli import build_parser, register

BENCHMARKS = (
    "locomo",
    "research",
    "ingest",
    "replay",
    "replay_jobs",
    "reanalysis_group",
    "latency",
    "concurrency",
    "metrics_overhead",
    "footprint",
    "visible",
    "objectstore",
    "scale",
    "scaleout",
    "ui_render",
    "report",
)
"""Every ``adamem bench`` subcommand (tests/cli/test_friction.py asks each for an example too)."""


def test_register_adds_every_subcommand() -> None:
    parser = argparse.ArgumentParser(prog="adamem")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    for name in BENCHMARKS:
        args = parser.parse_args(["bench", name])
        assert args.sync is True and callable(args.run) and args.bench_name == name


def test_locomo_defaults_and_options() -> None:
    args = build_parser().parse_args(["bench", "locomo", "--data", "x.json", "--k", "1", "3"])
    assert args.data == "x.json" and args.k == [1, 3]
    args = build_parser().parse_args(["bench", "locomo"])
    assert args.k == [5, 10, 25] and args.data.endswith("locomo_dev.json")
    args = build_parser().parse_args(["bench", "ingest", "--log", "kafka://127.0.0.1:9092", "--messages", "10"])
    assert args.messages == 10 and args.owners == 50


def test_a_subcommand_is_required() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench"])
