"""Building memory the way users do: publish to a log, then analyze + project in-process (``run_pipeline``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import adamem
from adamem.analysis.agent import MemoryAgent
from adamem.events import ChatMessage
from adamem.progress import Progress
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import PipelineStats, pending_work, run_pipeline
from adamem.streams.publish import publish_messages
from bench.common import git_commit

__all__ = ["STAMP", "Built", "build_code", "build_memory", "built_by", "stamp_build"]

STAMP = "built.json"
"""Beside a store a benchmark built (``WORK/built.json``): the code that built it."""

_QUERY_SIDE = frozenset({"retrieval", "api", "integrations", "cli"})
_SOURCES = frozenset({".py", ".avsc", ".toml", ".jsonl"})


@dataclass(frozen=True)
class Built:
    """What a build did and how long each step took."""

    messages: int
    publish_s: float
    pipeline_s: float
    stats: PipelineStats


async def _build(messages: Sequence[ChatMessage], settings: Settings, agent: MemoryAgent) -> Built:
    log = open_log(settings.log_url, settings)
    await log.start()
    store = open_store(settings.store)
    quiet, every = not settings.progress, settings.progress_seconds
    try:
        t0 = time.perf_counter()
        with Progress("build: publish", len(messages), unit="msg", quiet=quiet, every=every) as bar:
            await publish_messages(log, messages, settings, progress=bar.update)
        t1 = time.perf_counter()
        store.bind(log.partitions(settings.topic("analyses")))
        total = await pending_work(log, store, settings)
        with Progress("build: analyse and fold", total, unit="step", quiet=quiet, every=every) as bar:
            stats = await run_pipeline(log, Projector(store), agent, settings, progress=bar.update)
        t2 = time.perf_counter()
    finally:
        store.close()
        await log.stop()
    return Built(len(messages), t1 - t0, t2 - t1, stats)


def build_memory(messages: Sequence[ChatMessage], settings: Settings, agent: MemoryAgent) -> Built:
    """Publish ``messages`` to ``settings.log_url`` and run the in-process pipeline into ``settings.store_url``.

    A store in a local folder is stamped with the code that built it (``stamp_build``), beside it."""
    built = asyncio.run(_build(messages, settings, agent))
    folder = settings.store.folder
    if folder is not None:
        stamp_build(folder.parent)
    return built


def build_code() -> str:
    """A fingerprint of the code that makes a store's rows: every source file of the ``adamem`` package
    except the query side's (retrieval, the HTTP API, the integrations, the command line)."""
    root = Path(adamem.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _SOURCES and p.is_file()):
        rel = path.relative_to(root)
        if rel.parts[0] not in _QUERY_SIDE:
            digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def stamp_build(work: str | Path) -> None:
    """Write ``work/built.json``: the fingerprint of the code that built the store there, and its commit."""
    Path(work, STAMP).write_text(json.dumps({"code": build_code(), "git": git_commit()}) + "\n")


def built_by(work: str | Path) -> dict[str, Any]:
    """The stamp of the store in ``work`` and ``same_code``: whether this code builds the same rows (None: a
    store without a stamp, built by code of unknown age). A store built by other code is a store of other
    rows: a figure measured on it is not this code's."""
    try:
        stamp = json.loads(Path(work, STAMP).read_text())
    except FileNotFoundError:
        return {"same_code": None}
    return {**stamp, "same_code": stamp.get("code") == build_code()}
