"""``adamem bench concurrency``: its options, the service's CPU read from /proc, and its Markdown table."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import pytest

from bench.cli import build_parser
from bench.concurrency import Config, markdown, parse_config, tree_cpu_seconds


def test_configurations_are_tree_and_processes() -> None:
    assert parse_config("new:2") == Config("new", 2)
    assert parse_config("old:1").label == "old×1"
    for bad in ("new", "mine:1", "new:0", "new:x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_config(bad)
    args = build_parser().parse_args(["bench", "concurrency", "--configs", "old:1", "new:2", "--clients", "1", "8"])
    assert args.configs == [Config("old", 1), Config("new", 2)] and args.clients == [1, 8]
    assert build_parser().parse_args(["bench", "concurrency"]).clients == [1, 2, 4, 8, 16]


def test_the_cpu_of_a_process_tree_counts_its_children() -> None:
    """A parent that only waits, and a child that computes: the tree's CPU is the child's work."""
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\ntime.sleep(30)"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {busy!r}])"]
    )
    try:
        seen = 0.0
        for _ in range(200):  # until the child is past 0.3 s of its 0.5 s of work (/proc counts in ticks)
            seen = tree_cpu_seconds(parent.pid)
            if seen >= 0.3:
                break
            time.sleep(0.1)
        assert seen >= 0.3
    finally:
        parent.kill()
        parent.wait()
    assert tree_cpu_seconds(parent.pid) == 0.0  # a process that is gone counts nothing


def test_the_markdown_table_names_the_command_and_every_phase() -> None:
    phase = {"p50": 30.0, "p95": 80.0, "p99": 90.0, "qps": 50.0, "errors": 0, "load": {"mean": 1.5}}
    run = {"config": "new×1", "tree": "new", "workers": 1, "clients": 8}
    doc = {
        "command": "adamem bench concurrency --clients 8",
        "git": {"commit": "abc"},
        "result": {
            "baseline_commit": "1b50de1",
            "load_generator": "wrk",
            "runs": [{**run, "cold": {**phase, "server_cpu_ms_per_question": 31.0}, "warm": phase}],
        },
    }
    text = markdown(doc)
    assert "`adamem bench concurrency --clients 8`" in text
    assert "| new×1 | 8 | cold | 30.0 | 80.0 | 90.0 | 50.0 | 31.0 |" in text
    assert "| new×1 | 8 | warm |" in text
