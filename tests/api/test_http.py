"""The HTTP query service over real projections: answers, provenance, tenants, and bad input."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.api.app import create_app
from adamem.api.client import MemoryClient, ServiceError
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store import MemoryStore
from adamem.projections.store.factory import open_store
from adamem.retrieval import SEED_DEFAULT, CacheSettings
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from tests.conftest import serving

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
KEYS = "acme:acme-key-0001,globex:globex-key-0002,default:default-key-0003"
ACME = {"X-API-Key": "acme-key-0001"}
GLOBEX = {"X-API-Key": "globex-key-0002"}
DEFAULT = {"X-API-Key": "default-key-0003"}


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


def _tenant_lines() -> bytes:
    rows = [
        {
            "tenant": "acme",
            "user_id": "carol",
            "speaker": "Carol",
            "text": "I love sailing on weekends.",
            "occurred_at": "2024-02-01T10:00:00Z",
            "conversation_id": "a1",
        },
        {
            "tenant": "globex",
            "user_id": "dave",
            "speaker": "Dave",
            "text": "My secret project is called Zephyr.",
            "occurred_at": "2024-02-01T10:00:00Z",
            "conversation_id": "g1",
        },
    ]
    return "\n".join(json.dumps(r) for r in rows).encode()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str]:
    root = tmp_path_factory.mktemp("api")
    settings = Settings(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False)

    async def build() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        await publish_messages(
            log, load_messages(SAMPLE, settings) + load_messages(_tenant_lines(), settings), settings
        )
        await run_pipeline(
            log, Projector(open_store(settings.store_url)), MemoryAgent(RuleExtractor(), _embedder()), settings
        )
        await log.stop()

    asyncio.run(build())
    return settings, settings.store_url


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
    ("body", "status", "needle"),
    [
        ({"question": ""}, 422, "question"),
        ({"question": "x", "top_k": 0}, 422, "top_k"),
        ({"question": "x", "surprise": 1}, 422, "surprise"),
        ({"question": "x", "as_of": "not a time"}, 400, "as_of"),
        ({"question": "x", "as_of": {"time": 1, "offset": 2}}, 400, "exactly one"),
    ],
)
def test_malformed_queries_get_a_4xx_with_a_message(
    client: httpx.Client, body: dict[str, Any], status: int, needle: str
) -> None:
    r = client.post("/v1/users/alice/query", json=body, headers=DEFAULT)
    assert r.status_code == status and needle in r.json()["detail"]
    assert "Traceback" not in r.text


def test_unknown_user_oversized_and_non_json_bodies(client: httpx.Client) -> None:
    r = client.post("/v1/users/nobody/query", json={"question": "hi"}, headers=DEFAULT)
    assert r.status_code == 404 and r.json()["error"] == "unknown_user"
    big = client.post("/v1/messages", content=b"x" * (2 << 20), headers={**DEFAULT, "content-type": "application/json"})
    assert big.status_code == 413
    garbage = client.post(
        "/v1/users/alice/query", content=b"{not json", headers={**DEFAULT, "content-type": "application/json"}
    )
    assert garbage.status_code == 422


def test_publishing_validates_all_or_nothing(client: httpx.Client, built: tuple[Settings, str]) -> None:
    good = {"user_id": "alice", "speaker": "Alice", "text": "I adopted Mochi.", "occurred_at": "2024-05-01T00:00:00Z"}
    bad = {"user_id": "alice", "speaker": "Alice", "text": "", "occurred_at": "2024-05-01T00:00:00Z"}
    health = client.get("/health").json()
    before = health["lag"]["analysis"]
    r = client.post("/v1/messages", json={"messages": [good, bad]}, headers=DEFAULT)
    assert r.status_code == 400 and "'text' is empty" in r.json()["detail"]
    assert client.get("/health").json()["lag"]["analysis"] == before
    ok = client.post("/v1/messages", json={"messages": [good]}, headers=DEFAULT)
    assert ok.status_code == 202 and ok.json()["published"] == 1
    assert client.get("/health").json()["lag"]["analysis"] == before + 1  # published, not analysed yet


def test_the_python_client_mirrors_the_api(client: httpx.Client) -> None:
    c = MemoryClient(str(client.base_url), api_key="default-key-0003")
    answer = c.query("xiaoming", "我喜欢吃什么？", top_k=3)
    assert answer["items"] and answer["user_id"] == "xiaoming"
    assert c.memory("xiaoming", "persona")["count"] > 0
    with pytest.raises(ServiceError) as info:
        c.query("nobody", "hi")
    assert info.value.status == 404
    c.close()


def test_openapi_description_lists_the_endpoints(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/users/{user}/query",
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
        assert c.post("/v1/messages", json={"messages": [{"x": 1}]}).status_code == 400  # no log given


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
    )
    lines = [json.loads(x) for x in SAMPLE.decode().splitlines() if x.strip()]

    async def project() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        await run_pipeline(
            log, Projector(open_store(settings.store_url)), MemoryAgent(RuleExtractor(), _embedder()), settings
        )
        await log.stop()

    retriever = Retriever(open_store(settings.store_url, read_only=True), _embedder())
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
