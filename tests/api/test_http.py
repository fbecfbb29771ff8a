"""The HTTP query service over real projections: answers, provenance, tenants, and bad input."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.api.app import create_app
from adamem.api.client import MemoryClient, ServiceError
from adamem.ingest import parse_time
from adamem.projections.projector import Projector
from adamem.projections.store import MemoryStore
from adamem.projections.store.factory import open_store
from adamem.retrieval import SEED_DEFAULT, CacheSettings
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import read_as_json
from tests.api.conftest import ACME, DEFAULT, DEFAULT_KEY, GLOBEX, KEYS, SAMPLE
from tests.api.conftest import embedder as _embedder
from tests.conftest import serving


@pytest.fixture
def client(built: tuple[Settings, str]) -> Iterator[httpx.Client]:
    settings, store = built
    retriever = Retriever(open_store(store, read_only=True), _embedder())
    app = create_app(settings, retriever, open_log(settings.log_url, settings), api_keys=KEYS)
    with serving(app) as c:
        yield c


def test_query_returns_ranked_evidence_with_provenance(client: httpx.Client) -> None:
    r = client.post(
        "/v1/users/alice/query", json={"question": "What food does Alice like?", "top_k": 5}, headers=DEFAULT
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["route"]["route"] and body["timing_ms"]["total"] > 0
    assert 1 <= len(body["items"]) <= 5
    assert any("spicy" in i["content"].lower() for i in body["items"])
    first = body["items"][0]
    assert {"layer", "content", "score", "breakdown", "provenance"} <= set(first)
    prov = [p for i in body["items"] for p in i["provenance"]]
    assert prov and all(p["source_topic"].endswith(".analyses") and p["source_offset"] >= 0 for p in prov)


def test_memory_layers_and_provenance_walk_back_to_the_log(client: httpx.Client) -> None:
    r = client.get("/v1/users/alice/memory", params={"layer": "episodic"}, headers=DEFAULT)
    assert r.status_code == 200
    record = next(x for x in r.json()["rows"] if x["type"] == "fact" and "Beijing" in x["content"])
    p = client.get(f"/v1/users/alice/memory/{record['id']}/provenance", headers=DEFAULT)
    assert p.status_code == 200, p.text
    chain = p.json()["messages"]
    assert chain and "Beijing" in chain[0]["text"]
    analysis = chain[0]["analysis"]
    assert analysis["matches_row"] is True and analysis["analyzer"].startswith("rules/")
    assert analysis["message_position"]["topic"].endswith(".messages")
    working = client.get("/v1/users/alice/memory", params={"layer": "working"}, headers=DEFAULT).json()
    assert working["count"] > 0 and all(row["in_working"] for row in working["rows"])


def test_keys_are_required_and_checked(client: httpx.Client) -> None:
    assert client.post("/v1/users/alice/query", json={"question": "hi"}).status_code == 401
    assert (
        client.post(
            "/v1/users/alice/query", json={"question": "hi"}, headers={"X-API-Key": "wrong-key-9999"}
        ).status_code
        == 403
    )
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/v1/users/dave/query", {"question": "What is my secret project?"}),
        ("get", "/v1/users/dave/memory?layer=archive", None),
        ("get", "/v1/users/dave/memory?layer=persona", None),
        ("get", "/v1/users/dave/memory/anything/provenance", None),
        ("post", "/v1/users/dave/research", {"query": "What is my secret project?", "depth": 2}),
        ("post", "/v1/users/dave/forget", {"item": "no-such-item", "wait_ms": 0}),
        ("post", "/v1/users/dave/feedback", {"helped": ["no-such-item"], "wait_ms": 0}),
    ],
)
def test_a_tenant_cannot_read_another_tenants_memory(
    client: httpx.Client, method: str, path: str, body: dict[str, Any] | None
) -> None:
    r = client.request(method, path, json=body, headers=ACME)
    assert r.status_code == 404 and "Zephyr" not in r.text
    own = client.request(method, path.replace("dave", "carol"), json=body, headers=ACME)
    assert own.status_code in (200, 404) and "Zephyr" not in own.text
    theirs = client.post("/v1/users/dave/query", json={"question": "What is my secret project?"}, headers=GLOBEX)
    assert theirs.status_code == 200 and "Zephyr" in theirs.text


def test_a_key_cannot_publish_for_another_tenant(client: httpx.Client) -> None:
    msg = {
        "tenant": "globex",
        "user_id": "dave",
        "speaker": "Eve",
        "text": "hijack",
        "occurred_at": "2024-03-01T00:00:00Z",
    }
    r = client.post("/v1/messages", json={"messages": [msg]}, headers=ACME)
    assert r.status_code == 403


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"question": ""}, "question"),
        ({"question": "x", "top_k": 0}, "top_k"),
        ({"question": "x", "top_k": 101}, "top_k"),
        ({"question": "x", "top_k": "10"}, "top_k"),  # not coerced
        ({"question": "x", "top_k": True}, "top_k"),
        ({"question": "x", "top_k": 2.5}, "top_k"),
        ({"question": "x", "surprise": 1}, "surprise"),
        ({"question": "x", "as_of": "not a time"}, "as_of"),
        ({"question": "x", "as_of": "2024-02-30T00:00:00Z"}, "day is out of range"),
        ({"question": "x", "as_of": "2024-03-01T09:30:00"}, "RFC 3339"),  # no offset: which time zone?
        ({"question": "x", "as_of": 1e20}, "less than or equal to 253402300799999"),
        ({"question": "x", "as_of": 10**20}, "less than or equal to 253402300799999"),
        ({"question": "x", "as_of": -(10**20)}, "greater than or equal to -62135596800000"),
        ({"question": "x", "as_of": {"time": 1, "offset": 2}}, "exactly one"),
        ({"question": "x", "as_of": {}}, "exactly one"),
        ({"question": "x", "as_of": {"time": None}}, "may not be null"),
        ({"question": "x", "as_of": {"offset": -1}}, "offset"),
        ({"question": "x", "as_of": {"offset": "3"}}, "offset"),
    ],
)
def test_malformed_queries_get_a_422_with_a_message(client: httpx.Client, body: dict[str, Any], needle: str) -> None:
    r = client.post("/v1/users/alice/query", json=body, headers=DEFAULT)
    assert r.status_code == 422 and needle in r.json()["detail"], r.text
    assert set(r.json()) == {"error", "detail"} and r.json()["error"] == "invalid_request"
    assert "Traceback" not in r.text


@pytest.mark.parametrize(
    "body",
    [
        {"question": "What food does Alice like?", "top_k": 3.0},  # JSON Schema's integer: 3.0 is one
        {"question": "What food does Alice like?", "as_of": "2024-04-01T00:00:00Z"},
        {"question": "What food does Alice like?", "as_of": "2024-04-01t08:00:00.123456789+08:00"},
        {"question": "What food does Alice like?", "as_of": 1711929600000},
        {"question": "What food does Alice like?", "as_of": {"time": "0001-01-01T00:00:00Z"}},
        {"question": "What food does Alice like?", "as_of": {"time": 253402300799999}},
        {"question": "What food does Alice like?", "as_of": {"offset": 10}},
        {"question": "What food does Alice like?", "as_of": None},
    ],
)
def test_well_formed_queries_are_answered(client: httpx.Client, body: dict[str, Any]) -> None:
    r = client.post("/v1/users/alice/query", json=body, headers=DEFAULT)
    assert r.status_code == 200, r.text


def test_as_of_means_the_same_instant_however_it_is_written(client: httpx.Client) -> None:
    times = ["2024-03-04T17:00:00+08:00", "2024-03-04T09:00:00Z", 1709542800000, {"time": 1709542800000.0}]
    answers = [
        client.post("/v1/users/alice/query", json={"question": "Where do I live?", "as_of": t}, headers=DEFAULT)
        for t in times
    ]
    assert all(a.status_code == 200 for a in answers)
    assert {a.json()["as_of"]["time"] for a in answers} == {1709542800000}


def test_unknown_user_oversized_and_non_json_bodies(client: httpx.Client) -> None:
    r = client.post("/v1/users/nobody/query", json={"question": "hi"}, headers=DEFAULT)
    assert r.status_code == 404 and r.json()["error"] == "unknown_user"
    big = client.post("/v1/messages", content=b"x" * (2 << 20), headers={**DEFAULT, "content-type": "application/json"})
    assert big.status_code == 413 and big.json()["error"] == "too_large"
    json_type = {**DEFAULT, "content-type": "application/json"}
    for garbage in (b"{not json", b'{"question": "\xff"}', b"\xff\xfe{}"):  # bad syntax; not UTF-8
        r = client.post("/v1/users/alice/query", content=garbage, headers=json_type)
        assert r.status_code == 400 and r.json()["error"] == "invalid_json", (garbage, r.text)
        assert set(r.json()) == {"error", "detail"}


def test_publishing_validates_all_or_nothing(client: httpx.Client, built: tuple[Settings, str]) -> None:
    good = {"user_id": "alice", "speaker": "Alice", "text": "I adopted Mochi.", "occurred_at": "2024-05-01T00:00:00Z"}
    health = client.get("/health").json()
    before = health["lag"]["analysis"]
    for bad, needle in [
        ({**good, "text": ""}, "messages.1.text"),
        ({**good, "text": " \u3000\n"}, "messages.1.text: Value error, is blank"),
        ({**good, "occurred_at": 1e20}, "messages.1.occurred_at"),
        ({**good, "occurred_at": "1:56 pm on 8 May, 2023"}, "messages.1.occurred_at"),  # the CLI's LoCoMo form
        ({**good, "user_id": 7}, "messages.1.user_id"),
        ({**good, "event_id": "not-a-uuid"}, "messages.1.event_id"),
        ({**good, "metadata": {"n": 1}}, "messages.1.metadata"),
        ({**good, "text": "字" * 11_000}, "over the limit of 32768"),  # 33,000 bytes in 11,000 characters
    ]:
        r = client.post("/v1/messages", json={"messages": [good, bad]}, headers=DEFAULT)
        assert r.status_code == 422 and needle in r.json()["detail"], r.text
    assert client.get("/health").json()["lag"]["analysis"] == before
    ok = client.post("/v1/messages", json={"messages": [good]}, headers=DEFAULT)
    assert ok.status_code == 202 and ok.json()["published"] == 1
    assert client.get("/health").json()["lag"]["analysis"] == before + 1  # published, not analysed yet
    # The same message written the other way (speaker object, integer ms): the same event id.
    again = {**good, "speaker": {"name": "Alice", "role": "user"}, "occurred_at": 1714521600000, "tenant": "default"}
    r = client.post("/v1/messages", json={"messages": [again]}, headers=DEFAULT)
    assert r.status_code == 202 and r.json()["event_ids"] == ok.json()["event_ids"], r.text


def test_the_python_client_mirrors_the_api(client: httpx.Client) -> None:
    c = MemoryClient(str(client.base_url), api_key=DEFAULT_KEY)
    answer = c.query("xiaoming", "我喜欢吃什么？", top_k=3)
    assert answer["items"] and answer["user_id"] == "xiaoming"
    assert c.memory("xiaoming", "persona")["count"] > 0
    with pytest.raises(ServiceError) as info:
        c.query("nobody", "hi")
    assert info.value.status == 404
    c.close()


def test_research_answers_in_rounds_with_graded_items(client: httpx.Client) -> None:
    body = {"query": "我为什么开始健身？", "depth": 2, "memory_hints": ["体检"], "top_k": 5}
    r = client.post("/v1/users/xiaoming/research", json=body, headers=DEFAULT)
    assert r.status_code == 200, r.text
    found = r.json()
    assert found["user_id"] == "xiaoming" and found["confidence"] in ("high", "medium", "low") and found["because"]
    assert 1 <= len(found["rounds"]) <= 2 and found["rounds"][0]["cues"] == ["体检"]
    assert 0 < len(found["items"]) <= 5
    for item in found["items"]:
        assert item["provenance"] and 0 < item["grade"]["score"] <= 1 and item["round"] in (1, 2)
    c = MemoryClient(str(client.base_url), api_key=DEFAULT_KEY)
    same = c.research("xiaoming", "我为什么开始健身？", depth=2, memory_hints=["体检"], top_k=5)
    assert [i["id"] for i in same["items"]] == [i["id"] for i in found["items"]]
    c.close()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"query": "   "}, "query"),
        ({"query": "why?", "depth": 0}, "depth"),
        ({"query": "why?", "depth": 6}, "depth"),
        ({"query": "why?", "memory_hints": ["x"] * 21}, "memory_hints"),
        ({"query": "why?", "deep": True}, "deep"),
    ],
)
def test_malformed_research_requests_get_a_422_with_a_message(
    client: httpx.Client, body: dict[str, Any], needle: str
) -> None:
    r = client.post("/v1/users/xiaoming/research", json=body, headers=DEFAULT)
    assert r.status_code == 422 and needle in r.text, r.text


def test_openapi_description_lists_the_endpoints(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/users/{user}/query",
        "/v1/users/{user}/research",
        "/v1/users/{user}/memory",
        "/v1/users/{user}/memory/{item}/provenance",
        "/v1/messages",
        "/health",
    } <= set(paths)


def test_open_mode_without_keys(built: tuple[Settings, str], tmp_path: Path) -> None:
    settings, store = built
    app = create_app(settings, Retriever(open_store(store, read_only=True), _embedder()), None, api_keys="")
    with serving(app) as c:
        assert c.post("/v1/users/alice/query", json={"question": "hi"}).status_code == 200
        assert c.get("/health").json()["auth"] == "open"
        message = {"user_id": "alice", "speaker": "Alice", "text": "hi", "occurred_at": 0}
        r = c.post("/v1/messages", json={"messages": [message]})
        assert r.status_code == 503 and r.json()["error"] == "log_unavailable"  # started without a log
        assert "security" not in str(c.get("/openapi.json").json())  # no keys to declare


@pytest.mark.kafka
def test_the_api_over_projections_built_from_the_real_broker(
    settings: Settings, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Publish through the API to Kafka, project from Kafka, ask through the API."""
    settings = Settings(
        log_url=f"kafka://{kafka_bootstrap}",
        store_url=str(tmp_path / "store"),
        topic_prefix=settings.topic_prefix,
        partitions=2,
        home=settings.home,  # the session's temporary keystores
    )
    lines = [json.loads(x) for x in SAMPLE.decode().splitlines() if x.strip()]

    async def project() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        await run_pipeline(
            log, Projector(open_store(settings.store)), MemoryAgent(RuleExtractor(), _embedder()), settings
        )
        await log.stop()

    retriever = Retriever(open_store(settings.store, read_only=True), _embedder())
    app = create_app(settings, retriever, open_log(settings.log_url, settings), api_keys=KEYS)
    with serving(app) as c:
        r = c.post("/v1/messages", json={"messages": lines}, headers=DEFAULT)
        assert r.status_code == 202 and r.json()["published"] == 29
        assert c.get("/health").json()["lag"]["analysis"] == 29
        asyncio.run(project())
        health = c.get("/health").json()["lag"]
        assert (health["analysis"], health["projection"]) == (0, 0)
        answer = c.post("/v1/users/xiaoming/query", json={"question": "我对什么过敏？", "top_k": 5}, headers=DEFAULT)
        assert answer.status_code == 200
        assert any("花生" in i["content"] for i in answer.json()["items"])
        prov = [p for i in answer.json()["items"] for p in i["provenance"]]
        assert all(p["source_topic"] == settings.topic("analyses") for p in prov)


def test_a_query_reads_the_owner_once_tenant_check_included(
    built: tuple[Settings, str], loads: Callable[[MemoryStore], list[str]]
) -> None:
    settings, store = built
    reader = open_store(store, read_only=True)
    loaded = loads(reader)
    no_hot_owners = dataclasses.replace(SEED_DEFAULT, cache=CacheSettings(hot_owners=0))  # nothing kept
    app = create_app(settings, Retriever(reader, _embedder(), no_hot_owners), api_keys=KEYS)
    with serving(app) as c:
        for question in ("What food does Alice like?", "Where does Alice work?"):
            r = c.post("/v1/users/alice/query", json={"question": question}, headers=DEFAULT)
            assert r.status_code == 200, r.text
        assert loaded == ["default:alice", "default:alice"]  # one load per request
        r = c.post("/v1/users/dave/query", json={"question": "What is my secret project?"}, headers=ACME)
        assert r.status_code == 404 and "Zephyr" not in r.text and loaded.count("acme:dave") == 1


@pytest.mark.parametrize("question", ["   ", " \u3000\n"])
def test_a_blank_question_is_refused_as_on_the_command_line(client: httpx.Client, question: str) -> None:
    r = client.post("/v1/users/alice/query", json={"question": question}, headers=DEFAULT)
    assert r.status_code == 422 and "question" in r.json()["detail"] and "blank" in r.json()["detail"], r.text


def test_an_oversized_question_or_message_says_what_is_too_large(client: httpx.Client) -> None:
    huge = "x" * (2 << 20)
    r = client.post("/v1/users/alice/query", json={"question": huge}, headers=DEFAULT)
    assert r.status_code == 413 and "a question holds at most 2000 characters" in r.json()["detail"], r.text
    message = {"user_id": "alice", "speaker": "Alice", "text": huge, "occurred_at": "2024-05-01T00:00:00Z"}
    r = client.post("/v1/messages", json={"messages": [message]}, headers=DEFAULT)
    detail = r.json()["detail"]
    assert r.status_code == 413 and "a message's text holds at most 32768 bytes" in detail, r.text


def test_occurred_at_defaults_to_when_the_service_receives_the_message(
    client: httpx.Client, built: tuple[Settings, str]
) -> None:
    """As the CLI, the Python client and MCP do: absent (or null) is now, stamped at the API's edge."""
    before = int(time.time() * 1000)
    messages = [
        {"user_id": "erin", "speaker": "Erin", "text": "I keep bees."},
        {"user_id": "erin", "speaker": "Erin", "text": "I keep bees.", "occurred_at": None},
    ]
    r = client.post("/v1/messages", json={"messages": messages}, headers=DEFAULT)
    after = int(time.time() * 1000)
    assert r.status_code == 202 and r.json()["published"] == 2, r.text
    settings = built[0]

    async def times() -> list[int]:
        log = open_log(settings.log_url, settings)
        await log.start()
        try:
            rows = [row async for row in read_as_json(log, settings.topic("messages"), user="erin")]
        finally:
            await log.stop()
        return [parse_time(row["event"]["occurred_at"]) for row in rows]

    stamped = asyncio.run(times())
    assert len(stamped) == 2 and stamped[0] < stamped[1], stamped  # in the order sent: two messages, not one
    assert all(before <= t <= after + 1 for t in stamped), (before, stamped, after)


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded", "text/plain"])
def test_a_body_not_declared_as_json_is_told_how_to_send_it(client: httpx.Client, content_type: str | None) -> None:
    headers = {**DEFAULT, **({"content-type": content_type} if content_type else {})}
    r = client.post("/v1/users/alice/query", content=b'{"question": "What food do I like?"}', headers=headers)
    assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type", r.text
    assert "content-type: application/json" in r.json()["detail"] and (content_type or "none") in r.json()["detail"]
