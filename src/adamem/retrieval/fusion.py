"""Fusion: ``score = w_sem·semantic + w_graph·graph + w_temp·temporal + w_fact·fact_support``.

Every component lies in [0, 1] and is returned with the score:

- semantic: base-retrieval relevance (``retrieval.base``);
- graph: the best graph-expansion score reaching the item from another seed (0 if none);
- temporal: with time expressions in the question ("last week", 上个月), resolved against the
  reference time the caller passes (the owner's clock, never a wall clock), 1 inside a named
  period and halving per period length outside it; for a "why" ("after") question, 1 for items
  no later (no earlier) than the event it is about — the best base hit — since a cause comes
  before its effect, or said in the same conversation as it; otherwise recency — halving every
  ``recency_half_life_days`` before the reference time — but only for questions about the present
  ("now", "currently", "still", 现在, 目前, 最近 …; never on antecedent walks: a cause is older
  than what it explains). Elsewhere recency is noise: on LoCoMo it cost 2 points of recall@10;
  superseded records already keep stale facts out;
- fact support: supporting records / persona evidence, ``min(n, cap) / cap``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from adamem.analysis.timecalc import add_months, day_ms
from adamem.analysis.timeexpr import find_time_expressions
from adamem.projections.folds.params import DAY_MS
from adamem.projections.folds.rows import EpisodicRow, MessageRow, PersonaRow
from adamem.retrieval.config import Direction, FusionWeights, RetrievalConfig
from adamem.retrieval.snapshot import MemoryRow, View

__all__ = [
    "PRESENT",
    "Breakdown",
    "TimeWindow",
    "fact_support",
    "fuse",
    "item_times",
    "temporal_score",
    "time_windows",
]

_EPOCH = dt.date(1970, 1, 1)

PRESENT = re.compile(
    r"\b(?:now|currently|current|these\s+days|nowadays|lately|recently|still|at\s+the\s+moment|anymore|latest)\b"
    r"|现在|目前|最近|如今|近来|这些天|还在|仍然|最新",
    re.I,
)
"""Questions about the present: only these get a recency score when they name no time."""


@dataclass(frozen=True, slots=True)
class Breakdown:
    """The four components of a final score, each in [0, 1]."""

    semantic: float = 0.0
    graph: float = 0.0
    temporal: float = 0.0
    fact: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """JSON-ready form, rounded to 6 places."""
        return {
            "semantic": round(self.semantic, 6),
            "graph": round(self.graph, 6),
            "temporal": round(self.temporal, 6),
            "fact": round(self.fact, 6),
        }


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A period a question names: ``[start, end)`` in ms, and the expression it came from."""

    start: int
    end: int
    text: str


def fuse(parts: Breakdown, weights: FusionWeights) -> float:
    """The weighted sum of the components."""
    return (
        weights.semantic * parts.semantic
        + weights.graph * parts.graph
        + weights.temporal * parts.temporal
        + weights.fact * parts.fact
    )


def time_windows(question: str, reference_time: int) -> tuple[TimeWindow, ...]:
    """Periods named in the question, resolved against ``reference_time`` (the owner's clock)."""
    if reference_time < 0:
        return ()
    out = []
    for expr in find_time_expressions(question, reference_time):
        day = _EPOCH + dt.timedelta(days=expr.when // DAY_MS)
        if expr.granularity == "day":
            end = expr.when + DAY_MS
        elif expr.granularity == "week":
            end = expr.when + 7 * DAY_MS
        elif expr.granularity == "month":
            end = day_ms(add_months(day, 1))
        else:
            end = day_ms(add_months(day, 12))
        out.append(TimeWindow(expr.when, end, expr.text))
    return tuple(out)


def item_times(row: MemoryRow, memo: dict[tuple[str, str], tuple[int, ...]] | None = None) -> tuple[int, ...]:
    """Event times an item stands for: when it was said, and any time it reports.

    ``memo``: the snapshot's (``OwnerSnapshot.times_memo``); a row's times are read from its
    extraction once per snapshot, not once per question.
    """
    if memo is None:
        return _item_times(row)
    key = (row.TABLE, row.id)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _item_times(row)
    return found


def _item_times(row: MemoryRow) -> tuple[int, ...]:
    if isinstance(row, EpisodicRow):
        return (row.event_time, row.occurred_at) if row.event_time >= 0 else (row.occurred_at,)
    if isinstance(row, PersonaRow):
        return tuple(row.evidence_times) or (row.last_seen,)
    times = [row.occurred_at]
    if '"when":' in row.extraction_json:
        for event in json.loads(row.extraction_json).get("events", ()):
            if event.get("when") is not None:
                times.append(int(event["when"]))
    return tuple(times)


def temporal_score(
    times: Sequence[int],
    windows: Sequence[TimeWindow],
    now: int,
    config: RetrievalConfig,
    recency: bool = True,
    anchor: int | None = None,
    direction: Direction = Direction.ANY,
    beside_anchor: bool = False,
) -> float:
    """Time match with the question's periods; else the side of ``anchor`` for a directed question; else recency.

    ``anchor`` is the time of the event a "why" / "after" question is about (the best base hit):
    an antecedent question scores 1 for items no later than the day after it (an anchor's reported
    time is the start of the day or week it names), a consequent one for items no
    earlier, 0 otherwise — and 1 for items ``beside_anchor`` (said in the anchor's conversation:
    people give the reason right after what it explains). Recency applies only when ``recency`` is set.
    """
    if not times:
        return 0.0
    if windows:
        best = 0.0
        for w in windows:
            span = max(w.end - w.start, DAY_MS)
            for t in times:
                if w.start <= t < w.end:
                    return 1.0
                gap = w.start - t if t < w.start else t - w.end
                best = max(best, 0.5 ** (gap / span))
        return best
    if anchor is not None and direction is Direction.ANTECEDENT:  # a reported time is a day's (or a week's) start
        return 1.0 if beside_anchor or min(times) < anchor + DAY_MS else 0.0
    if anchor is not None and direction is Direction.CONSEQUENT:
        return 1.0 if beside_anchor or max(times) >= anchor else 0.0
    if now < 0 or not recency:
        return 0.0
    half_life = config.recency_half_life_days * DAY_MS
    return max(float(0.5 ** (max(0, now - t) / half_life)) for t in times)


def fact_support(row: MemoryRow, view: View, config: RetrievalConfig) -> float:
    """Share of ``fact_support_cap`` reached by the records / persona evidence backing an item.

    In the current view (no "as of") the count depends on the snapshot alone: it is kept in ``support_memo``.
    """
    cap = max(1, config.fact_support_cap)
    if view.as_of is not None:
        return min(_support(row, view), cap) / cap
    memo = view.snapshot.support_memo
    key = (row.TABLE, row.id)
    n = memo.get(key)
    if n is None:
        n = memo[key] = _support(row, view)
    return min(n, cap) / cap


def _support(row: MemoryRow, view: View) -> int:
    snap = view.snapshot
    if isinstance(row, MessageRow):
        records = [snap.records[r] for r in snap.records_of_message.get(row.id, ())]
        traits = [snap.traits[t] for t in snap.traits_of_message.get(row.id, ())]
        n = sum(view.record(r) for r in records) + sum(view.trait(t) for t in traits)
    elif isinstance(row, EpisodicRow):
        n = _visible_messages(row.source_message_ids, view)
    else:
        n = len(view.evidence(row)) if row.evidence_message_ids else row.mention_count
    return n


def _visible_messages(ids: Iterable[str], view: View) -> int:
    ids = list(ids)
    seen = view.visible_messages(ids)
    return sum(1 for i in ids if i in seen)
