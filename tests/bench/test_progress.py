"""Benchmarks that build memory show how far the build is, on stderr; ``--quiet`` (ADAMEM_PROGRESS=false): not."""

from __future__ import annotations

import dataclasses
from importlib import resources

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.ingest import load_messages
from adamem.settings import Settings
from bench.build import build_memory
from bench.cli import build_parser
from tests.conftest import FlatEmbedder


def _messages(settings: Settings) -> list[object]:
    data = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
    return load_messages(data, settings, "sample_conversation.jsonl", "jsonl")  # type: ignore[return-value]


@pytest.mark.parametrize("shown", [True, False])
def test_building_memory_reports_each_step(settings: Settings, capsys: pytest.CaptureFixture[str], shown: bool) -> None:
    settings = dataclasses.replace(settings, progress=shown, progress_seconds=0.0)
    messages = _messages(settings)
    built = build_memory(messages, settings, MemoryAgent(RuleExtractor(), FlatEmbedder()))  # type: ignore[arg-type]
    assert built.stats.applied == len(messages) == 29
    err = capsys.readouterr().err
    if shown:
        assert "build: publish: 29/29 msg (100%)" in err
        assert "build: analyse and fold: 58/58 step (100%)" in err
    else:
        assert err == ""


@pytest.mark.parametrize("command", ["locomo", "ingest", "replay", "latency", "footprint"])
def test_every_benchmark_takes_quiet(command: str) -> None:
    args = build_parser().parse_args(["bench", command, "--quiet"])
    assert args.quiet is True
