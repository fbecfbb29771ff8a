"""Read-your-writes: how far the messages of a partition are reflected in the store, read from the log.

A message at offset ``m`` of the messages topic is *visible* once the store has folded its
analysis (or once it was dead-lettered, which is all it will ever get). The pipeline says how far
it got on the log itself: every analyses record carries, in its ``adamem-resume`` header, the next
message offset below which every message of its partition is handled; and the store's
checkpoint names the analyses offset it has folded up to. So the record just below the
checkpoint says how far the messages are visible — whichever process projects (the in-process
follower of ``adamem serve``, ``adamem project``, or the Faust workers on Kafka).
"""

from __future__ import annotations

from adamem.projections.store.base import MemoryStore
from adamem.settings import Settings
from adamem.streams.log import EventLog
from adamem.streams.resume import accounted_by, resume_points

__all__ = ["visible_messages", "visible_offsets"]

_BACK = 16  # analyses records read below the checkpoint to find one that says how far it accounts


async def visible_offsets(log: EventLog, store: MemoryStore, settings: Settings, partition: int) -> dict[str, int]:
    """Per input topic (messages, control), the next offset of ``partition`` below which every record is in ``store``.

    ``settings`` are those of the store's active generation. Read in this order, so that no claim
    outruns what is folded: what the log's tails say is handled (analysed or dead-lettered), then
    the analyses topic's end, then the store's checkpoint. When the checkpoint is at that end,
    everything handled is folded; otherwise the records just below the checkpoint say how far.
    """
    topics = {settings.topic("messages"), settings.topic("control")}
    analyses = settings.topic("analyses")
    handled = await resume_points(log, settings, partition)
    end = (await log.end_offsets(analyses)).get(partition, 0)
    folded = store.checkpoint(partition).get(analyses, 0)
    if folded >= end:
        return {t: handled.get(t, 0) for t in topics}
    seen = dict.fromkeys(topics, 0)
    async for rec in log.read(analyses, from_offsets={partition: max(0, folded - _BACK)}, until={partition: folded}):
        for topic, offset in accounted_by(rec, topics).items():
            seen[topic] = max(seen[topic], offset)
    return {t: min(seen[t], handled.get(t, 0)) for t in topics}


async def visible_messages(log: EventLog, store: MemoryStore, settings: Settings, partition: int) -> int:
    """The next messages offset of ``partition`` below which every message is reflected in ``store``."""
    return (await visible_offsets(log, store, settings, partition))[settings.topic("messages")]
