"""Two tenants with colliding ids never see each other: store, folds, every endpoint, every CLI command.

Tenants ``acme`` and ``globex`` each have a user ``dave`` whose messages also share conversation
and message ids. acme's dave keeps a secret called Zephyr, globex's dave one called Orion. Every
read for one tenant must show its own secret and never the other's; forgetting one erases only it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.api.app import create_app
from adamem.cli import main
from adamem.ingest import load_messages
from adamem.owners import owner_key, partition_key, split_owner
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from tests.conftest import serving

SECRET = {"acme": "Zephyr", "globex": "Orion"}
KEYS = "acme:acme-key-0000000001,globex:globex-key-000000002"
HEADERS = {"acme": {"X-API-Key": "acme-key-0000000001"}, "globex": {"X-API-Key": "globex-key-000000002"}}
QUESTION = "What is my secret project called?"


def _lines(tenant: str) -> list[dict[str, Any]]:
    secret = SECRET[tenant]
    texts = [f"My secret project is called {secret}.", f"I work on {secret} every Wednesday.", "I love sailing."]
    rows = [
        {
            "tenant": tenant,
            "user_id": "dave",
            "speaker": "Dave",
            "text": text,
            "occurred_at": f"2024-02-0{i + 1}T10:00:00Z",
            "conversation_id": "c1",
            "message_id": f"m{i}",
        }
        for i, text in enumerate(texts)
    ]
    # A second conversation consolidates the first into the episodic, persona and graph layers.
    rows.append({**rows[0], "conversation_id": "c2", "message_id": "m0", "occurred_at": "2024-02-09T10:00:00Z"})
    return rows


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Path]:
    root = tmp_path_factory.mktemp("tenants")
    settings = Settings(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False, embedded_partitions=2)
    data = "\n".join(json.dumps(r) for r in _lines("acme") + _lines("globex")).encode()

    async def build() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        await publish_messages(log, load_messages(data, settings), settings)
        await run_pipeline(
            log, Projector(open_store(settings.store)), MemoryAgent(RuleExtractor(), E5Embedder()), settings
        )
        await log.stop()

    asyncio.run(build())
    return settings, root


def _other(tenant: str) -> str:
    return "globex" if tenant == "acme" else "acme"


def test_the_owner_key_round_trips_any_tenant() -> None:
    for tenant, user in [("acme", "dave"), ("a:b", "c:d"), ("100%", "x"), ("", "solo"), ("t", "")]:
        key = owner_key(tenant, user)
        assert split_owner(key) == (tenant, user) and partition_key(key) == user
    assert owner_key("a:b", "c") != owner_key("a", "b:c")


def test_the_store_holds_two_owners_whose_rows_never_mix(built: tuple[Settings, Path]) -> None:
    settings, _ = built
    store = open_store(settings.store, read_only=True)
    assert {"acme:dave", "globex:dave"} <= set(store.owners())
    for tenant in SECRET:
        rows = store.load_owner(owner_key(tenant, "dave"))
        text = json.dumps([repr(r) for r in rows])
        assert SECRET[tenant] in text and SECRET[_other(tenant)] not in text
        assert {r.TABLE for r in rows} >= {"owners", "messages", "episodic", "graph_nodes", "graph_edges"}
    ids = [{(r.TABLE, r.id) for r in store.load_owner(owner_key(t, "dave"))} for t in SECRET]
    assert not ids[0] & ids[1]  # the same message ids, and no row id in common


@pytest.fixture(scope="module")
def client(built: tuple[Settings, Path]) -> Iterator[httpx.Client]:
    settings, _ = built
    retriever = Retriever(open_store(settings.store, read_only=True), E5Embedder())
    with serving(create_app(settings, retriever, open_log(settings.log_url, settings), api_keys=KEYS)) as c:
        yield c
    retriever.close()


ENDPOINTS = [
    ("post", "/v1/users/dave/query", {"question": QUESTION}),
    *[("get", f"/v1/users/dave/memory?layer={layer}", None) for layer in ("working", "episodic", "persona", "graph")],
    ("get", "/v1/users/dave/memory?layer=archive", None),
]


@pytest.mark.parametrize("tenant", sorted(SECRET))
@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_every_endpoint_answers_a_key_from_its_own_tenant_only(
    client: httpx.Client, tenant: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    r = client.request(method, path, json=body, headers=HEADERS[tenant])
    assert r.status_code == 200, r.text
    assert SECRET[_other(tenant)] not in r.text
    if "layer=archive" in path or "query" in path:
        assert SECRET[tenant] in r.text
    assert r.json().get("tenant", tenant) == tenant


@pytest.mark.parametrize("tenant", sorted(SECRET))
def test_provenance_of_the_other_tenants_item_is_unknown(client: httpx.Client, tenant: str) -> None:
    theirs = client.get("/v1/users/dave/memory?layer=episodic", headers=HEADERS[_other(tenant)]).json()["rows"]
    assert theirs
    for row in theirs:
        r = client.get(f"/v1/users/dave/memory/{row['id']}/provenance", headers=HEADERS[tenant])
        assert r.status_code == 404 and SECRET[_other(tenant)] not in r.text
    for mine in client.get("/v1/users/dave/memory?layer=episodic", headers=HEADERS[tenant]).json()["rows"]:
        own = client.get(f"/v1/users/dave/memory/{mine['id']}/provenance", headers=HEADERS[tenant])
        assert own.status_code == 200 and own.json()["tenant"] == tenant and SECRET[_other(tenant)] not in own.text


def test_a_key_cannot_name_another_tenant(client: httpx.Client) -> None:
    for method, path, body in ENDPOINTS:
        r = client.request(method, path, json=body, headers={**HEADERS["acme"], "X-Tenant": "globex"})
        assert r.status_code == 403 and "Orion" not in r.text
    r = client.post(
        "/v1/users/dave/query", json={"question": QUESTION}, headers={**HEADERS["acme"], "X-Tenant": "acme"}
    )
    assert r.status_code == 200 and "Zephyr" in r.text


def test_a_key_cannot_publish_into_the_other_tenants_owner(client: httpx.Client) -> None:
    hijack = {**_lines("globex")[0], "text": "hijacked", "message_id": "x1"}
    r = client.post("/v1/messages", json={"messages": [hijack]}, headers=HEADERS["acme"])
    assert r.status_code == 403
    own = {**hijack, "tenant": "acme"}
    r = client.post("/v1/messages", json={"messages": [own]}, headers=HEADERS["acme"])
    assert r.status_code == 202


def test_an_open_service_reads_the_tenant_named_in_the_request(built: tuple[Settings, Path]) -> None:
    settings, _ = built
    retriever = Retriever(open_store(settings.store, read_only=True), E5Embedder())
    with serving(create_app(settings, retriever, None, api_keys="")) as c:
        for tenant in SECRET:
            r = c.post("/v1/users/dave/query", json={"question": QUESTION}, headers={"X-Tenant": tenant})
            assert r.status_code == 200 and SECRET[tenant] in r.text and SECRET[_other(tenant)] not in r.text
        default = c.post("/v1/users/dave/query", json={"question": QUESTION})  # the service's tenant has no dave
        assert default.status_code == 404 and "Zephyr" not in default.text and "Orion" not in default.text
    retriever.close()


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("tenant", sorted(SECRET))
def test_every_cli_read_names_one_tenants_owner(
    built: tuple[Settings, Path], capsys: pytest.CaptureFixture[str], tenant: str
) -> None:
    settings, _ = built
    store, log = ["--store", settings.store_url], ["--log", settings.log_url]
    mine, theirs = SECRET[tenant], SECRET[_other(tenant)]
    for args in (
        ["memory", "dave", "--tenant", tenant, *store],
        ["memory", "dave", "--tenant", tenant, "--layer", "working", "--json", *store],
        ["query", "dave", QUESTION, "--tenant", tenant, "--json", *store],
    ):
        code, out = _cli(capsys, *args)
        assert code == 0 and theirs not in out, args
        if "memory" not in args or "working" in args:
            assert mine in out, args
    code, out = _cli(capsys, "memory", "dave", "--tenant", _other(tenant), "--layer", "episodic", "--json", *store)
    item = json.loads(out)[0]["id"]
    code, out = _cli(capsys, "provenance", "dave", item, "--tenant", tenant, *store, *log)
    assert code != 0 and theirs not in out
    code, out = _cli(capsys, "replay", "--user", "dave", "--tenant", tenant, "--verify", *store, *log)
    assert code == 0 and "equal to the live view" in out and f"owner:{tenant}:dave" in out and theirs not in out


def test_forgetting_one_tenants_owner_leaves_the_other_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, store = ["--log", str(tmp_path / "log")], ["--store", str(tmp_path / "store")]
    both = _jsonl(tmp_path / "in.jsonl", _lines("acme") + _lines("globex"))
    assert _cli(capsys, "publish", str(both), *log)[0] == 0
    assert _cli(capsys, "project", *log, *store)[0] == 0
    code, out = _cli(capsys, "forget", "dave", "--tenant", "acme", "--all", *log)
    assert code == 0 and "tenant acme" in out
    assert _cli(capsys, "project", *log, *store)[0] == 0
    code, out = _cli(capsys, "memory", "dave", "--tenant", "acme", "--layer", "working", "--json", *store)
    assert "Zephyr" not in out
    code, out = _cli(capsys, "memory", "dave", "--tenant", "globex", "--layer", "working", "--json", *store)
    assert code == 0 and "Orion" in out and "Zephyr" not in out


def test_a_store_of_bare_user_ids_is_refused_with_the_fix_and_replay_rebuilds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 0.1 store named owners by bare user id; its log carries every tenant, so replay rebuilds it."""
    import lancedb

    log, store = ["--log", str(tmp_path / "log")], ["--store", str(tmp_path / "store")]
    assert _cli(capsys, "publish", str(_jsonl(tmp_path / "in.jsonl", _lines("acme") + _lines("globex"))), *log)[0] == 0
    assert _cli(capsys, "project", *log, *store)[0] == 0
    for shard in (tmp_path / "store" / "views").glob("*/p*"):  # what 0.1 wrote: the owner column was user_id
        db = lancedb.connect(str(shard))
        for name in db.list_tables().tables:
            table = db.open_table(name)
            if "owner_id" in table.schema.names:
                table.alter_columns({"path": "owner_id", "rename": "user_id"})
    for args in (
        ["memory", "dave", "--tenant", "acme", *store],
        ["query", "dave", QUESTION, *store],
        ["project", *log, *store],
    ):
        code, out = _cli(capsys, *args)
        assert code == 5 and "built by AdaMem Stream 0.1" in out and "adamem replay" in out, args
    code, out = _cli(capsys, "replay", *log, *store)
    assert code == 0 and "switched" in out
    for tenant in SECRET:
        code, out = _cli(capsys, "query", "dave", QUESTION, "--tenant", tenant, "--json", *store)
        assert code == 0 and SECRET[tenant] in out and SECRET[_other(tenant)] not in out
