"""Time expressions in English and Chinese, resolved against the message time (no clock)."""

from __future__ import annotations

import datetime as dt

import pytest

from adamem.analysis.timecalc import day_ms, reference_day
from adamem.analysis.timeexpr import find_time_expressions

MON_2024_04_01 = "2024-04-01T08:15:00+00:00"  # a Monday
WED_2024_04_17 = "2024-04-17T12:00:00+00:00"  # a Wednesday
MON_2024_06_03 = "2024-06-03T01:00:00+00:00"  # a Monday (09:00 in Beijing)


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def day(iso_date: str) -> int:
    return day_ms(dt.date.fromisoformat(iso_date))


def only(text: str, at: str) -> tuple[str, str, str]:
    found = find_time_expressions(text, ms(at))
    assert len(found) == 1, found
    resolved = dt.datetime.fromtimestamp(found[0].when / 1000, tz=dt.UTC).date().isoformat()
    return found[0].text, resolved, found[0].granularity


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        ("I went to the gym yesterday", MON_2024_04_01, ("yesterday", "2024-03-31", "day")),
        ("Big meeting today", MON_2024_04_01, ("today", "2024-04-01", "day")),
        ("Dinner tonight?", MON_2024_04_01, ("tonight", "2024-04-01", "day")),
        ("We talked last night", MON_2024_04_01, ("last night", "2024-03-31", "day")),
        ("See you tomorrow", MON_2024_04_01, ("tomorrow", "2024-04-02", "day")),
        ("I ran a race last Sunday", WED_2024_04_17, ("last Sunday", "2024-04-14", "day")),
        ("I joined a new group last Tues.", WED_2024_04_17, ("last Tues.", "2024-04-16", "day")),
        ("It was wild last week", WED_2024_04_17, ("last week", "2024-04-08", "week")),
        ("I moved last month", WED_2024_04_17, ("last month", "2024-03-01", "month")),
        ("I graduated last year", WED_2024_04_17, ("last year", "2023-01-01", "year")),
        ("We meet this Monday", WED_2024_04_17, ("this Monday", "2024-04-15", "day")),
        ("We meet next Monday", WED_2024_04_17, ("next Monday", "2024-04-22", "day")),
        ("I went to the gym on Wednesday", MON_2024_04_01, ("Wednesday", "2024-03-27", "day")),
        ("I'll go to the gym on Wednesday", MON_2024_04_01, ("Wednesday", "2024-04-03", "day")),
        ("I finished it two weeks ago", WED_2024_04_17, ("two weeks ago", "2024-04-03", "week")),
        ("I bought it 3 days ago", WED_2024_04_17, ("3 days ago", "2024-04-14", "day")),
        ("She called a month ago", WED_2024_04_17, ("a month ago", "2024-03-17", "month")),
        ("It broke a few days ago", WED_2024_04_17, ("a few days ago", "2024-04-14", "day")),
        ("We camped a couple of weekends ago", WED_2024_04_17, ("a couple of weekends ago", "2024-04-06", "day")),
        ("I gave a talk the week before", WED_2024_04_17, ("the week before", "2024-04-08", "week")),
        ("We went hiking last weekend", WED_2024_04_17, ("last weekend", "2024-04-13", "day")),
        ("Surfing was great last summer", WED_2024_04_17, ("last summer", "2023-06-01", "month")),
        ("I painted it in May", WED_2024_04_17, ("in May", "2023-05-01", "month")),
        ("We will travel in May", WED_2024_04_17, ("in May", "2024-05-01", "month")),
        ("I painted a sunrise in 2022", WED_2024_04_17, ("in 2022", "2022-01-01", "year")),
        ("The party was on 8 May 2023", WED_2024_04_17, ("8 May 2023", "2023-05-08", "day")),
        ("The party was on May 8, 2023", WED_2024_04_17, ("May 8, 2023", "2023-05-08", "day")),
        ("The party was on 2023-05-08", WED_2024_04_17, ("2023-05-08", "2023-05-08", "day")),
        ("It opened in June 2021", WED_2024_04_17, ("June 2021", "2021-06-01", "month")),
        ("I'll see you in two weeks", WED_2024_04_17, ("in two weeks", "2024-05-01", "week")),
        ("我昨天去了健身房", MON_2024_06_03, ("昨天", "2024-06-02", "day")),
        ("前天下雨了", MON_2024_06_03, ("前天", "2024-06-01", "day")),
        ("今天很累", MON_2024_06_03, ("今天", "2024-06-03", "day")),
        ("明天见", MON_2024_06_03, ("明天", "2024-06-04", "day")),
        ("我上周日去爬山了", MON_2024_06_03, ("上周日", "2024-06-02", "day")),
        ("我上星期天去爬山了", MON_2024_06_03, ("上星期天", "2024-06-02", "day")),
        ("上周很忙", MON_2024_06_03, ("上周", "2024-05-27", "week")),
        ("上个月我换了工作", MON_2024_06_03, ("上个月", "2024-05-01", "month")),
        ("去年我去了日本", MON_2024_06_03, ("去年", "2023-01-01", "year")),
        ("两周前我第一次跑完了五公里", MON_2024_06_03, ("两周前", "2024-05-20", "week")),
        ("三天前我买了自行车", MON_2024_06_03, ("三天前", "2024-05-31", "day")),
        ("一个月前我搬家了", MON_2024_06_03, ("一个月前", "2024-05-03", "month")),
        ("这周三开会", MON_2024_06_03, ("这周三", "2024-06-05", "day")),
        ("下周一出发", MON_2024_06_03, ("下周一", "2024-06-10", "day")),
        ("5月8日是我的生日", MON_2024_06_03, ("5月8日", "2024-05-08", "day")),
        ("2023年5月我毕业了", MON_2024_06_03, ("2023年5月", "2023-05-01", "month")),
        ("2023年5月8日我毕业了", MON_2024_06_03, ("2023年5月8日", "2023-05-08", "day")),
        ("几天前我感冒了", MON_2024_06_03, ("几天前", "2024-05-31", "day")),
        ("半年前我开始学吉他", MON_2024_06_03, ("半年前", "2023-12-03", "month")),
        ("周三我去了健身房", MON_2024_06_03, ("周三", "2024-05-29", "day")),
        ("我打算周三去健身房", MON_2024_06_03, ("周三", "2024-06-05", "day")),
    ],
)
def test_resolves_expression(text: str, at: str, expected: tuple[str, str, str]) -> None:
    assert only(text, at) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I go to the gym every Wednesday evening.",
        "I go swimming on Sundays.",
        "我每周三晚上去健身房。",
        "我一周一次去游泳。",
        "May I ask you something?",
        "I may go there at some point.",
        "It was the best time of my life.",
    ],
)
def test_recurring_or_no_time_resolves_nothing(text: str) -> None:
    assert find_time_expressions(text, ms(WED_2024_04_17)) == []


def test_finds_several_in_text_order_without_overlaps() -> None:
    text = "Last week I started, and two days ago I finished on 8 May 2023."
    found = find_time_expressions(text, ms(WED_2024_04_17))
    expected = ["Last week", "two days ago", "8 May 2023"]
    assert [(f.text, f.start, f.end) for f in found] == [(e, text.index(e), text.index(e) + len(e)) for e in expected]


def test_day_is_the_speakers_local_day_encoded_as_utc_midnight() -> None:
    late_evening_utc = ms("2024-06-02T23:30:00+00:00")  # already 3 June, 07:30, in Beijing
    utc = find_time_expressions("昨天", late_evening_utc)[0]
    beijing = find_time_expressions("昨天", late_evening_utc, utc_offset_minutes=480)[0]
    assert utc.when == day("2024-06-01")
    assert beijing.when == day("2024-06-02")
    assert reference_day(late_evening_utc, 480) == dt.date(2024, 6, 3)


def test_future_can_be_forced() -> None:
    found = find_time_expressions("on Friday", ms(WED_2024_04_17), future=True)
    assert found[0].when == day("2024-04-19")


def test_pure_and_deterministic() -> None:
    text = "I went to the gym yesterday and I'll go again next Monday; 我两周前跑完了五公里。"
    first = find_time_expressions(text, ms(WED_2024_04_17))
    assert first == find_time_expressions(text, ms(WED_2024_04_17))
    assert [f.text for f in first] == ["yesterday", "next Monday", "两周前"]


@pytest.mark.parametrize(
    "text",
    ["It was 31 April 2023.", "2023-02-30", "May 0000", "2023年13月", "十三月三十二日", "900 years from now"],
)
def test_impossible_or_out_of_range_dates_resolve_to_nothing_or_the_valid_part(text: str) -> None:
    found = find_time_expressions(text, ms("9999-06-01T00:00:00+00:00"))
    assert all(dt.date(1, 1, 1) <= dt.datetime.fromtimestamp(f.when / 1000, tz=dt.UTC).date() for f in found)
    assert "31 April 2023" not in [f.text for f in found]
    assert "900 years from now" not in [f.text for f in found]
