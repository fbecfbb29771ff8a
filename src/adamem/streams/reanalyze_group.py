"""A reanalysis shared by a group of members on Kafka: the Memory Agent of a new generation on every worker.

``adamem reanalyze --group`` (``reanalyze(..., group=True)``) is the coordinator. It begins the
generation and its view as a reanalysis in one process does (the analyzer recorded in the view),
fixes the targets (the end offsets of the messages and control topics, per partition), records
them in the view as the job (``ReanalysisJob``), and waits until the new analyses topic accounts
for every input record below its target. It then folds that topic into the view, compares the
view with the active one and switches when asked, as a reanalysis in one process does.

``adamem worker --reanalyze VIEW`` is a member: the worker's ``analyze`` agent alone, with the
job's generation and analyzer (``create_app(..., analyze_only=True)``). Members form the consumer
group of that generation (the one its live workers use after a switch), so each partition is
analysed by one member at a time, in the transactions of the live worker: a partition's analyses
and the consumer offsets of its inputs are committed together, a member that lost the partition
is fenced, and its next owner resumes from what the analyses topic accounts for. No message is
analysed twice, and a member killed midway costs the batch it had not committed. A member leaves
once every partition of the job is analysed, whoever analysed it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adamem.errors import ConfigError, NotFound
from adamem.projections.store.ports import MemoryStore, ViewCatalog
from adamem.settings import Settings
from adamem.streams.log import EventLog
from adamem.streams.resume import resume_points

__all__ = ["KIND", "ReanalysisJob", "analysed_points", "open_reanalysis", "wait_for_members"]

logger = logging.getLogger("adamem.reanalyze")

KIND = "reanalysis"
"""The ``kind`` of a job a view records for a reanalysis (a rebuild's job has none)."""

POLL_S = 1.0
"""Seconds between two looks of the coordinator (and of a member) at the analyses topic's tails."""

_INPUTS = ("messages", "control")


@dataclass(frozen=True)
class ReanalysisJob:
    """A reanalysis that members share: the view, and per input topic the offset each partition is analysed to."""

    view: str
    targets: Mapping[str, Mapping[int, int]]
    """Input topic name (messages, control) -> partition -> next offset to account for."""

    def record(self) -> dict[str, Any]:
        """The job as the view records it (JSON)."""
        return {
            "kind": KIND,
            "targets": {t: {str(p): o for p, o in sorted(by.items())} for t, by in sorted(self.targets.items())},
        }

    @classmethod
    def of(cls, view: str, record: Mapping[str, Any]) -> ReanalysisJob:
        """The job a view recorded."""
        targets = {str(t): {int(p): int(o) for p, o in dict(by).items()} for t, by in dict(record["targets"]).items()}
        return cls(view, targets)

    @property
    def total(self) -> int:
        """Input records the job accounts for."""
        return sum(sum(by.values()) for by in self.targets.values())

    def partitions(self) -> list[int]:
        return sorted({p for by in self.targets.values() for p in by})

    def reached(self, points: Mapping[int, Mapping[str, int]]) -> int:
        """Input records below the targets that ``points`` (partition -> topic -> next offset) account for."""
        return sum(min(o, points.get(p, {}).get(t, 0)) for t, by in self.targets.items() for p, o in by.items())


async def analysed_points(log: EventLog, settings: Settings, partitions: list[int]) -> dict[int, dict[str, int]]:
    """Per partition, how far the analyses topic of ``settings``' generation accounts for each input topic."""
    return {p: await resume_points(log, settings, p) for p in partitions}


async def targets_of(log: EventLog, settings: Settings) -> dict[str, dict[int, int]]:
    """The end offsets of the input topics: what a reanalysis begun now accounts for."""
    return {settings.topic(kind): dict(await log.end_offsets(settings.topic(kind))) for kind in _INPUTS}


async def is_done(log: EventLog, settings: Settings, job: ReanalysisJob) -> bool:
    """Whether the analyses topic accounts for every input record below the job's targets."""
    return job.reached(await analysed_points(log, settings, job.partitions())) >= job.total


def open_reanalysis(views: ViewCatalog, view: str) -> tuple[ReanalysisJob, MemoryStore]:
    """The reanalysis job recorded in ``view`` and a reader of the view; clear errors for any other view."""
    if view not in views.views():
        raise NotFound(
            f"store {views.url} has no view {view!r} (views: {', '.join(views.views())}); "
            "`adamem reanalyze --group` begins one and prints its name"
        )
    store = views.open_view(view, read_only=True)
    record = store.rebuild_job()
    if record.get("kind") != KIND:
        what = "a group rebuild (`adamem worker --rebuild`)" if record else "no reanalysis"
        raise ConfigError(
            f"view {view!r} of {views.url} records {what}; `adamem reanalyze --group` begins a reanalysis "
            "for members to share"
        )
    if not store.generation():
        raise ConfigError(f"view {view!r} of {views.url} records no analysis generation to analyse with")
    return ReanalysisJob.of(view, record), store


async def wait_for_members(
    log: EventLog,
    settings: Settings,
    job: ReanalysisJob,
    *,
    progress: Callable[[int], None] | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Wait until members have analysed every input record of the job (``settings``: the job's generation)."""
    waiting = (
        f"view {job.view}: waiting for members to analyse {job.total} record(s) of {len(job.partitions())} "
        f"partition(s) into {settings.topic('analyses')}; start them with: adamem worker --reanalyze {job.view}"
    )
    logger.info("%s", waiting)
    if announce is not None:
        announce(waiting)
    seen = 0
    while True:
        reached = job.reached(await analysed_points(log, settings, job.partitions()))
        if reached > seen:
            if progress is not None:
                progress(reached - seen)
            seen = reached
        if reached >= job.total:
            return
        await asyncio.sleep(POLL_S)
