"""Chinese time expressions (昨天, 上周日, 两周前, 2023年5月 …): patterns and resolvers.

Conventions are those of ``adamem.analysis.timeexpr``, which combines these rules with the
English ones.
"""

from __future__ import annotations

import datetime as dt
import re

from adamem.analysis.timecalc import (
    Resolution,
    TimeRule,
    day_month_recent,
    month_recent,
    period_start,
    safe_date,
    shift,
    weekday_recent,
)

__all__ = ["ZH_RULES", "cn_number", "has_cjk", "reads_as_future"]

_CJK = re.compile(r"[\u4e00-\u9fff]")
_FUTURE = re.compile(r"打算|准备|计划|将要|将会|即将|快要|要去|要来|会去|下周|下个|下星期|下礼拜|明天|明年|后天|以后")
_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "1": 0, "2": 1, "3": 2, "4": 3,
            "5": 4, "6": 5, "7": 6}  # fmt: skip
_OFFSET = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}
_DAY_WORDS = {
    "大前天": -3, "前天": -2, "昨天": -1, "昨晚": -1, "昨日": -1, "昨儿": -1, "今天": 0, "今晚": 0, "今早": 0,
    "今日": 0, "今儿": 0, "明天": 1, "明晚": 1, "明早": 1, "明日": 1, "后天": 2, "大后天": 3,
}  # fmt: skip
_YEAR_WORDS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}

_N = r"(\d{1,2}|[一二三四五六七八九十]{1,3})"
_Y = r"(\d{4}|[零〇一二三四五六七八九]{4})"
_COUNT = r"(\d{1,3}|[一二两三四五六七八九十百]{1,4}|几|半)"


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains any CJK ideograph."""
    return _CJK.search(text) is not None


def reads_as_future(text: str) -> bool:
    """Whether a Chinese ``text`` talks about the future (打算, 准备, 下周, 明天 …)."""
    return _FUTURE.search(text) is not None


def cn_number(token: str) -> int:
    """An integer from Arabic digits or Chinese numerals (十二, 二十三, 两, 一百; 二〇二三 digit by digit)."""
    if token.isdigit():
        return int(token)
    if "十" not in token and "百" not in token:
        value = 0
        for char in token:
            value = value * 10 + _DIGITS[char]
        return value
    total, current = 0, 0
    for char in token:
        if char == "百":
            total += (current or 1) * 100
            current = 0
        elif char == "十":
            total += (current or 1) * 10
            current = 0
        else:
            current = _DIGITS[char]
    return total + current


def _ymd(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    day = safe_date(cn_number(m[1]), cn_number(m[2]), cn_number(m[3]))
    return None if day is None else (day, "day")


def _ym(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    day = safe_date(cn_number(m[1]), cn_number(m[2]), 1)
    return None if day is None else (day, "month")


def _year(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    year = cn_number(m[1])
    return (dt.date(year, 1, 1), "year") if 1900 <= year <= 2100 else None


def _relative_year(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    year = ref.year + _YEAR_WORDS[m[1]]
    if m[2] is None:
        return dt.date(year, 1, 1), "year"
    month = cn_number(m[2])
    if m[3] is None:
        return (dt.date(year, month, 1), "month") if 1 <= month <= 12 else None
    day = safe_date(year, month, cn_number(m[3]))
    return None if day is None else (day, "day")


def _month_day(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    day = day_month_recent(ref, cn_number(m[1]), cn_number(m[2]), future)
    return None if day is None else (day, "day")


def _month(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    month = cn_number(m[1])
    return (month_recent(ref, month, future), "month") if 1 <= month <= 12 else None


def _day_word(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return ref + dt.timedelta(days=_DAY_WORDS[m[0]]), "day"


def _relative_weekday(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return period_start(ref, "week", _OFFSET[m[1]], _WEEKDAY[m[2]])


def _relative_weekend(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return period_start(ref, "weekend", _OFFSET[m[1]])


def _relative_period(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return period_start(ref, "month" if m[2] == "月" else "week", _OFFSET[m[1]])


def _ago(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    sign = -1 if m[3] in ("前", "以前", "之前") else 1
    unit = _UNITS[m[2]]
    if m[1] == "半":  # 半年 = 6 months, 半个月 = 15 days
        if unit == "year":
            return shift(ref, "month", 6 * sign)
        if unit == "month":
            return shift(ref, "day", 15 * sign)
        return None
    count = 3 if m[1] == "几" else cn_number(m[1])
    return shift(ref, unit, sign * count)


def _bare_weekday(m: re.Match[str], ref: dt.date, future: bool) -> Resolution:
    return weekday_recent(ref, _WEEKDAY[m[1]], future), "day"


_REL = r"(上上|上|这|本|下下|下)个?"
_NOT_AFTER = r"(?<![一两二三四五六七八九十几每上这本下个])"  # 每周三 recurs; 一周一次 is a frequency
ZH_RULES: tuple[TimeRule, ...] = (
    TimeRule(re.compile(rf"{_Y}年{_N}月{_N}[日号]"), _ymd),
    TimeRule(re.compile(rf"{_Y}年{_N}月份?"), _ym),
    TimeRule(re.compile(rf"{_Y}年(?!代)"), _year),
    TimeRule(re.compile(rf"(前年|去年|今年|明年|后年)(?:的)?(?:{_N}月份?(?:{_N}[日号])?)?"), _relative_year),
    TimeRule(re.compile(rf"(?<![\d年]){_N}月{_N}[日号]"), _month_day),
    TimeRule(re.compile(rf"(?<![\d年个]){_N}月份?(?![\d一二三四五六七八九十]*[日号])"), _month),
    TimeRule(re.compile("|".join(sorted(_DAY_WORDS, key=len, reverse=True))), _day_word),
    TimeRule(re.compile(rf"{_REL}(?:周|星期|礼拜)([一二三四五六日天1-7])"), _relative_weekday),
    TimeRule(re.compile(rf"{_REL}周末"), _relative_weekend),
    TimeRule(re.compile(rf"{_REL}(周|星期|礼拜|月)(?![一二三四五六日天末1-7])"), _relative_period),
    TimeRule(re.compile(rf"{_COUNT}个?(天|日|周|星期|礼拜|月|年)(前|以前|之前|后|以后|之后)"), _ago),
    TimeRule(re.compile(rf"{_NOT_AFTER}(?:周|星期|礼拜)([一二三四五六日天])"), _bare_weekday),
)
