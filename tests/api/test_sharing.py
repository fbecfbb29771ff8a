"""Memory shared with another tenant only under a confirmed grant, within its scope, masked and audited.

Tenant ``acme``'s alice (English and Chinese) talks about her health in March, about food and a
work secret (Zephyr) in March, and about her health again in June. Tenant ``clinic`` has an alice
of its own, whose secret is Orion. acme's alice grants the clinic her health messages of March,
in the archive, working and episodic layers; the clinic's key then reads exactly that, with phone,
e-mail, ID numbers and health terms masked, and every read lands on alice's audit trail.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.api.app import create_app
from adamem.api.notice import ServiceNotice
from adamem.owners import owner_key
from adamem.projections.folds.rows import GrantRow
from adamem.projections.store.factory import open_store
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.follow import Follower
from adamem.streams.replay import rebuild_owner
from tests.api.conftest import embedder
from tests.conftest import serving

KEYS = "acme:acme-key-000000000001,clinic:clinic-key-0000000002,shop:shop-key-00000000000003"
ACME = {"X-API-Key": "acme-key-000000000001"}
CLINIC = {"X-API-Key": "clinic-key-0000000002"}
SHOP = {"X-API-Key": "shop-key-00000000000003"}
AS_CLINIC = {**CLINIC, "X-Tenant": "acme"}  # the clinic's key, reading acme's alice
AS_SHOP = {**SHOP, "X-Tenant": "acme"}
PHONE, EMAIL, ID_NUMBER = "13812345678", "alice.w@example.com", "11010519491231002X"

TEXTS = [
    (
        "2024-03-01T09:00:00Z",
        "c1",
        f"I saw the doctor at the hospital and I was diagnosed with asthma. Call me at {PHONE}.",
    ),
    ("2024-03-01T09:05:00Z", "c1", f"医生说我有高血压，要按时吃药。我的身份证号是{ID_NUMBER}。"),
    ("2024-03-02T09:00:00Z", "c1", f"The clinic can e-mail the blood test results to {EMAIL}."),
    ("2024-03-03T19:00:00Z", "c1", "I love spicy hotpot with my friends on Fridays."),
    ("2024-03-04T10:00:00Z", "c1", "My company project Zephyr launches next month."),
    ("2024-06-01T09:00:00Z", "c2", "The doctor at the hospital said my blood pressure is fine now."),
    ("2024-06-02T09:00:00Z", "c3", "我周末去公园散步。"),
]


def _messages(tenant: str, texts: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [
        {
            "tenant": tenant,
            "user_id": "alice",
            "speaker": "Alice",
            "text": text,
            "occurred_at": at,
            "conversation_id": conv,
            "message_id": f"m{i}",
        }
        for i, (at, conv, text) in enumerate(texts)
    ]


def _agent(settings: Settings) -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), embedder(), settings.generation)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Settings]]:
    root: Path = tmp_path_factory.mktemp("sharing")
    settings = Settings(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False, embedded_partitions=2)
    log = open_log(settings.log_url, settings)
    writer = Follower(log, settings, _agent, poll_s=0.2)
    retriever = Retriever(open_store(settings.store, read_only=True), embedder())
    with serving(create_app(settings, retriever, log, api_keys=KEYS, writer=writer)) as client:
        for tenant, texts, headers in (
            ("acme", TEXTS, ACME),
            ("clinic", [("2024-03-01T09:00:00Z", "k1", "My own project is called Orion.")], CLINIC),
        ):
            r = client.post("/v1/messages", json={"messages": _messages(tenant, texts)}, headers=headers)
            assert r.status_code == 202, r.text
            positions = r.json()["positions"]
            for _ in range(12):  # the first batch also loads the embedder: ask again while it is not visible
                r = client.post("/v1/visible", json={"positions": positions, "wait_ms": 5000}, headers=headers)
                if r.status_code != 409:
                    break
            assert r.status_code == 200, r.text
        # as `adamem serve` does: hold the log's writer lock and say where it serves (the MCP server asks it)
        log.hold_writer_lock()
        folder = settings.log.folder
        assert folder is not None
        ServiceNotice(folder).write(client.base_url.host, client.base_url.port or 80)
        yield client, settings


def _grant(client: httpx.Client, **scope: Any) -> dict[str, Any]:
    body = {
        "grantee_tenant": "clinic",
        "layers": ["archive", "working", "episodic"],
        "topics": ["health"],
        "from": "2024-03-01T00:00:00Z",
        "until": "2024-03-31T23:59:59Z",
        **scope,
    }
    r = client.post("/v1/users/alice/grants", json=body, headers=ACME)
    assert r.status_code == 201, r.text
    return r.json()


def _reads(client: httpx.Client, headers: dict[str, str], item: str = "none") -> list[httpx.Response]:
    return [
        client.post("/v1/users/alice/query", json={"question": "What did the doctor say?"}, headers=headers),
        client.post("/v1/users/alice/research", json={"query": "What did the doctor say?"}, headers=headers),
        client.get("/v1/users/alice/memory?layer=archive", headers=headers),
        client.get(f"/v1/users/alice/memory/{item}/provenance", headers=headers),
    ]


def _owner_rows(client: httpx.Client, layer: str = "archive") -> list[dict[str, Any]]:
    r = client.get(f"/v1/users/alice/memory?layer={layer}", headers=ACME)
    assert r.status_code == 200, r.text
    return list(r.json()["rows"])


def _message_id(client: httpx.Client, fragment: str) -> str:
    return next(row["id"] for row in _owner_rows(client) if fragment in row["text"])


def test_without_a_grant_another_tenant_gets_the_same_refusal_as_for_an_owner_that_does_not_exist(
    served: tuple[httpx.Client, Settings],
) -> None:
    client, _ = served
    for r in _reads(client, AS_CLINIC):
        assert r.status_code == 403, r.text
    nobody = client.post("/v1/users/nobody/query", json={"question": "What did the doctor say?"}, headers=AS_CLINIC)
    first = _reads(client, AS_CLINIC)[0]
    assert (nobody.status_code, nobody.json()) == (first.status_code, first.json())
    own = client.post("/v1/users/alice/query", json={"question": "What is my project called?"}, headers=CLINIC)
    assert own.status_code == 200 and "Orion" in own.text and "Zephyr" not in own.text


def test_a_pending_grant_sees_nothing_and_only_the_owner_can_grant_or_confirm(
    served: tuple[httpx.Client, Settings],
) -> None:
    client, _ = served
    grant = _grant(client)
    assert grant["status"] == "pending" and grant["grantee_tenant"] == "clinic"
    for r in _reads(client, AS_CLINIC):
        assert r.status_code == 403, r.text
    gid = grant["grant_id"]
    # the grantee cannot grant itself, nor confirm the owner's grant, nor find it under its own alice
    scope = {"grantee_tenant": "clinic", "layers": ["persona"]}
    assert client.post("/v1/users/alice/grants", json=scope, headers=AS_CLINIC).status_code == 403
    assert client.post(f"/v1/users/alice/grants/{gid}/confirm", headers=AS_CLINIC).status_code == 403
    assert client.post(f"/v1/users/alice/grants/{gid}/confirm", headers=CLINIC).status_code == 404
    assert client.get("/v1/users/alice/grants", headers=AS_CLINIC).status_code == 403
    assert client.get("/v1/users/alice/audit", headers=AS_CLINIC).status_code == 403
    # an owner does not grant its own tenant, nor an empty time range
    own = client.post("/v1/users/alice/grants", json={**scope, "grantee_tenant": "acme"}, headers=ACME)
    assert own.status_code == 422
    empty = {**scope, "from": "2024-04-01T00:00:00Z", "until": "2024-03-01T00:00:00Z"}
    assert client.post("/v1/users/alice/grants", json=empty, headers=ACME).status_code == 422
    listed = client.get("/v1/users/alice/grants", headers=ACME).json()["grants"]
    assert [g["grant_id"] for g in listed if g["status"] == "pending"] == [gid]
    revoked = client.delete(f"/v1/users/alice/grants/{gid}", headers=ACME)
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"


@pytest.fixture(scope="module")
def active(served: tuple[httpx.Client, Settings]) -> dict[str, Any]:
    client, _ = served
    grant = _grant(client)
    r = client.post(f"/v1/users/alice/grants/{grant['grant_id']}/confirm", headers=ACME)
    assert r.status_code == 200 and r.json()["status"] == "active", r.text
    return dict(r.json())


def _covered(text: str) -> bool:
    """What the grant covers: March's health messages (as the grantee sees them, masked)."""
    return "Zephyr" not in text and "hotpot" not in text and "fine now" not in text and "公园" not in text


def test_the_grantee_queries_within_the_scope_only_with_sensitive_data_masked(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, _ = served
    for question in ("What did the doctor say?", "What is my project called? Do I like hotpot?", "医生说了什么？"):
        r = client.post("/v1/users/alice/query", json={"question": question, "top_k": 3}, headers=AS_CLINIC)
        assert r.status_code == 200, r.text
        items = r.json()["items"]
        assert len(items) == 3  # filled from covered items, not cut to fewer
        assert [i["rank"] for i in items] == [1, 2, 3]
        for item in items:
            assert item["layer"] in active["layers"] and item["hop_path"] == []
            assert _covered(item["content"]), item
            assert all(p["occurred_at"] < 1711929600000 for p in item["provenance"])  # before April
        assert "Orion" not in r.text and "Zephyr" not in r.text
        for raw in (PHONE, EMAIL, ID_NUMBER, "asthma", "高血压", "diagnosed"):
            assert raw not in r.text
    questions = ("doctor hospital asthma phone", "blood test e-mail", "医生 高血压 身份证")
    answers = [
        client.post("/v1/users/alice/query", json={"question": q, "top_k": 10}, headers=AS_CLINIC) for q in questions
    ]
    texts = " ".join(i["content"] for a in answers for i in a.json()["items"])
    for marker in ("[phone]", "[email]", "[id]", "[health]"):
        assert marker in texts, texts


def test_the_grantee_lists_only_granted_layers_and_covered_rows(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, _ = served
    r = client.get("/v1/users/alice/memory?layer=archive", headers=AS_CLINIC)
    assert r.status_code == 200, r.text
    rows = r.json()["rows"]
    owner = _owner_rows(client)
    assert len(owner) == len(TEXTS) and len(rows) == 3  # the three health messages of March
    assert all(_covered(row["text"]) for row in rows)
    assert PHONE not in r.text and ID_NUMBER not in r.text and EMAIL not in r.text
    assert "[phone]" in r.text and "[id]" in r.text and "[email]" in r.text
    for layer in ("persona", "graph"):
        assert client.get(f"/v1/users/alice/memory?layer={layer}", headers=AS_CLINIC).status_code == 403
    episodic = client.get("/v1/users/alice/memory?layer=episodic", headers=AS_CLINIC)
    assert episodic.status_code == 200 and all(_covered(row["content"]) for row in episodic.json()["rows"])


def test_provenance_under_a_grant_answers_covered_items_only(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, _ = served
    covered, zephyr = _message_id(client, "asthma"), _message_id(client, "Zephyr")
    r = client.get(f"/v1/users/alice/memory/{covered}/provenance", headers=AS_CLINIC)
    assert r.status_code == 200, r.text
    assert "[phone]" in r.text and PHONE not in r.text and "Zephyr" not in r.text
    hidden = client.get(f"/v1/users/alice/memory/{zephyr}/provenance", headers=AS_CLINIC)
    missing = client.get("/v1/users/alice/memory/no-such-item/provenance", headers=AS_CLINIC)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["detail"].replace(zephyr, "X") == missing.json()["detail"].replace("no-such-item", "X")


def test_research_under_a_grant_keeps_to_the_scope(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, _ = served
    body = {"query": "What did the doctor say about my project and hotpot?", "depth": 3}
    r = client.post("/v1/users/alice/research", json=body, headers=AS_CLINIC)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["items"] and all(_covered(i["content"]) for i in answer["items"])
    assert "Zephyr" not in r.text and PHONE not in r.text


def test_a_grant_is_read_only_and_for_its_grantee_only(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, _ = served
    item = _message_id(client, "asthma")
    assert client.post("/v1/users/alice/forget", json={"item": item}, headers=AS_CLINIC).status_code == 403
    message = _messages("acme", [("2024-03-05T09:00:00Z", "c9", "Injected by the clinic.")])
    assert client.post("/v1/messages", json={"messages": message}, headers=CLINIC).status_code == 403
    for r in _reads(client, AS_SHOP, item):
        assert r.status_code == 403, r.text
    other = client.post(
        "/v1/users/alice/query", json={"question": "doctor"}, headers={**AS_CLINIC, "X-Grant": "not-a-grant"}
    )
    assert other.status_code == 403


def test_every_read_under_a_grant_is_on_the_owners_audit_trail(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, _ = served
    before = client.get("/v1/users/alice/audit", headers=ACME).json()["reads"]
    r = client.post(
        "/v1/users/alice/query", json={"question": "What did the doctor say?", "top_k": 2}, headers=AS_CLINIC
    )
    client.post("/v1/users/alice/query", json={"question": "What did the doctor say?"}, headers=ACME)  # not audited
    reads = client.get("/v1/users/alice/audit", headers=ACME).json()["reads"]
    assert len(reads) == len(before) + 1
    last = reads[-1]
    assert last["grant_id"] == active["grant_id"] and last["grantee_tenant"] == "clinic"
    assert last["endpoint"] == "POST /v1/users/{user}/query"
    assert last["item_ids"] == [i["id"] for i in r.json()["items"]]
    assert last["occurred_at"].endswith("Z")
    assert {x["endpoint"] for x in reads} >= {"GET /v1/users/{user}/memory?layer=archive"}
    own = client.get("/v1/users/alice/audit", headers=CLINIC).json()
    assert own["tenant"] == "clinic" and own["reads"] == []  # the clinic's own alice was never shared


def test_a_grant_with_sensitive_data_shows_it_and_x_grant_picks_it(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, _ = served
    wide = _grant(client, include_sensitive=True, topics=[], layers=["archive"])
    client.post(f"/v1/users/alice/grants/{wide['grant_id']}/confirm", headers=ACME)
    picked = {**AS_CLINIC, "X-Grant": wide["grant_id"]}
    r = client.get("/v1/users/alice/memory?layer=archive", headers=picked)
    assert r.status_code == 200 and PHONE in r.text and ID_NUMBER in r.text
    assert "hotpot" in r.text and "fine now" not in r.text  # every topic, still March only
    narrow = client.get("/v1/users/alice/memory?layer=archive", headers={**AS_CLINIC, "X-Grant": active["grant_id"]})
    assert PHONE not in narrow.text and "hotpot" not in narrow.text
    assert client.delete(f"/v1/users/alice/grants/{wide['grant_id']}", headers=ACME).json()["status"] == "revoked"
    assert client.get("/v1/users/alice/memory?layer=archive", headers=picked).status_code == 403


def test_revocation_takes_effect_on_the_next_read_and_survives_a_replay(
    served: tuple[httpx.Client, Settings], active: dict[str, Any]
) -> None:
    client, settings = served
    gid = active["grant_id"]
    assert client.post("/v1/users/alice/query", json={"question": "doctor"}, headers=AS_CLINIC).status_code == 200
    r = client.delete(f"/v1/users/alice/grants/{gid}", headers=ACME)
    assert r.status_code == 200 and r.json()["status"] == "revoked"
    for read in _reads(client, AS_CLINIC, _message_id(client, "asthma")):
        assert read.status_code == 403, read.text
    again = client.post(f"/v1/users/alice/grants/{gid}/confirm", headers=ACME)
    assert again.status_code == 422  # a revoked grant stays revoked

    store = open_store(settings.store, read_only=True)
    before = sorted((r for r in store.rows("grants", owner_key("acme", "alice")) if isinstance(r, GrantRow)), key=str)
    store.close()
    assert {g.status for g in before} == {"revoked"} and len(before) == 3

    async def replay() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        store = open_store(settings.store, read_only=True)
        try:
            report = await rebuild_owner(log, store, settings, owner_key("acme", "alice"), verify_only=True)
        finally:
            store.close()
            await log.stop()
        # the owner folded again from the log equals the live rows, its three revoked grants included
        assert report.verified is True and not report.diffs and report.checksum == report.live_checksum

    asyncio.run(replay())
    assert client.post("/v1/users/alice/query", json={"question": "doctor"}, headers=AS_CLINIC).status_code == 403


def test_grant_bodies_are_checked() -> None:
    from adamem.api.grant_models import GrantBody

    body = GrantBody.model_validate({"grantee_tenant": "clinic", "layers": ["episodic"], "from": 0})
    assert body.from_ == 0 and body.topics == [] and not body.include_sensitive
    for bad in ({"grantee_tenant": "clinic", "layers": []}, {"grantee_tenant": " ", "layers": ["episodic"]}):
        with pytest.raises(ValueError):
            GrantBody.model_validate(bad)
    assert json.dumps(GrantBody.model_json_schema())  # described for the OpenAPI document


def test_a_method_the_grants_path_does_not_serve_names_every_method_it_does(
    served: tuple[httpx.Client, Settings],
) -> None:
    client, _ = served
    r = client.request("PUT", "/v1/users/alice/grants", headers=ACME)
    assert r.status_code == 405 and r.json()["error"] == "method_not_allowed"
    assert r.headers["allow"] == "GET, POST" and r.json()["detail"].endswith("allowed: GET, POST")
    gone = client.request("PUT", "/v1/users/alice/grants/g1", headers=ACME)
    assert gone.status_code == 405 and gone.headers["allow"] == "DELETE"


def test_the_clients_grant_confirm_read_under_and_revoke(served: tuple[httpx.Client, Settings]) -> None:
    from adamem.api.client import AsyncMemoryClient, MemoryClient, ServiceError

    client, _ = served
    url = str(client.base_url)
    with (
        MemoryClient(url, api_key=ACME["X-API-Key"]) as owner,
        MemoryClient(url, api_key=CLINIC["X-API-Key"], tenant="acme") as clinic,
    ):
        grant = owner.grant("alice", "clinic", ["episodic"], topics=["health"], start="2024-03-01T00:00:00Z")
        assert grant["status"] == "pending" and grant["from"] == "2024-03-01T00:00:00Z"
        with pytest.raises(ServiceError) as refused:
            clinic.memory("alice", "episodic")
        assert refused.value.status == 403
        assert owner.confirm_grant("alice", grant["grant_id"])["status"] == "active"
        rows = clinic.memory("alice", "episodic")["rows"]
        assert rows and all(_covered(r["content"]) for r in rows)
        assert any(g["grant_id"] == grant["grant_id"] for g in owner.grants("alice")["grants"])

        async def audited() -> list[dict[str, Any]]:
            async with AsyncMemoryClient(url, api_key=ACME["X-API-Key"]) as a:
                return list((await a.audit("alice"))["reads"])

        assert asyncio.run(audited())[-1]["grant_id"] == grant["grant_id"]
        assert owner.revoke_grant("alice", grant["grant_id"])["status"] == "revoked"
        with pytest.raises(ServiceError):
            clinic.memory("alice", "episodic")


async def test_mcp_reads_under_a_grant_through_the_query_service_and_nothing_else(
    served: tuple[httpx.Client, Settings],
) -> None:
    from adamem.integrations.mcp_server import build_server, http_app
    from adamem.memory import Memory
    from tests.integrations.test_mcp import _http, _text

    client, settings = served
    grant = _grant(client)
    gid = grant["grant_id"]
    assert client.post(f"/v1/users/alice/grants/{gid}/confirm", headers=ACME).json()["status"] == "active"
    memory = Memory(settings)
    try:
        with serving(http_app(build_server(memory, api_keys=KEYS), KEYS)) as plain:
            url = f"{str(plain.base_url).rstrip('/')}/mcp"
            initialize = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            accept = {"Accept": "application/json, text/event-stream"}
            refused = plain.post(
                "/mcp", json=initialize, headers={**accept, **AS_CLINIC}
            )  # no grant named: refused as for any other tenant
            assert refused.status_code == 403
            async with _http(url, {**AS_CLINIC, "X-Grant": gid}) as mcp:
                found = await mcp.call_tool(
                    "recall", {"user_id": "alice", "question": "What did the doctor say?", "top_k": 3}
                )
                assert not found.is_error, _text(found)
                items = found.structured_content["items"]
                assert len(items) == 3 and all(_covered(i["content"]) for i in items)
                assert PHONE not in _text(found) and "Zephyr" not in _text(found) and "Orion" not in _text(found)
                research = await mcp.call_tool("research", {"user_id": "alice", "query": "doctor and my project?"})
                assert not research.is_error and "Zephyr" not in _text(research)
                for tool, args in (
                    ("persona", {"user_id": "alice"}),
                    ("timeline", {"user_id": "alice", "start": 0, "end": 1_800_000_000_000}),
                    ("remember", {"user_id": "alice", "messages": [{"text": "Injected."}]}),
                    ("forget", {"user_id": "alice", "everything": True}),
                ):
                    denied = await mcp.call_tool(tool, args)
                    assert denied.is_error and "acts for its own tenant" in _text(denied), (tool, _text(denied))
            reads = client.get("/v1/users/alice/audit", headers=ACME).json()["reads"]
            assert [r["endpoint"] for r in reads[-2:]] == [
                "POST /v1/users/{user}/query",
                "POST /v1/users/{user}/research",
            ]
            assert reads[-2]["item_ids"] == [i["id"] for i in items]
            client.delete(f"/v1/users/alice/grants/{gid}", headers=ACME)
            async with _http(url, {**AS_CLINIC, "X-Grant": gid}) as mcp:
                after = await mcp.call_tool("recall", {"user_id": "alice", "question": "What did the doctor say?"})
                assert after.is_error and "403" in _text(after)
        assert len(client.get("/v1/users/alice/memory?layer=archive", headers=ACME).json()["rows"]) == len(TEXTS)
    finally:
        memory.close()


def test_an_expired_grant_gives_no_access(served: tuple[httpx.Client, Settings]) -> None:
    client, _ = served
    past = _grant(client, expires_at="2020-01-01T00:00:00Z")
    future = _grant(client, expires_at="2999-01-01T00:00:00Z", layers=["episodic"])
    for grant in (past, future):
        assert client.post(f"/v1/users/alice/grants/{grant['grant_id']}/confirm", headers=ACME).status_code == 200
    expired = client.get("/v1/users/alice/memory?layer=archive", headers={**AS_CLINIC, "X-Grant": past["grant_id"]})
    assert expired.status_code == 403
    assert client.get("/v1/users/alice/memory?layer=archive", headers=AS_CLINIC).status_code == 403  # only episodic
    assert client.get("/v1/users/alice/memory?layer=episodic", headers=AS_CLINIC).status_code == 200
    for grant in (past, future):
        client.delete(f"/v1/users/alice/grants/{grant['grant_id']}", headers=ACME)


def test_the_audit_trail_is_in_the_order_of_the_reads_within_one_second() -> None:
    """A read exactly on a second comes before a later read of the same second."""
    from adamem.api.sharing import audit_trail
    from adamem.events import MemoryRead
    from adamem.schemas.serde import encode_event
    from adamem.streams.log import OutgoingRecord

    settings = Settings(log_url="memory://")
    log = open_log(settings.log_url, settings)
    second = 1_733_000_000_000
    reads = [
        MemoryRead(
            event_id=str(uuid.UUID(int=i + 1)),
            user_id="alice",
            tenant="acme",
            grant_id="g",
            grantee_tenant="clinic",
            endpoint="POST /v1/users/{user}/query",
            item_ids=(f"item{i}",),
            occurred_at=second + offset,
        )
        for i, offset in enumerate((0, 500, 999, 1000))
    ]

    async def trail() -> list[dict[str, Any]]:
        await log.append(settings.topic("audit"), [OutgoingRecord("alice", encode_event(r)) for r in reads])
        return await audit_trail(log, settings, owner_key("acme", "alice"))

    assert [r["event_id"] for r in asyncio.run(trail())] == [r.event_id for r in reads]
