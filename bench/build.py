"""Building memory the way users do: publish to a log, then analyze + project in-process (``run_pipeline``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from adamem.analysis.agent import MemoryAgent
from adamem.events import ChatMessage
from adamem.progress import Progress
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import PipelineStats, pending_work, run_pipeline
from adamem.streams.publish import publish_messages

__all__ = ["Built", "build_memory"]


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
    """Publish ``messages`` to ``settings.log_url`` and run the in-process pipeline into ``settings.store_url``."""
    return asyncio.run(_build(messages, settings, agent))
