"""Calendar arithmetic for resolving time expressions: pure functions of a reference day.

Days are ``datetime.date`` values; a resolved time is encoded as 00:00 UTC of its day (see
``adamem.analysis.timeexpr`` for the conventions).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Granularity",
    "Resolution",
    "TimeRule",
    "add_months",
    "day_month_recent",
    "day_ms",
    "month_recent",
    "period_start",
    "reference_day",
    "safe_date",
    "season_start",
    "shift",
    "weekday_recent",
]

Granularity = Literal["day", "week", "month", "year"]
Resolution = tuple[dt.date, Granularity] | None
_DAY_MS = 86_400_000
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


@dataclass(frozen=True, slots=True)
class TimeRule:
    """A compiled pattern and the function resolving one of its matches against a reference day."""

    pattern: re.Pattern[str]
    resolve: Callable[[re.Match[str], dt.date, bool], Resolution]


def reference_day(occurred_at: int, utc_offset_minutes: int = 0) -> dt.date:
    """The speaker's calendar day at ``occurred_at`` (ms since the epoch, UTC)."""
    days = (occurred_at + utc_offset_minutes * 60_000) // _DAY_MS
    return dt.date.fromordinal(_EPOCH_ORDINAL + days)


def day_ms(day: dt.date) -> int:
    """Milliseconds since the epoch of 00:00 UTC on ``day``."""
    return (day.toordinal() - _EPOCH_ORDINAL) * _DAY_MS


def safe_date(year: int, month: int, day: int) -> dt.date | None:
    """The date, or None when it does not exist (31 April, year 0)."""
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def add_months(day: dt.date, months: int) -> dt.date:
    """``day`` moved by ``months``, clamped to the end of the target month."""
    index = day.year * 12 + day.month - 1 + months
    year, month0 = divmod(index, 12)
    following = dt.date(year + (month0 + 1) // 12, (month0 + 1) % 12 + 1, 1)
    last = (following - dt.timedelta(days=1)).day
    return dt.date(year, month0 + 1, min(day.day, last))


def _monday(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=day.weekday())


def weekday_recent(ref: dt.date, weekday: int, future: bool) -> dt.date:
    """Nearest ``weekday`` (0 = Monday) strictly before (past) or strictly after (future) ``ref``."""
    if future:
        return ref + dt.timedelta(days=(weekday - ref.weekday() - 1) % 7 + 1)
    return ref - dt.timedelta(days=(ref.weekday() - weekday - 1) % 7 + 1)


def month_recent(ref: dt.date, month: int, future: bool) -> dt.date:
    """First day of the nearest ``month`` at or before (past) / at or after (future) ``ref``'s month."""
    if future:
        return dt.date(ref.year + (month < ref.month), month, 1)
    return dt.date(ref.year - (month > ref.month), month, 1)


def day_month_recent(ref: dt.date, month: int, day: int, future: bool) -> dt.date | None:
    """The nearest ``month``/``day`` at or before (past) / at or after (future) ``ref``."""
    this_year = safe_date(ref.year, month, day)
    if this_year is None:
        return safe_date(ref.year + (1 if future else -1), month, day)
    if future:
        return this_year if this_year >= ref else safe_date(ref.year + 1, month, day)
    return this_year if this_year <= ref else safe_date(ref.year - 1, month, day)


def shift(ref: dt.date, unit: str, n: int) -> tuple[dt.date, Granularity]:
    """``ref`` moved by ``n`` units (day/week/weekend/month/year; negative: the past), keeping the day."""
    if unit == "day":
        return ref + dt.timedelta(days=n), "day"
    if unit == "week":
        return ref + dt.timedelta(weeks=n), "week"
    if unit == "weekend":
        return _monday(ref) + dt.timedelta(days=5 + 7 * n), "day"
    if unit == "month":
        return add_months(ref, n), "month"
    return add_months(ref, 12 * n), "year"


def period_start(ref: dt.date, unit: str, offset: int, weekday: int | None = None) -> tuple[dt.date, Granularity]:
    """First day of the week/weekend/month/year ``offset`` periods from ``ref``'s, or that week's ``weekday``."""
    if unit == "week":
        monday = _monday(ref) + dt.timedelta(weeks=offset)
        if weekday is not None:
            return monday + dt.timedelta(days=weekday), "day"
        return monday, "week"
    if unit == "weekend":
        return _monday(ref) + dt.timedelta(days=5 + 7 * offset), "day"
    if unit == "month":
        return add_months(ref.replace(day=1), offset), "month"
    return dt.date(ref.year + offset, 1, 1), "year"


def season_start(ref: dt.date, name: str, which: str) -> dt.date:
    """First day of the ``last``/``this``/``next`` season ``name`` (northern hemisphere) relative to ``ref``."""
    starts = [dt.date(ref.year + k, _SEASONS[name], 1) for k in (-2, -1, 0, 1)]
    if which == "last":
        return max(s for s in starts if add_months(s, 3) <= ref)
    if which == "next":
        return min(s for s in starts if s > ref)
    current = [s for s in starts if s <= ref < add_months(s, 3)]
    return current[0] if current else min(s for s in starts if s > ref)
