"""The resume-header protocol: how far the analyser got, written on the log itself.

Every record the analyse step writes says how far the input topics of its partition are handled
once it is on the log, so a runner (the in-process pipeline, a Faust worker, whoever takes a
partition over) resumes from the log's tail and no separate state can drift from it:

``adamem-resume`` (``RESUME_HEADER``)
    On every analyses record and every dead letter: compact JSON ``{"<input topic>": next
    offset}`` of that record's partition — every record of that topic below the offset is handled
    (analysed, forwarded, dead-lettered, or skipped as analysed already). Made by
    ``resume_header``, read by ``parse_resume``. A dead letter of the fold names the analyses
    offset after it instead (``dead_lettered_below``).
``adamem-for`` (``FOR_HEADER``)
    On the analyser's dead letters: the analyses topic (the generation) whose progress their
    ``adamem-resume`` is, so each generation resumes past its own dead letters only.
``adamem-source`` (``SOURCE_HEADER``)
    On analyses and dead letters: ``topic:partition:offset`` of the record each came from
    (``source_of``). Logs written before ``adamem-resume`` existed are resumed from it.

``resume_points`` reads the tails and returns where to go on; ``ResumeTracker`` computes the
points a batch's records carry as they are handled. Any client can read the headers: they are
plain JSON and text, and this module imports neither the Memory Agent nor a log adapter.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping

from adamem.settings import Settings
from adamem.streams.log import EventLog, LogRecord

__all__ = [
    "FOR_HEADER",
    "RESUME_HEADER",
    "SOURCE_HEADER",
    "ResumeTracker",
    "accounted_by",
    "dead_lettered_below",
    "parse_resume",
    "resume_header",
    "resume_points",
    "source_of",
]

RESUME_HEADER = "adamem-resume"
"""On analyses records and dead letters: JSON ``{input topic: next offset handled}`` of their partition."""
FOR_HEADER = "adamem-for"
"""On the analyser's dead letters: the analyses topic (generation) whose progress their ``adamem-resume`` is."""
SOURCE_HEADER = "adamem-source"
"""On analyses records and dead letters: ``topic:partition:offset`` of the record they came from."""


def source_of(rec: LogRecord) -> bytes:
    """The ``adamem-source`` header value naming a record's position: ``topic:partition:offset``."""
    return f"{rec.topic}:{rec.partition}:{rec.offset}".encode()


def resume_header(points: Mapping[str, int]) -> bytes:
    """The ``adamem-resume`` header value: compact JSON with sorted keys, any client can read it."""
    return json.dumps(dict(sorted(points.items())), separators=(",", ":")).encode()


def parse_resume(value: bytes | None) -> dict[str, int] | None:
    """The points of an ``adamem-resume`` header value; None when missing or not one to trust.

    Trusted is a JSON object whose every value is a whole number of at least 0: one bad entry
    makes the whole header vouch for nothing (a point too high would lose records).
    """
    if value is None:
        return None
    try:
        data = json.loads(value)
    except ValueError:  # also undecodable UTF-8
        return None
    if not isinstance(data, dict):
        return None
    points: dict[str, int] = {}
    for topic, offset in data.items():
        if type(offset) is not int or offset < 0:
            return None
        points[topic] = offset
    return points


def accounted_by(rec: LogRecord, wanted: set[str], *, sources: bool = True) -> dict[str, int]:
    """Next input offsets of the ``wanted`` topics that one record accounts for.

    Its ``adamem-resume`` header when it has one: that covers both input topics, and it supersedes
    the record's own source (which is handled, but in arrival order an earlier offset of the same
    topic may not be). A record written before that header counts, with ``sources``, through its
    ``adamem-source``: the offset after the one it came from.
    """
    found: dict[str, int] = {}
    for name, value in rec.headers:
        if name == RESUME_HEADER and (points := parse_resume(value)) is not None:
            return {topic: offset for topic, offset in points.items() if topic in wanted}
        if name == SOURCE_HEADER and sources:
            topic, _, offset = value.decode().rpartition(":")
            topic = topic.rpartition(":")[0]
            if topic in wanted:
                found[topic] = max(found.get(topic, 0), int(offset) + 1)
    return found


async def _claims(
    log: EventLog, topic: str, partition: int, wanted: set[str], accept: Callable[[LogRecord], bool], sources: bool
) -> dict[str, int]:
    """The highest next offset of each ``wanted`` topic that the newest accepted records of ``topic`` claim.

    The newest record is read first; the scan goes further back, in windows four times wider each
    time, only until every wanted topic is accounted for (or the partition's start).
    """
    end = (await log.end_offsets(topic)).get(partition, 0)
    found: dict[str, int] = {}
    window = 1
    start = end
    while start > 0 and not wanted <= found.keys():
        stop, start = start, max(0, end - window)  # each record is read once
        async for rec in log.read(topic, from_offsets={partition: start}, until={partition: stop}):
            if accept(rec):
                for name, offset in accounted_by(rec, wanted, sources=sources).items():
                    found[name] = max(found.get(name, 0), offset)
        window = 256 if window == 1 else window * 4
    return found


async def resume_points(log: EventLog, settings: Settings, partition: int) -> dict[str, int]:
    """Next message/control offsets to analyze, from the headers at the analyses and dead-letter tails.

    The newest analysis is read first: its ``adamem-resume`` header accounts for both input topics,
    so resuming costs one record however long the log is. Only a log whose tail was written
    before that header is read further back, in windows four times wider each time, until both
    input topics are accounted for (by either header); one whose owners never had a control
    event forwarded is then read to its start (once per caller, who keeps the result). The
    dead letters this generation wrote on the partition count the same way (their
    ``adamem-resume`` header only), so a partition whose last records were dead-lettered is not
    read, nor dead-lettered, again. Every header's claim is a lower bound of what is handled, so
    the highest one read is taken.
    """
    analyses = settings.topic("analyses")
    wanted = {settings.topic("messages"), settings.topic("control")}
    found = await _claims(log, analyses, partition, wanted, lambda rec: True, sources=True)
    mine = analyses.encode()

    def for_this_generation(rec: LogRecord) -> bool:
        return dict(rec.headers).get(FOR_HEADER) == mine

    dead = await _claims(log, settings.topic("deadletter"), partition, wanted, for_this_generation, sources=False)
    for topic, offset in dead.items():
        found[topic] = max(found.get(topic, 0), offset)
    return found


async def dead_lettered_below(log: EventLog, settings: Settings, topic: str, partition: int) -> int:
    """How far the records of ``topic`` (read in offset order, like the analyses) are dead-lettered.

    The newest dead letter of that topic and partition says so in its ``adamem-resume`` header:
    every record below it that had to be dead-lettered was.
    """
    found = await _claims(log, settings.topic("deadletter"), partition, {topic}, lambda rec: True, sources=False)
    return found.get(topic, 0)


class ResumeTracker:
    """How far each input topic of one partition is accounted for, as its records are handled.

    A record is handled once it is analysed, forwarded, dead-lettered, or skipped as already
    analysed. A topic's point is one past its highest handled offset, but never past a record
    that the caller said is waiting and that is not handled yet: the runners handle messages
    and control events in arrival (timestamp) order, and append times need not rise with offsets,
    so a record handled early must not vouch for an earlier one still to come. A point too low
    only costs work again; one too high would lose the records below it.
    """

    def __init__(self, start: Mapping[str, int], waiting: Iterable[tuple[str, int]] = ()) -> None:
        self._upto = dict(start)
        self._waiting: dict[str, deque[int]] = {}
        by_topic: dict[str, list[int]] = {}
        for topic, offset in waiting:
            by_topic.setdefault(topic, []).append(offset)
        for topic, offsets in by_topic.items():
            self._waiting[topic] = deque(sorted(offsets))
        self._early: set[tuple[str, int]] = set()  # handled while a lower waiting offset is not

    def handled(self, topic: str, offset: int) -> None:
        """Record that the record at ``offset`` of ``topic`` is handled."""
        self._upto[topic] = max(self._upto.get(topic, 0), offset + 1)
        queue = self._waiting.get(topic)
        if queue:
            self._early.add((topic, offset))
            while queue and (topic, queue[0]) in self._early:
                self._early.discard((topic, queue.popleft()))

    def points(self) -> dict[str, int]:
        """Next offset per input topic below which every record is handled."""
        out = dict(self._upto)
        for topic, queue in self._waiting.items():
            if queue:
                out[topic] = min(out.get(topic, 0), queue[0])
        return out
