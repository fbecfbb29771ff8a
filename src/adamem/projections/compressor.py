"""The compressor: clusters of an owner's episodic event records distilled into ``MemoryCompressed`` events.

It reads rows and proposes events; it writes nothing. ``propose`` groups the owner's ACTIVE event
records by speaker and activity (``lexicon.activity_of``: "went jogging" and "went for a run" are
both ``running``; 跑步 and 夜跑 too) — and, with ``compression_by_topic``, the rest by speaker and
the first topic of their message — keeps the groups of at least ``compression_min_records`` records
spanning at least ``compression_min_span_days`` of event time, and asks a ``Compressor`` for the
text of each. The rules compressor (the default, deterministic, no model) writes the time span, the
count, the rhythm and the most representative contents — the medoid of the records' vectors, then
the records least like those already chosen — in the records' language:

    March–May 2023: running, 5 times (about every 2 weeks): ran 5 km after work; joined a running club
    2023年3月至5月：跑步5次（约每2周一次）：下班后跑了5公里；参加了跑步俱乐部

A compressor backed by a language model plugs in through the same ``Compressor`` protocol (its
``name`` and ``version`` are recorded on the event), since the event carries the text: replay folds
what was recorded and calls no model.

Ids are derived from the owner, the compressor and the source record ids, so proposing the same
cluster twice gives the same event (folded once). ``occurred_at`` is the latest source record's
event time.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from adamem.analysis.timeexpr_zh import has_cjk
from adamem.events import NAMESPACE, MemoryCompressed
from adamem.owners import split_owner
from adamem.projections.folds.lexicon import ACTIVITY_LABELS_ZH, activity_of, normalize
from adamem.projections.folds.params import DAY_MS, SEED_DEFAULT, MemoryParameters
from adamem.projections.folds.rows import EpisodicRow, float32_vector

__all__ = ["RULES", "Cluster", "Compressor", "RuleCompressor", "clusters_of", "compression_event_id", "propose"]

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass(frozen=True, slots=True)
class Cluster:
    """Related records of one owner: same speaker and activity, oldest first, with their times."""

    owner_id: str
    key: str  # the activity label
    records: tuple[EpisodicRow, ...]
    times: tuple[int, ...]  # per record: its event time, else when it was said

    @property
    def chinese(self) -> bool:
        """Whether most of the records are in Chinese (the summary is written in their language)."""
        return sum(has_cjk(r.content) for r in self.records) * 2 > len(self.records)


class Compressor(Protocol):
    """Writes the text of a cluster's summary; its name and version go on the event."""

    @property
    def name(self) -> str:
        """Recorded on the event as ``compressor``."""
        ...

    @property
    def version(self) -> str:
        """Recorded on the event as ``compressor_version``."""
        ...

    def distil(self, cluster: Cluster, excerpts: int) -> str:
        """The summary of ``cluster`` quoting at most ``excerpts`` of its records."""
        ...


def _when(r: EpisodicRow) -> int:
    return r.event_time if r.event_time >= 0 else r.occurred_at


def _month(ms: int) -> tuple[int, int]:
    d = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return d.year, d.month


def span_text(first: int, last: int, *, chinese: bool) -> str:
    """'March–May 2023' / '2023年3月至5月' of two event times."""
    (y0, m0), (y1, m1) = _month(first), _month(last)
    if chinese:
        if (y0, m0) == (y1, m1):
            return f"{y0}年{m0}月"
        return f"{y0}年{m0}月至{m1}月" if y0 == y1 else f"{y0}年{m0}月至{y1}年{m1}月"
    if (y0, m0) == (y1, m1):
        return f"{_MONTHS[m0 - 1]} {y0}"
    if y0 == y1:
        return f"{_MONTHS[m0 - 1]}–{_MONTHS[m1 - 1]} {y0}"
    return f"{_MONTHS[m0 - 1]} {y0}–{_MONTHS[m1 - 1]} {y1}"


def rhythm_text(times: Sequence[int], *, chinese: bool) -> str:
    """How often: the mean gap between occurrences ('about every 2 weeks', '约每周3次')."""
    gap_days = (times[-1] - times[0]) / DAY_MS / max(1, len(times) - 1)
    if gap_days < 1.5:
        return "几乎每天" if chinese else "almost daily"
    if gap_days < 10:
        per_week = max(1, round(7 / gap_days))
        return f"约每周{per_week}次" if chinese else f"about {per_week} times a week"
    weeks = max(2, round(gap_days / 7))
    return f"约每{weeks}周一次" if chinese else f"about every {weeks} weeks"


def representatives(records: Sequence[EpisodicRow], k: int) -> list[EpisodicRow]:
    """Up to ``k`` records with distinct contents: the medoid of the vectors, then the least alike (ties by id)."""
    distinct: dict[str, EpisodicRow] = {}
    for r in sorted(records, key=lambda r: r.id):
        distinct.setdefault(normalize(r.content), r)
    pool = list(distinct.values())
    if not pool or k <= 0:
        return []

    def sim(a: EpisodicRow, b: EpisodicRow) -> float:
        return sum(x * y for x, y in zip(a.vector, b.vector, strict=False))

    chosen = [max(pool, key=lambda r: (sum(sim(r, o) for o in pool), r.id))]
    while len(chosen) < min(k, len(pool)):
        rest = [r for r in pool if r not in chosen]
        chosen.append(min(rest, key=lambda r: (max(sim(r, c) for c in chosen), r.id)))
    return sorted(chosen, key=lambda r: (_when(r), r.id))


@dataclass(frozen=True, slots=True)
class RuleCompressor:
    """The default compressor: span, count, rhythm and representative contents, without a model."""

    name: str = "rules"
    version: str = "1"

    def distil(self, cluster: Cluster, excerpts: int) -> str:
        """The summary of ``cluster`` in its records' language."""
        chinese, times, n = cluster.chinese, cluster.times, len(cluster.records)
        span = span_text(times[0], times[-1], chinese=chinese)
        rhythm = rhythm_text(times, chinese=chinese)
        quoted = [r.content.strip().rstrip("。.;；") for r in representatives(cluster.records, excerpts)]
        if chinese:
            label = ACTIVITY_LABELS_ZH.get(cluster.key, cluster.key)
            return f"{span}：{label}{n}次（{rhythm}）：" + "；".join(quoted)
        return f"{span}: {cluster.key}, {n} times ({rhythm}): " + "; ".join(quoted)


RULES = RuleCompressor()
"""The rules compressor (the default)."""


def clusters_of(
    owner_id: str,
    records: Iterable[EpisodicRow],
    params: MemoryParameters = SEED_DEFAULT,
    topics: Mapping[str, Sequence[str]] | None = None,
) -> list[Cluster]:
    """The owner's active event records grouped by speaker and activity, kept when large and long enough.

    With ``params.compression_by_topic`` and the topics of the records' messages (message event id →
    topics), the records no activity cluster took are grouped again by speaker and the first topic
    of their first message.
    """
    events = [r for r in records if r.type == "event" and r.status == "active"]
    by_activity: dict[tuple[str, str, str], list[EpisodicRow]] = defaultdict(list)
    for r in events:
        activity = activity_of(r.content)
        if activity:
            by_activity[(r.speaker_role, r.speaker, activity)].append(r)
    found = _kept(owner_id, by_activity, params)
    if params.compression_by_topic and topics is not None:
        taken = {r.id for c in found for r in c.records}
        by_topic: dict[tuple[str, str, str], list[EpisodicRow]] = defaultdict(list)
        for r in events:
            first = topics.get(r.source_message_ids[0], ()) if r.source_message_ids else ()
            if r.id not in taken and first:
                by_topic[(r.speaker_role, r.speaker, first[0])].append(r)
        found += _kept(owner_id, by_topic, params)
    return found


def _kept(
    owner_id: str, groups: Mapping[tuple[str, str, str], list[EpisodicRow]], params: MemoryParameters
) -> list[Cluster]:
    found: list[Cluster] = []
    for (_, _, label), rows in sorted(groups.items()):
        if len(rows) < params.compression_min_records:
            continue
        rows = sorted(rows, key=lambda r: (_when(r), r.id))
        times = tuple(_when(r) for r in rows)
        if times[-1] - times[0] < params.compression_min_span_days * DAY_MS:
            continue
        found.append(Cluster(owner_id, label, tuple(rows), times))
    return found


def compression_event_id(owner_id: str, compressor: Compressor, record_ids: Iterable[str]) -> str:
    """Deterministic id of the compression of these records by this compressor."""
    parts = ("cmp", owner_id, compressor.name, compressor.version, *sorted(record_ids))
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(parts)))


def _mean_vector(records: Sequence[EpisodicRow]) -> tuple[float, ...]:
    width = len(records[0].vector)
    if width == 0 or any(len(r.vector) != width for r in records):
        return ()
    mean = [sum(r.vector[i] for r in records) / len(records) for i in range(width)]
    norm = math.sqrt(sum(x * x for x in mean)) or 1.0
    return float32_vector(x / norm for x in mean)


def propose(
    owner_id: str,
    records: Iterable[EpisodicRow],
    params: MemoryParameters = SEED_DEFAULT,
    compressor: Compressor = RULES,
    topics: Mapping[str, Sequence[str]] | None = None,
) -> list[MemoryCompressed]:
    """The compression events of an owner's records (none when no cluster is large and long enough)."""
    tenant, user_id = split_owner(owner_id)
    events: list[MemoryCompressed] = []
    for cluster in clusters_of(owner_id, records, params, topics):
        rows = cluster.records
        messages = list(dict.fromkeys(m for r in rows for m in r.source_message_ids))
        events.append(
            MemoryCompressed(
                event_id=compression_event_id(owner_id, compressor, (r.id for r in rows)),
                tenant=tenant,
                user_id=user_id,
                key=cluster.key,
                content=compressor.distil(cluster, params.compression_excerpts),
                source_record_ids=tuple(r.id for r in rows),
                source_message_ids=tuple(messages),
                span_from=cluster.times[0],
                span_to=cluster.times[-1],
                occurred_at=max(r.occurred_at for r in rows),
                compressor=compressor.name,
                compressor_version=compressor.version,
                vector=_mean_vector(rows),
            )
        )
    return events
