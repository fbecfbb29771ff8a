"""``adamem worker``'s one-line status: partitions held, lag, events per second (stderr, periodically).

Faust's own output (its log lines and tables) goes to a log file instead (``--worker-log``), or
to the terminal with ``--verbose``. The lag is measured as ``/health`` measures it: analyses not
yet folded (the analyses topic's end against the store's checkpoints) and messages not yet
analysed (the input topics' ends against the analyses topic's), for the partitions this worker
holds; approximate, as there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from adamem.projections.store.base import MemoryStore
from adamem.settings import Settings
from adamem.streams.log import EventLog

__all__ = ["WorkerStatus", "worker_line"]


def worker_line(
    generation: str,
    held: list[int],
    partitions: int,
    to_analyse: int | None,
    to_fold: int | None,
    analyzed: int,
    folded: int,
    rate: float,
) -> str:
    """``worker g1: partitions 0,1 of 4 | lag 12 message(s) to analyse, 3 to fold | 34.1 ev/s (…)``."""
    shown = ",".join(map(str, held)) if held else "none yet (waiting for the group)"
    lag = "lag unknown" if to_analyse is None or to_fold is None else f"lag {to_analyse} to analyse, {to_fold} to fold"
    return (
        f"worker {generation}: partitions {shown} of {partitions} | {lag} | {rate:.1f} ev/s "
        f"(analysed {analyzed}, folded {folded} since start)"
    )


class WorkerStatus:
    """Makes the status line of a running worker from its app's counters, the log and the store."""

    def __init__(
        self,
        settings: Settings,
        counts: dict[str, int],
        held: set[int],
        log: EventLog,
        store: MemoryStore,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings, self.counts, self.held, self.log, self.store, self.clock = (
            settings,
            counts,
            held,
            log,
            store,
            clock,
        )
        self.started = False
        self.last_time = clock()
        self.last_total = 0

    async def lag(self, partitions: list[int]) -> tuple[int, int]:
        """(messages not yet analysed, analyses not yet folded) on these partitions."""
        if not self.started:
            await self.log.start()
            self.started = True
        topic = self.settings.topic
        analyses = await self.log.end_offsets(topic("analyses"))
        inputs = [await self.log.end_offsets(topic(kind)) for kind in ("messages", "control")]
        folded = {p: (await asyncio.to_thread(self.store.checkpoint, p)).get(topic("analyses"), 0) for p in partitions}
        to_analyse = sum(max(0, sum(e.get(p, 0) for e in inputs) - analyses.get(p, 0)) for p in partitions)
        to_fold = sum(max(0, analyses.get(p, 0) - folded[p]) for p in partitions)
        return to_analyse, to_fold

    async def line(self) -> str:
        """The status now; the rate is over the time since the previous line."""
        held = sorted(self.held)
        to_analyse: int | None
        to_fold: int | None
        try:
            to_analyse, to_fold = await self.lag(held)
        except Exception as exc:  # the status line never stops the worker; the log file has the cause
            logging.getLogger(__name__).warning("worker status: could not measure the lag: %s", exc)
            to_analyse = to_fold = None
        now, total = self.clock(), self.counts["analyzed"] + self.counts["folded"]
        rate = (total - self.last_total) / (now - self.last_time) if now > self.last_time else 0.0
        self.last_time, self.last_total = now, total
        partitions = self.log.partitions(self.settings.topic("messages")) if self.started else self.settings.partitions
        return worker_line(
            self.settings.generation,
            held,
            partitions,
            to_analyse,
            to_fold,
            self.counts["analyzed"],
            self.counts["folded"],
            rate,
        )

    async def close(self) -> None:
        """Stop the log client of the status line."""
        if self.started:
            await self.log.stop()
            self.started = False
