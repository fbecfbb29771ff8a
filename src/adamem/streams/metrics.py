"""The worker's consumer lag: how far each assigned topic partition is behind the end of the log.

The Faust agents tell ``ConsumerPositions`` every offset they handled and every assignment; a timer
of the worker calls ``refresh`` with a log reader, which reads the ends of the topics and sets
``adamem_consumer_lag_events{topic, partition}``. A partition with no event handled yet in this
assignment counts from ``start`` (the worker's own record of progress: the store's checkpoint for
the analyses topic, the analyses' ``adamem-resume`` headers for the input topics), so a caught-up
worker that receives nothing reports no lag.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from adamem import metrics
from adamem.streams.log import EventLog

__all__ = ["ConsumerPositions"]


class ConsumerPositions:
    """Next offset to handle per (topic, partition) assigned to this worker."""

    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}
        self.assigned: set[tuple[str, int]] = set()

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """A new assignment (a rebalance): lag is reported for these partitions only."""
        metrics.REBALANCES.inc()
        old = self.assigned
        self.assigned = set(partitions)
        for topic, partition in old - self.assigned:
            metrics.CONSUMER_LAG.remove(topic, str(partition))
            self.next.pop((topic, partition), None)

    def handled(self, topic: str, partition: int, offset: int) -> None:
        """An event at ``offset`` was handled (analysed, forwarded, dead-lettered, folded or skipped)."""
        key = (topic, partition)
        if offset + 1 > self.next.get(key, 0):
            self.next[key] = offset + 1

    async def refresh(
        self, reader: EventLog, start: Callable[[str, int], Awaitable[int]]
    ) -> dict[tuple[str, int], int]:
        """Read the ends of the assigned topics and set the lag gauges; returns the lag."""
        lag: dict[tuple[str, int], int] = {}
        for topic in sorted({t for t, _ in self.assigned}):
            ends = await reader.end_offsets(topic)
            for t, partition in sorted(self.assigned):
                if t != topic:
                    continue
                if (t, partition) not in self.next:
                    self.next[(t, partition)] = await start(t, partition)
                lag[(t, partition)] = max(0, ends.get(partition, 0) - self.next[(t, partition)])
                metrics.CONSUMER_LAG.labels(t, str(partition)).set(lag[(t, partition)])
        return lag
