"""The memory inspector's routes over HTTP: pages, the as-of point, keys and tenants, and every bad input as a 4xx page.

The browser tests (``test_ui_browser.py``) drive the same pages in Chromium; these check what a
browser does not show: status codes, content types, redirects and what the keys allow.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest

from adamem.api.app import create_app
from adamem.api.ui.inspect import AsOfError, as_of_text, parse_as_of
from adamem.ingest import parse_time
from adamem.projections.store.factory import open_store
from adamem.retrieval.service import Retriever
from adamem.retrieval.snapshot import AsOf
from adamem.settings import Settings
from adamem.streams.factory import open_log
from tests.api.conftest import ACME, ACME_KEY, DEFAULT, KEYS
from tests.api.conftest import embedder as _embedder
from tests.conftest import serving


def _app(built: tuple[Settings, str], keys: str, with_log: bool = True) -> Iterator[httpx.Client]:
    settings, store = built
    retriever = Retriever(open_store(store, read_only=True), _embedder())
    log = open_log(settings.log_url, settings) if with_log else None
    app = create_app(settings, retriever, log, api_keys=keys)
    with serving(app) as c:
        yield c


@pytest.fixture
def open_ui(built: tuple[Settings, str]) -> Iterator[httpx.Client]:
    """The service without keys (open)."""
    yield from _app(built, "")


@pytest.fixture
def logless_ui(built: tuple[Settings, str]) -> Iterator[httpx.Client]:
    """The service without keys and without a log (``adamem serve --read-only`` without ``--log``)."""
    yield from _app(built, "", with_log=False)


@pytest.fixture
def keyed_ui(built: tuple[Settings, str]) -> Iterator[httpx.Client]:
    """The service with the tenants' keys."""
    yield from _app(built, KEYS)


def _error(r: httpx.Response) -> str:
    """The sentence of an error page."""
    assert r.headers["content-type"].startswith("text/html"), r.headers
    m = re.search(r'<div class="error" role="alert"><h2>(.*?)</h2><p>(.*?)</p>', r.text)
    assert m is not None, r.text[:2000]
    return html.unescape(f"{m.group(1)}: {m.group(2)}")


def test_pages_are_utf8_html_and_list_the_tenants_owners(open_ui: httpx.Client) -> None:
    r = open_ui.get("/ui")
    assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    assert '<meta charset="utf-8">' in r.text
    assert "/ui/owners/alice/timeline" in r.text and "/ui/owners/xiaoming/timeline" in r.text
    assert "carol" not in r.text  # tenant acme's owner: not the default tenant's
    assert "/ui/owners/carol/timeline" in open_ui.get("/ui", params={"tenant": "acme"}).text
    only = open_ui.get("/ui", params={"q": "XIAO"}).text
    assert "/ui/owners/xiaoming/" in only and "/ui/owners/alice/" not in only
    chinese = open_ui.get("/ui/owners/xiaoming/timeline").text
    assert "我喜欢吃辣的川菜。" in chinese and "小明" in chinese


def test_every_panel_answers_200(open_ui: httpx.Client) -> None:
    for panel in ("timeline", "persona", "graph", "query", "views"):
        r = open_ui.get(f"/ui/owners/alice/{panel}", params={"as_of": "2024-03-12T00:00:00Z"})
        assert r.status_code == 200, (panel, r.text[:500])
        assert 'aria-current="page"' in r.text and 'id="asof-range"' in r.text
    assert open_ui.get("/ui/owners/alice").status_code == 200  # the timeline by default


def test_as_of_a_time_or_an_offset_shows_memory_as_it_stood(open_ui: httpx.Client) -> None:
    now = open_ui.get("/ui/owners/alice/timeline").text
    assert "cat named Mochi" in now and "Two weeks ago I finished my first 5k run!" in now
    before = open_ui.get("/ui/owners/alice/timeline", params={"as_of": "2024-04-15T21:01:30Z"}).text
    assert "cat named Mochi" in before and "first 5k run" not in before
    early = open_ui.get("/ui/owners/alice/timeline", params={"as_of": "2024-03-04T09:01:00Z"}).text
    assert "Welcome to Beijing" in early and "data engineer" not in early and "Mochi" not in early
    assert "Alice lives in Beijing" in early and "Alice is a data engineer" not in early  # records too
    # an offset: the messages below it on the owner's analyses partition
    offsets = [int(o) for o in re.findall(r'<td class="num">\d+:(\d+)</td>', now)]
    assert len(offsets) == 19
    cut = sorted(offsets)[5]
    at = open_ui.get("/ui/owners/alice/timeline", params={"as_of": f"offset:{cut}"}).text
    assert sorted(int(o) for o in re.findall(r'<td class="num">\d+:(\d+)</td>', at)) == sorted(offsets)[:5]
    ms = parse_time("2024-04-15T21:01:30Z")  # integer milliseconds mean an event time, as in the API
    assert "first 5k run" not in open_ui.get("/ui/owners/alice/timeline", params={"as_of": str(ms)}).text


def _trait_row(page: str, value: str) -> list[str]:
    """The cells (as text) of the first persona row whose value starts with ``value``."""
    for row in re.findall(r'<tr class="trait[^"]*">(.*?)</tr>', page, re.S):
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        if cells[2].startswith(value):
            return cells
    raise AssertionError(f"no trait {value!r}")


def test_persona_strength_and_mentions_are_as_of_the_point(open_ui: httpx.Client) -> None:
    now = open_ui.get("/ui/owners/alice/persona").text
    spicy = _trait_row(now, "spicy food")
    assert spicy[3].startswith("1.007") and "at or above 0.65" in spicy[3] and spicy[4] == "3" and spicy[5] == "stable"
    # the fold replayed to the point: a message is evidence once consolidated (its session over)
    early = open_ui.get("/ui/owners/alice/persona", params={"as_of": "2024-03-05T00:00:00Z"}).text
    assert "folded again from the log" in early and "approximate" not in early.split('id="stability"')[0]
    assert "spicy food" not in early  # said on 2024-03-04, consolidated when the next session began
    mid = open_ui.get("/ui/owners/alice/persona", params={"as_of": "2024-03-12T00:00:00Z"}).text
    spicy = _trait_row(mid, "spicy food")  # one mention by then, below the threshold
    assert spicy[3].startswith("0.588 ") and "below 0.65" in spicy[3] and spicy[4] == "1"
    assert spicy[5].startswith("not stable") and "</span>*" not in mid
    assert spicy[6] == "2024-03-04T09:03:00Z → 2024-03-04T09:03:00Z"  # its last mention by then
    later = open_ui.get("/ui/owners/alice/persona", params={"as_of": "2024-03-20T00:00:00Z"}).text
    spicy = _trait_row(later, "spicy food")  # the mention of 2024-03-18 is in working memory still
    assert spicy[4] == "1" and spicy[5].startswith("not stable")


def test_persona_without_a_log_is_recomputed_and_says_it_is_approximate(logless_ui: httpx.Client) -> None:
    early = logless_ui.get("/ui/owners/alice/persona", params={"as_of": "2024-03-05T00:00:00Z"}).text
    assert '<p class="notice" id="approximate">approximate: no log to replay</p>' in early
    spicy = _trait_row(early, "spicy food")  # one mention by then: recomputed from that evidence, below the threshold
    assert spicy[3].startswith("0.621 *") and "below 0.65" in spicy[3] and spicy[4] == "1"
    assert spicy[5].startswith("not stable")
    assert spicy[6] == "2024-03-04T09:03:00Z → 2024-03-04T09:03:00Z"  # its last mention by then
    assert "recomputed with the fold's formula from the evidence dated by then" in early
    later = logless_ui.get("/ui/owners/alice/persona", params={"as_of": "2024-03-20T00:00:00Z"}).text
    spicy = _trait_row(later, "spicy food")  # strong enough, but two mentions of the three needed
    assert "at or above 0.65" in spicy[3] and spicy[4] == "2" and spicy[5].startswith("not stable")
    assert "approximate: no log to replay" not in logless_ui.get("/ui/owners/alice/persona").text  # now: the rows


def test_the_stability_index_is_charted_week_by_week_up_to_the_point(open_ui: httpx.Client) -> None:
    now = open_ui.get("/ui/owners/alice/persona").text
    assert '<svg class="stability"' in now
    rates = [float(r) for r in re.findall(r'<circle class="pt"[^>]*data-rate="([0-9.]+)"', now)]
    assert rates == [1.0, pytest.approx(2 / 3, abs=1e-4), pytest.approx(2 / 3, abs=1e-4), 1.0, 0.0, 0.0, 0.5]
    assert "week of 2024-04-15T09:00:00Z: 1 of 2 core traits changed (50%)" in now
    early = open_ui.get("/ui/owners/alice/persona", params={"as_of": "2024-03-20T00:00:00Z"}).text
    assert len(re.findall(r'<circle class="pt"', early)) == 3  # the weeks up to the point
    assert "week of 2024-03-18T09:00:00Z: 2 of 3 core traits changed (67%)" in early  # cut at the point


def test_the_as_of_form_redirects_to_the_canonical_url(open_ui: httpx.Client) -> None:
    base = {"shown_at": "19", "shown": ""}
    slid = open_ui.get("/ui/owners/alice/timeline", params={**base, "at": "2", "as_of": ""})
    assert slid.status_code == 303
    assert slid.headers["location"] == "/ui/owners/alice/timeline?as_of=2024-03-04T09%3A02%3A00Z"
    typed = open_ui.get("/ui/owners/alice/persona", params={**base, "at": "19", "as_of": "offset:3"})
    assert typed.status_code == 303 and typed.headers["location"] == "/ui/owners/alice/persona?as_of=offset%3A3"
    back = open_ui.get("/ui/owners/alice/query", params={**base, "at": "19", "as_of": "", "q": "hi", "top_k": "3"})
    assert back.headers["location"] == "/ui/owners/alice/query?q=hi&top_k=3"  # now, the question kept
    bad = open_ui.get("/ui/owners/alice/timeline", params={**base, "at": "x9", "as_of": ""})
    assert bad.status_code == 400 and "at 'x9' is not a whole number" in _error(bad)


@pytest.mark.parametrize(
    ("path", "params", "status", "says"),
    [
        ("/ui/owners/nobody/timeline", {}, 404, "no memory for user 'nobody'"),
        ("/ui/owners/nobody/persona", {"as_of": "2024-01-01T00:00:00Z"}, 404, "no memory for user 'nobody'"),
        ("/ui/owners/alice/timeline", {"as_of": "yesterday-ish"}, 400, "is not a time or a log offset"),
        ("/ui/owners/alice/graph", {"as_of": "2024-13-45T00:00:00Z"}, 400, "is not a time or a log offset"),
        ("/ui/owners/alice/persona", {"as_of": "99999999999999999999"}, 400, "outside the years 0001-9999"),
        ("/ui/owners/alice/timeline", {"as_of": "offset:-1"}, 400, "is not a time or a log offset"),
        ("/ui/owners/alice/timeline", {"page": "abc"}, 400, "page 'abc' is not a whole number"),
        ("/ui/owners/alice/timeline", {"page": "99"}, 400, "page is 99; it must be between 1 and 1"),
        ("/ui/owners/alice/query", {"q": "hi", "top_k": "500"}, 400, "top_k is 500"),
        ("/ui/owners/alice/query", {"q": "x" * 2001}, 400, "at most 2000 characters"),
        ("/ui/owners/alice/graph", {"node": "no-such-node"}, 404, "no graph node 'no-such-node'"),
        ("/ui/owners/alice/graph", {"item": "no-such-item"}, 404, "no graph node"),
        ("/ui/owners/alice/views", {"compare": "nope"}, 404, "the store has no view 'nope'"),
        ("/ui/owners/alice/nopanel", {}, 404, "there is no panel 'nopanel'"),
        ("/ui/nowhere/at/all", {}, 404, "there is no inspector page /ui/nowhere/at/all"),
        ("/ui/owners/alice/items/no-such-item", {}, 404, "has no memory item 'no-such-item'"),
        ("/ui/owners/alice/forget", {}, 400, "name exactly one message or item"),
        ("/ui/owners/alice/forget", {"item": "a", "message": "b"}, 400, "name exactly one message or item"),
        ("/ui/owners/alice/forget", {"item": "no-such-item"}, 404, "has no memory item 'no-such-item'"),
        ("/ui/owners/alice/forget", {"message": "no-such-message"}, 404, "has no message 'no-such-message'"),
        ("/ui/owners/nobody/forget", {"item": "x"}, 404, "no memory for user 'nobody'"),
    ],
)
def test_bad_input_is_a_4xx_page_that_says_what_is_wrong(
    open_ui: httpx.Client, path: str, params: dict[str, str], status: int, says: str
) -> None:
    r = open_ui.get(path, params=params)
    assert r.status_code == status, r.text[:1000]
    assert says in _error(r)


def test_a_forget_post_with_bad_input_is_a_4xx_page(open_ui: httpx.Client) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    unknown = open_ui.post("/ui/owners/alice/forget", content="item=no-such-item", headers=form)
    assert unknown.status_code == 404 and "has no memory item" in _error(unknown)
    nothing = open_ui.post("/ui/owners/alice/forget", content="", headers=form)
    assert nothing.status_code == 400 and "exactly one" in _error(nothing)
    too_long = open_ui.post("/ui/owners/alice/forget", content="item=" + "x" * 300, headers=form)
    assert too_long.status_code == 400 and "is not an id memory could hold" in _error(too_long)
    elsewhere = {**form, "origin": "http://evil.example"}
    cross = open_ui.post("/ui/owners/alice/forget", content="item=x", headers=elsewhere)
    assert cross.status_code == 403 and "posted from another site" in _error(cross)
    opaque = open_ui.post("/ui/owners/alice/forget", content="item=x", headers={**form, "origin": "null"})
    assert opaque.status_code == 403


def test_a_method_no_page_takes_is_a_405_page(open_ui: httpx.Client) -> None:
    r = open_ui.post("/ui/owners/alice/timeline")
    assert r.status_code == 405 and "POST is not allowed on /ui/owners/alice/timeline" in _error(r)
    assert open_ui.delete("/ui").status_code == 405


def test_the_ui_is_not_part_of_the_openapi_description(open_ui: httpx.Client) -> None:
    paths = open_ui.get("/openapi.json").json()["paths"]
    assert paths and not [p for p in paths if p.startswith("/ui")]


def test_keys_guard_the_pages_as_they_guard_the_api(keyed_ui: httpx.Client) -> None:
    missing = keyed_ui.get("/ui")
    assert missing.status_code == 401 and 'action="/ui/login"' in missing.text
    wrong = keyed_ui.get("/ui", headers={"X-API-Key": "wrong-key-9999-9999"})
    assert wrong.status_code == 403 and "not valid" in _error(wrong)
    mine = keyed_ui.get("/ui/owners/alice/timeline", headers=DEFAULT)
    assert mine.status_code == 200 and "cat named Mochi" in mine.text
    theirs = keyed_ui.get("/ui/owners/alice/timeline", headers=ACME)  # another tenant's owner: unknown
    assert theirs.status_code == 404 and "no memory for user 'alice'" in _error(theirs)
    other = keyed_ui.get("/ui", params={"tenant": "default"}, headers=ACME)
    assert other.status_code == 403 and "its own tenant" in _error(other)
    listed = keyed_ui.get("/ui", headers=ACME).text
    assert "/ui/owners/carol/timeline" in listed and "alice" not in listed


def test_signing_in_sets_a_strict_cookie_the_pages_accept(keyed_ui: httpx.Client) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    refused = keyed_ui.post("/ui/login", content="key=not-a-key-at-all-0000", headers=form)
    assert refused.status_code == 403
    signed = keyed_ui.post("/ui/login", content=f"key={ACME_KEY}", headers=form)
    assert signed.status_code == 303 and signed.headers["location"] == "/ui"
    cookie = signed.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
    page = keyed_ui.get("/ui")  # the client keeps the cookie
    assert page.status_code == 200 and "/ui/owners/carol/timeline" in page.text
    out = keyed_ui.post("/ui/logout")
    assert out.status_code == 303 and keyed_ui.get("/ui").status_code == 401


def test_parse_as_of_reads_what_the_api_reads() -> None:
    assert parse_as_of("") is None and parse_as_of("  ") is None
    assert parse_as_of("2024-03-11T19:33:00Z") == AsOf(time=parse_time("2024-03-11T19:33:00Z"))
    assert parse_as_of("1710185580000") == AsOf(time=1710185580000)
    assert parse_as_of("offset:12") == parse_as_of("@12") == AsOf(offset=12)
    for bad in ("offset:", "soon", "2024-02-30T00:00:00Z", "offset:x"):
        with pytest.raises(AsOfError):
            parse_as_of(bad)
    for point in (AsOf(time=1710185580000), AsOf(offset=7), None):
        assert parse_as_of(as_of_text(point)) == point
