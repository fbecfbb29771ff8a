"""Find time expressions in English and Chinese text and resolve them against ``occurred_at``.

Resolution is a pure function of the text and the message's ``occurred_at``; there is no clock.

Conventions:

- The reference day is the calendar day of ``occurred_at`` shifted by ``utc_offset_minutes``
  (the speaker's local day; default 0 = UTC). A resolved time is the **start of a calendar day,
  encoded as 00:00 UTC of that day**, in ms since the epoch: "yesterday" said at any time on
  2024-04-01 resolves to 2024-03-31T00:00Z, whatever the offset.
- Periods resolve to their first day: a week to its Monday (weeks run Monday–Sunday), a weekend
  to its Saturday, a month to its 1st, a year to 1 January, a season to its first month
  (northern hemisphere: spring March, summer June, autumn September, winter December).
- "N units ago" (三天前, "two weeks ago") keeps the day: the reference day minus N units, with
  ``granularity`` saying how precise that is. "a few"/几 count as 3, "a couple" as 2, 半年 as 6
  months, 半个月 as 15 days.
- "last Friday" is the most recent Friday strictly before the reference day; "this Friday" (这周五)
  the Friday of the current week; "next Friday" (下周五) the Friday of the next week; 上周五 the
  Friday of the previous week. A bare weekday, month or day-month ("on Wednesday", "in May",
  5月8日) points to the past unless the text reads as future (will, going to, 打算, 下周 …).
- Recurring expressions ("every Wednesday", "on Sundays", 每周三) are not resolved.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from adamem.analysis import timeexpr_zh
from adamem.analysis.timecalc import (
    Granularity,
    Resolution,
    TimeRule,
    day_month_recent,
    day_ms,
    month_recent,
    period_start,
    reference_day,
    safe_date,
    season_start,
    shift,
    weekday_recent,
)

__all__ = ["TimeExpression", "find_time_expressions", "reads_as_future"]


@dataclass(frozen=True, slots=True)
class TimeExpression:
    """A time expression found in a text: its span, the day it resolves to, and how precise that is."""

    text: str
    start: int
    end: int
    when: int
    granularity: Granularity


_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_WEEKDAYS = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3, "several": 3,
}  # fmt: skip
_DAY_WORDS = {
    "the day before yesterday": -2, "the day after tomorrow": 2, "yesterday": -1, "last night": -1,
    "today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0, "this evening": 0,
    "earlier today": 0, "tomorrow": 1,
}  # fmt: skip

_MON_NAMES = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_MON = rf"({_MON_NAMES})\.?"
_WD_FULL = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_WD_ANY = r"(mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?|sat(?:urday)?|sunday)"
_NUM = (
    r"(\d{1,3}|a\s+couple(?:\s+of)?|couple(?:\s+of)?|a\s+few|few|several|an?|one|two|three|four|five|six"
    r"|seven|eight|nine|ten|eleven|twelve)"
)
_ORD = r"(?:st|nd|rd|th)?"
_FUTURE = re.compile(
    r"\b(?:will|shall|gonna|going\s+to|plan(?:ning)?\s+to|hop(?:e|ing)\s+to|about\s+to|looking\s+forward"
    r"|can't\s+wait|upcoming|coming\s+up|tomorrow|next)\b|\w'll\b",
    re.I,
)


def reads_as_future(text: str) -> bool:
    """Whether ``text`` talks about the future (decides the direction of bare weekdays and months)."""
    return bool(_FUTURE.search(text)) or timeexpr_zh.reads_as_future(text)


def _month(token: str) -> int | None:
    if token == "may":  # the modal verb, not the month
        return None
    return _MONTHS[token[:3].lower()]


def _count(token: str) -> int:
    token = " ".join(token.lower().split())
    if token.isdigit():
        return int(token)
    return _NUMBERS[token.removeprefix("a ").removesuffix(" of")]


def _iso(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    day = safe_date(int(m[1]), int(m[2]), int(m[3]))
    return None if day is None else (day, "day")


def _day_month_year(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    month = _month(m[2])
    day = None if month is None else safe_date(int(m[3]), month, int(m[1]))
    return None if day is None else (day, "day")


def _month_day_year(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    month = _month(m[1])
    day = None if month is None else safe_date(int(m[3]), month, int(m[2]))
    return None if day is None else (day, "day")


def _month_day(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    month = _month(m[1])
    day = None if month is None else day_month_recent(ref, month, int(m[2]), future)
    return None if day is None else (day, "day")


def _day_month(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    month = _month(m[2])
    day = None if month is None else day_month_recent(ref, month, int(m[1]), future)
    return None if day is None else (day, "day")


def _month_year(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    month = _month(m[1])
    day = None if month is None else safe_date(int(m[2]), month, 1)
    return None if day is None else (day, "month")


def _in_year(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return dt.date(int(m[1]), 1, 1), "year"


def _in_month(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    month = _month(m[1])
    return None if month is None else (month_recent(ref, month, future), "month")


def _day_word(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return ref + dt.timedelta(days=_DAY_WORDS[" ".join(m[0].lower().split())]), "day"


def _relative_weekday(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    which, weekday = " ".join(m[1].lower().split()), _WEEKDAYS[m[2][:3].lower()]
    if which in ("last", "this past"):
        return weekday_recent(ref, weekday, False), "day"
    if which in ("coming", "this coming"):
        return weekday_recent(ref, weekday, True), "day"
    return period_start(ref, "week", 1 if which == "next" else 0, weekday)


def _relative_period(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    which, unit = " ".join(m[1].lower().split()), m[2].lower()
    which = {"this past": "last", "earlier this": "this", "later this": "this", "this coming": "next"}.get(which, which)
    if unit in ("week", "weekend", "month", "year"):
        return period_start(ref, unit, {"last": -1, "this": 0, "next": 1}[which])
    if unit in ("spring", "summer", "autumn", "fall", "winter"):
        return season_start(ref, unit, which), "month"
    month = _month(m[2])
    if month is None:
        return None
    if which == "last":
        return dt.date(ref.year - (month >= ref.month), month, 1), "month"
    if which == "next":
        return dt.date(ref.year + (month <= ref.month), month, 1), "month"
    return dt.date(ref.year, month, 1), "month"


def _ago(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    sign = 1 if m[3].lower().startswith("from") else -1
    return shift(ref, m[2].lower(), sign * _count(m[1]))


def _in_n(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return shift(ref, m[2].lower(), _count(m[1])) if future else None


def _the_unit_before(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    unit = m[1].lower()
    if unit == "day":
        return ref - dt.timedelta(days=1), "day"
    return period_start(ref, unit, -1)


def _bare_weekday(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    if m[1] or m[3]:  # "every Wednesday", "on Sundays": recurring
        return None
    return weekday_recent(ref, _WEEKDAYS[m[2][:3].lower()], future), "day"


EN_RULES: tuple[TimeRule, ...] = (
    TimeRule(re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), _iso),
    TimeRule(re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MON},?\s+(\d{{4}})\b", re.I), _day_month_year),
    TimeRule(re.compile(rf"\b{_MON}\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})\b", re.I), _month_day_year),
    TimeRule(re.compile(rf"\b{_MON}\s+(\d{{1,2}}){_ORD}\b(?![:.]?\d)", re.I), _month_day),
    TimeRule(re.compile(rf"\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MON}\b", re.I), _day_month),
    TimeRule(re.compile(rf"\b{_MON},?\s+(\d{{4}})\b", re.I), _month_year),
    TimeRule(
        re.compile(
            r"\b(?:in|since|during|back\s+in|by|until|around|of|early|late|mid-?)\s+((?:19|20)\d\d)\b(?!-)", re.I
        ),
        _in_year,
    ),
    TimeRule(
        re.compile(rf"\b(?:in|since|during|back\s+in|early|late|mid-?|until|by)\s+{_MON}\b(?!\s*\d)", re.I), _in_month
    ),
    TimeRule(
        re.compile(
            r"\b(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|last\s+night|today|tonight"
            r"|this\s+morning|this\s+afternoon|this\s+evening|earlier\s+today|tomorrow)\b",
            re.I,
        ),
        _day_word,
    ),
    TimeRule(
        re.compile(rf"\b(last|this\s+past|this\s+coming|this|next|coming)\s+{_WD_ANY}\b\.?", re.I), _relative_weekday
    ),
    TimeRule(
        re.compile(
            r"\b(last|this\s+past|this\s+coming|earlier\s+this|later\s+this|this|next)\s+"
            rf"(week|weekend|month|year|summer|winter|spring|autumn|fall|{_MON_NAMES})\b",
            re.I,
        ),
        _relative_period,
    ),
    TimeRule(re.compile(rf"\b{_NUM}\s+(day|week|weekend|month|year)s?\s+(ago|back|from\s+now)\b", re.I), _ago),
    TimeRule(re.compile(rf"\bin\s+{_NUM}\s+(day|week|month|year)s?\b(?!\s+ago)", re.I), _in_n),
    TimeRule(
        re.compile(
            r"\bthe\s+(day|week|weekend|month|year)\s+before\b(?!\s+(?:the|my|our|his|her|their|a|an|that|last|\d))",
            re.I,
        ),
        _the_unit_before,
    ),
    TimeRule(re.compile(rf"\b(every\s+|each\s+)?{_WD_FULL}(s)?\b", re.I), _bare_weekday),
)


_MONTH_WORDS = frozenset(
    {*_MONTHS, "january", "february", "march", "april", "june", "july", "august", "sept", "september", "october"}
    | {"november", "december"}
)
_WEEKDAY_WORDS = frozenset(
    {*_WEEKDAYS, "monday", "tues", "tuesday", "wednesday", "thur", "thurs", "thursday", "friday", "saturday", "sunday"}
)
_DIGITS = frozenset("0123456789")
# One gate per rule, in order: a rule runs only when the text has one of its words (a cheap set test).
_EN_GATES: tuple[frozenset[str], ...] = (
    _DIGITS,
    *([_MONTH_WORDS] * 5),
    _DIGITS,
    _MONTH_WORDS,
    frozenset({"yesterday", "today", "tonight", "tomorrow", "night", "morning", "afternoon", "evening"}),
    _WEEKDAY_WORDS,
    frozenset({"last", "this", "next"}),
    frozenset({"ago", "back", "now"}),
    frozenset({"in"}),
    frozenset({"before"}),
    _WEEKDAY_WORDS,
)
_GATED_EN_RULES = tuple(zip(_EN_GATES, EN_RULES, strict=True))
_GATE_TOKENS = re.compile(r"[a-z]+|\d")


def find_time_expressions(
    text: str, occurred_at: int, *, utc_offset_minutes: int = 0, future: bool | None = None
) -> list[TimeExpression]:
    """Every resolvable time expression in ``text``, in text order, without overlaps (longest wins).

    ``future`` forces the direction of bare weekdays and months; by default it is read from the text.
    """
    try:
        ref = reference_day(occurred_at, utc_offset_minutes)
    except (ValueError, OverflowError):  # outside the calendar datetime supports: nothing to resolve against
        return []
    ahead = reads_as_future(text) if future is None else future
    words = set(_GATE_TOKENS.findall(text.lower()))
    rules = [rule for gate, rule in _GATED_EN_RULES if not gate.isdisjoint(words)]
    if timeexpr_zh.has_cjk(text):
        rules.extend(timeexpr_zh.ZH_RULES)
    found: list[tuple[int, int, dt.date, Granularity]] = []
    for rule in rules:
        for match in rule.pattern.finditer(text):
            try:
                resolved = rule.resolve(match, ref, ahead)
            except (ValueError, OverflowError):  # e.g. "900 years from now" near year 9999
                continue
            if resolved is not None:
                found.append((match.start(), match.end(), resolved[0], resolved[1]))
    found.sort(key=lambda f: (f[0], f[0] - f[1]))
    result: list[TimeExpression] = []
    last_end = -1
    for start, end, day, granularity in found:
        if start >= last_end:
            result.append(TimeExpression(text[start:end], start, end, day_ms(day), granularity))
            last_end = end
    return result
