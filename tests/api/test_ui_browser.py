"""The memory inspector in a real browser: headless Chromium, driven by Selenium, against a real ``adamem serve``.

The service is the embedded default in a temporary folder, fed the bundled sample conversation and
an owner who moves house, over HTTP, then reanalysed without an extractor into view ``g2``. Each
test opens a panel, works it with the keyboard and the mouse as a person would, and checks what the
page then shows. Chromium and chromedriver are
required: without them the tests fail (``deploy/test.sh`` installs them), they are never skipped.

``ADAMEM_UI_SCREENSHOTS=<folder>`` also saves a PNG of every panel there (``bench/ui_screenshots.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from bench.ui_screenshots import (
    Inspector,
    headless_chrome,
    load_sample,
    shoot,
    start_inspector,
    stop,
    with_generation,
)


def _wait(browser: WebDriver, seconds: float) -> WebDriverWait[WebDriver]:
    """A wait whose condition is tried again when the page it read is replaced meanwhile (a stale element)."""
    return WebDriverWait(browser, seconds, ignored_exceptions=(StaleElementReferenceException,))


def _gone(element: WebElement) -> Callable[[WebDriver], bool]:
    """A wait condition: ``element`` no longer belongs to the page (the page that held it was replaced).

    Chromium's driver says so with a stale-element error, or, while the new page is being built, with an
    inspector error that the node does not belong to the document.
    """

    def check(_: WebDriver) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in (exc.msg or ""):
                return True
            raise
        return False

    return check


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspector]:
    folder = tmp_path_factory.mktemp("inspector")
    served = start_inspector(folder)
    try:
        load_sample(served.url)
        served = with_generation(served, folder)  # view g2 beside main, to compare with it
        yield served
    finally:
        stop(served.process)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    try:
        chrome = headless_chrome()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield chrome
    finally:
        chrome.quit()


def _open(browser: WebDriver, inspector: Inspector, path: str) -> None:
    browser.get(inspector.url + path)
    _wait(browser, 30).until(lambda b: b.execute_script("return document.readyState") == "complete")


def _texts(within: WebDriver | WebElement, selector: str) -> list[str]:
    return [e.text for e in within.find_elements(By.CSS_SELECTOR, selector)]


def _messages(browser: WebDriver) -> list[str]:
    return _texts(browser, "table.messages td.content")


def _as_of(browser: WebDriver) -> str:
    return parse_qs(urlsplit(browser.current_url).query).get("as_of", [""])[0]


def _record(browser: WebDriver, content: str) -> WebElement:
    """The row of the episodic record whose content starts with ``content``."""
    return browser.find_element(
        By.XPATH,
        "//table[contains(@class,'records')]//tr[td[contains(@class,'content')]"
        f"[starts-with(normalize-space(.), '{content}')]]",
    )


def _slider(browser: WebDriver) -> WebElement:
    return browser.find_element(By.ID, "asof-range")


def test_owners_are_listed_and_filtered_from_the_search_box(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui")
    owners = _texts(browser, "ul.owners > li > a")
    assert owners == ["alice", "omar", "xiaoming"]
    box = browser.find_element(By.ID, "q")
    assert browser.find_element(By.CSS_SELECTOR, "label[for=q]").text == "Find an owner"
    box.send_keys("XIAO", Keys.ENTER)  # the keyboard submits the form
    _wait(browser, 30).until(lambda b: "q=XIAO" in b.current_url)
    assert _texts(browser, "ul.owners > li > a") == ["xiaoming"]
    browser.find_element(By.LINK_TEXT, "xiaoming").click()
    assert browser.execute_script("return document.characterSet") == "UTF-8"
    assert "我喜欢吃辣的川菜。" in _messages(browser)
    assert "小明 (user)" in _texts(browser, "table.messages td")


def test_the_as_of_slider_takes_a_message_away_and_brings_it_back(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/alice/timeline")
    assert "I'm thinking about adopting a cat named Mochi." in _messages(browser)
    assert len(_messages(browser)) == 19
    slider = _slider(browser)
    assert slider.get_attribute("value") == slider.get_attribute("max") == "19"  # now
    slider.send_keys(Keys.ARROW_LEFT, Keys.ARROW_LEFT, Keys.ARROW_LEFT)  # three messages back
    assert browser.find_element(By.ID, "asof-shown").text == "2024-04-15T21:00:00Z"
    assert browser.find_element(By.ID, "asof-text").get_attribute("value") == "2024-04-15T21:00:00Z"
    browser.find_element(By.ID, "asof-go").click()
    _wait(browser, 30).until(lambda b: _as_of(b) == "2024-04-15T21:00:00Z")
    shown = _messages(browser)
    assert len(shown) == 17 and "I'm thinking about adopting a cat named Mochi." not in shown
    assert "Went to the gym again on Wednesday evening, feeling stronger." in shown
    assert _slider(browser).get_attribute("value") == "16"
    _slider(browser).send_keys(Keys.ARROW_RIGHT)
    browser.find_element(By.ID, "asof-go").click()
    _wait(browser, 30).until(lambda b: _as_of(b) == "2024-04-15T21:01:00Z")
    shown = _messages(browser)
    assert "I'm thinking about adopting a cat named Mochi." in shown and len(shown) == 18
    assert "Two weeks ago I finished my first 5k run!" not in shown
    browser.find_element(By.LINK_TEXT, "Now").click()
    _wait(browser, 30).until(lambda b: _as_of(b) == "")
    assert len(_messages(browser)) == 19


def test_a_superseded_record_shows_what_replaced_it_and_when(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/omar/timeline")
    lisbon = _record(browser, "Omar lives in Lisbon")
    assert "superseded" in (lisbon.get_attribute("class") or "")
    assert "superseded by “Omar lives in Porto” at 2024-02-01T10:00:00Z" in lisbon.text
    porto = _record(browser, "Omar lives in Porto")
    assert "valid" in porto.text and "replaces “Omar lives in Lisbon”" in porto.text
    # typed into the text box: memory as it stood before the move
    box = browser.find_element(By.ID, "asof-text")
    box.clear()
    box.send_keys("2024-01-15T00:00:00Z", Keys.ENTER)
    _wait(browser, 30).until(lambda b: _as_of(b) == "2024-01-15T00:00:00Z")
    records = _texts(browser, "table.records tr.record")
    assert any("Omar lives in Lisbon" in r and "valid" in r for r in records), records
    assert not any("Porto" in r for r in records), records
    assert _messages(browser) == ["I live in Lisbon and work as a chef."]


def test_an_offset_in_the_text_box_cuts_the_log_there(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/omar/timeline")
    offsets = sorted(int(o.split(":")[1]) for o in _texts(browser, "table.messages td.num:nth-child(3)"))
    box = browser.find_element(By.ID, "asof-text")
    box.clear()
    box.send_keys(f"offset:{offsets[2]}", Keys.ENTER)
    _wait(browser, 30).until(lambda b: _as_of(b) == f"offset:{offsets[2]}")
    assert sorted(_messages(browser)) == sorted(
        ["I live in Lisbon and work as a chef.", "I moved to Porto last month, I live in Porto now."]
    )
    assert "event time 2024-02-01T10:00:00Z" in browser.find_element(By.ID, "asof-shown").text


def test_persona_shows_strength_against_the_threshold(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/alice/persona")
    assert "0.65" in browser.find_element(By.TAG_NAME, "main").text
    rows = [_texts(row, "td") for row in browser.find_elements(By.CSS_SELECTOR, "table.traits tr.trait")]
    spicy = next(r for r in rows if r[0] == "preference" and r[2].startswith("spicy food"))
    assert "at or above 0.65" in spicy[3] and spicy[4] == "3" and spicy[5] == "stable"  # three mentions
    peanuts = next(r for r in rows if r[2] == "peanuts")
    assert "below 0.65" in peanuts[3] and peanuts[5] == "not stable"
    assert browser.find_element(By.ID, "habits").text.startswith("Habits")
    # the persona fold replayed to the point: before the first mention was consolidated, no trait yet
    _open(browser, inspector, "/ui/owners/alice/persona?as_of=2024-03-05T00:00:00Z")
    assert not browser.find_elements(By.CSS_SELECTOR, "table.traits tr.trait")
    assert "folded again from the log" in browser.find_element(By.TAG_NAME, "main").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.stability circle.pt")) == 1  # its first week only
    # before the second mention of spicy food, the cluster had fewer mentions
    _open(browser, inspector, "/ui/owners/alice/persona?as_of=2024-03-12T00:00:00Z")
    early = _texts(browser, "table.traits tr.trait")
    assert not any("peanuts" in r for r in early), early  # said on 2024-03-11, in working memory still
    rows = [_texts(row, "td") for row in browser.find_elements(By.CSS_SELECTOR, "table.traits tr.trait")]
    spicy = next(r for r in rows if r[0] == "preference" and r[2].startswith("spicy food"))
    assert "below 0.65" in spicy[3] and spicy[4] == "1" and spicy[5].startswith("not stable")  # one mention then


def test_the_stability_chart_has_a_point_a_week(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/alice/persona")
    points = browser.find_elements(By.CSS_SELECTOR, "svg.stability circle.pt")
    assert len(points) == 7  # 2024-03-04 to 2024-04-15
    assert points[-1].find_element(By.TAG_NAME, "title").get_attribute("textContent") == (
        "week of 2024-04-15T09:00:00Z: 1 of 2 core traits changed (50%)"
    )
    heights = [float(p.get_attribute("cy")) for p in points]
    assert heights[0] < heights[4]  # 100 % drawn above 0 %
    assert browser.find_element(By.CSS_SELECTOR, "svg.stability").size["width"] == 640


def test_the_graph_recentres_on_a_neighbour(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/alice/graph")
    assert "message:" in browser.find_element(By.TAG_NAME, "main").text  # nodes by type
    centre = browser.find_element(By.ID, "centre").text
    assert browser.find_elements(By.CSS_SELECTOR, "svg line") and browser.find_elements(By.CSS_SELECTOR, "svg a")
    neighbour = browser.find_element(By.CSS_SELECTOR, "table.edges tr.edge td:nth-child(3) a")
    label = neighbour.text
    neighbour.send_keys(Keys.ENTER)  # a real link: the keyboard follows it
    _wait(browser, 30).until(lambda b: b.find_element(By.ID, "centre").text != centre)
    assert browser.find_element(By.ID, "centre").text == label
    assert centre in _texts(browser, "table.edges td a")  # the old centre is a neighbour of the new one
    find = browser.find_element(By.ID, "find")
    find.send_keys("Haidian", Keys.ENTER)
    _wait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "ul.found a"))
    browser.find_element(By.CSS_SELECTOR, "ul.found a").click()
    assert "Haidian" in browser.find_element(By.ID, "centre").text


def test_the_query_playground_shows_route_cues_scores_paths_and_provenance(
    browser: WebDriver, inspector: Inspector
) -> None:
    _open(browser, inspector, "/ui/owners/alice/query")
    question = browser.find_element(By.ID, "q")
    question.send_keys("What food does Alice like?")
    browser.find_element(By.ID, "ask").click()
    _wait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "table.items"))
    assert browser.find_element(By.ID, "route-name").text == "persona"
    assert "like" in browser.find_element(By.ID, "cues").text
    items = browser.find_elements(By.CSS_SELECTOR, "table.items tr.item")
    assert 1 <= len(items) <= 10
    assert any("spicy" in i.text.lower() for i in items)
    first = items[0].find_elements(By.TAG_NAME, "td")
    assert first[0].text == "1" and float(first[3].text) > 0
    assert len(first[4].text.split(" · ")) == 4  # semantic · graph · temporal · fact
    assert "analyses" in first[6].text and "rules/" in first[6].text
    # a why-question walks the graph: its route and at least one item brought in by a path
    question = browser.find_element(By.ID, "q")
    answered = browser.find_element(By.CSS_SELECTOR, "table.items")
    question.clear()
    question.send_keys("Why did Alice start working out?", Keys.ENTER)
    # the box holds the new question at once; the answer is there once the page that showed the first is gone
    _wait(browser, 60).until(_gone(answered))
    _wait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "table.items"))
    assert "Why" in (browser.find_element(By.ID, "q").get_attribute("value") or "")
    assert browser.find_element(By.ID, "route-name").text == "graph"
    assert "why" in browser.find_element(By.ID, "cues").text
    paths = _texts(browser, "table.items tr.item td:nth-child(6)")
    assert any("→" in p for p in paths), paths
    # full provenance of the first item: the messages, offsets and the analyzer's version
    browser.find_element(By.LINK_TEXT, "full provenance").click()
    _wait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "table.provenance"))
    source = browser.find_element(By.CSS_SELECTOR, "table.provenance tr.source").text
    assert "analyses" in source and "messages" in source and "rules/" in source


def test_the_query_answers_as_of_a_point(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/omar/query?q=Where+does+Omar+live%3F&as_of=2024-01-15T00:00:00Z")
    before = " ".join(_texts(browser, "table.items td.content"))
    assert "Lisbon" in before and "Porto" not in before
    _open(browser, inspector, "/ui/owners/omar/query?q=Where+does+Omar+live%3F")
    assert "Porto" in _texts(browser, "table.items td.content")[0]


def test_views_name_the_active_one_and_diff_another_by_layer(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/alice/views")
    assert browser.find_element(By.ID, "active-view").text == "main"
    row = browser.find_element(By.CSS_SELECTOR, "table.views tr.active").text
    assert row.startswith("main") and "active" in row and "read by this service" in row
    assert not browser.find_elements(By.ID, "diff")
    browser.find_element(By.LINK_TEXT, "compare with main").click()  # the reanalysis without an extractor
    _wait(browser, 30).until(lambda b: "compare=g2" in b.current_url)
    assert browser.find_element(By.ID, "diff").text == "g2 against main, layer by layer"
    counts = {
        r[0]: r[1:]
        for r in (_texts(row, "td") for row in browser.find_elements(By.CSS_SELECTOR, "table.diff tr.layer"))
    }
    assert counts["episodic"] == ["0", "15", "0", "0"]  # no extractor: no records, no traits
    assert counts["persona"] == ["0", "5", "0", "0"]
    assert counts["working"][2] == "19"  # every message's analysis altered, the owner row unchanged
    examples = _texts(browser, "table.diff-examples tr.removed td.content")
    assert "spicy food" in " ".join(examples) and "Alice decided to start working out three times a week." in examples
    _open(browser, inspector, "/ui/owners/alice/views?compare=g2&as_of=2024-03-05T00:00:00Z")
    early = {
        r[0]: r[1:]
        for r in (_texts(row, "td") for row in browser.find_elements(By.CSS_SELECTOR, "table.diff tr.layer"))
    }
    assert early["working"] == ["0", "0", "4", "1"]  # the four messages said by then
    assert early["episodic"] == ["0", "7", "0", "0"] and early["persona"] == ["0", "3", "0", "0"]
    assert "Only rows written by this point are compared" in browser.find_element(By.TAG_NAME, "main").text


def test_tabs_are_links_that_keep_the_point(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/alice/timeline?as_of=2024-03-12T00:00:00Z")
    browser.find_element(By.LINK_TEXT, "Persona").send_keys(Keys.ENTER)
    _wait(browser, 30).until(lambda b: "/persona" in b.current_url)
    assert _as_of(browser) == "2024-03-12T00:00:00Z"
    current = browser.find_element(By.CSS_SELECTOR, "nav.tabs a[aria-current=page]").text
    assert current == "Persona"


def test_bad_input_is_a_page_that_says_so(browser: WebDriver, inspector: Inspector) -> None:
    _open(browser, inspector, "/ui/owners/nobody/timeline")
    assert "no memory for user 'nobody'" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text
    _open(browser, inspector, "/ui/owners/alice/timeline?as_of=next+tuesday")
    assert "is not a time or a log offset" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text


def test_every_panel_has_a_screenshot(browser: WebDriver, inspector: Inspector, tmp_path: Path) -> None:
    """A 1280x800 PNG of every panel, in ADAMEM_UI_SCREENSHOTS when set (docs/ui: the committed ones)."""
    folder = os.environ.get("ADAMEM_UI_SCREENSHOTS")
    saved = shoot(browser, inspector.url, Path(folder) if folder else tmp_path)
    assert len(saved) == 11
    for png in saved:
        head = png.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000, png
        assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == (1280, 800), png


def test_forget_asks_first_then_the_message_is_gone(browser: WebDriver, inspector: Inspector) -> None:
    """Last: it changes the memory the other tests read."""
    mochi = "I'm thinking about adopting a cat named Mochi."
    _open(browser, inspector, "/ui/owners/alice/timeline")
    row = browser.find_element(By.XPATH, f"//table[contains(@class,'messages')]//tr[contains(., \"{mochi}\")]")
    row.find_element(By.LINK_TEXT, "Forget").click()
    assert "Forget the message “" + mochi in browser.find_element(By.TAG_NAME, "h2").text
    browser.find_element(By.ID, "cancel-forget").click()  # not yet: nothing happens
    assert mochi in _messages(browser)
    row = browser.find_element(By.XPATH, f"//table[contains(@class,'messages')]//tr[contains(., \"{mochi}\")]")
    row.find_element(By.LINK_TEXT, "Forget").click()
    browser.find_element(By.ID, "confirm-forget").click()
    _wait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "p.notice"))
    assert "Forgotten: the message" in browser.find_element(By.CSS_SELECTOR, "p.notice").text
    assert mochi not in _messages(browser) and len(_messages(browser)) == 18
    # gone from the API's answers too: it went through the same forget
    answer = httpx.post(f"{inspector.url}/v1/users/alice/query", json={"question": "What is the cat called?"}).json()
    assert not any("Mochi" in i["content"] for i in answer["items"]), answer
    # an item: the superseded record of omar's old city
    _open(browser, inspector, "/ui/owners/omar/timeline")
    lisbon = _record(browser, "Omar lives in Lisbon")
    lisbon.find_element(By.LINK_TEXT, "Forget").click()
    browser.find_element(By.ID, "confirm-forget").click()
    _wait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "p.notice"))
    contents = _texts(browser, "table.records td.content")
    assert not any("Lisbon" in r for r in contents) and any(r.startswith("Omar lives in Porto") for r in contents)
    assert "I live in Lisbon and work as a chef." in _messages(browser)  # the message stays
