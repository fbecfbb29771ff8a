"""Schemathesis against a real ``adamem serve``: the service conforms to its own OpenAPI description.

Every check Schemathesis has is on (``--checks all``: no 5xx, status codes, content types, headers
and bodies as described, schema-valid requests accepted and invalid ones refused, auth enforced,
allowed methods, …), over every phase that applies (examples, coverage, fuzzing), with its warnings
(e.g. an operation that only ever answers 404) failing the run. The service runs over a store the
real pipeline built from the bundled sample, with tenant keys configured; the fuzzer sends the
default tenant's key and draws owners and memory item ids from that store half of the time, so
that it reaches real answers as well as errors. Half of the time it also names a tenant in
``X-Tenant`` (acme or the default): acme's carol has granted the default tenant read access, so its
reads of her go through a grant's scope, masking and audit, and its reads of acme's other owners
must be refused.

Bounded: a fixed number of examples per operation and a fixed seed (the same run every time), one
worker, a request timeout, and a timeout on the whole run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.api.conftest import DEFAULT, DEFAULT_KEY, Service

SEED = 14
MAX_EXAMPLES = 100
RUN_TIMEOUT_S = 900


def _item_ids(service: Service, owners: list[str]) -> list[str]:
    ids = []
    for owner in owners:
        for layer in ("episodic", "persona", "graph", "working"):
            r = httpx.get(
                f"{service.url}/v1/users/{owner}/memory", params={"layer": layer, "limit": 3}, headers=DEFAULT
            )
            assert r.status_code == 200, r.text
            ids += [row["id"] for row in r.json()["rows"]]
    assert ids
    return ids


def _shared_ids(service: Service) -> list[str]:
    """Item ids of acme's carol, read under her grant to the default tenant."""
    r = httpx.get(
        f"{service.url}/v1/users/carol/memory",
        params={"layer": "archive", "limit": 3},
        headers={**DEFAULT, "X-Tenant": "acme"},
    )
    assert r.status_code == 200, r.text
    return [row["id"] for row in r.json()["rows"]]


def test_the_service_conforms_to_its_openapi_description(service: Service, tmp_path: Path) -> None:
    owners = ["alice", "xiaoming"]  # the default tenant's owners in the sample
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        f"""
[generation]
database = "none"

[warnings]
fail-on = true

[auth.openapi.APIKeyHeader]
api_key = "{DEFAULT_KEY}"

[dictionaries]
owners = {{ values = {json.dumps([*owners, "carol"])} }}
items = {{ values = {json.dumps(_item_ids(service, owners) + _shared_ids(service))} }}
tenants = {{ values = ["acme", "default"] }}

[parameters]
"path.user" = {{ dictionary = "owners", probability = 0.5 }}
"path.item" = {{ dictionary = "items", probability = 0.5 }}
"header.x-tenant" = {{ dictionary = "tenants", probability = 0.5 }}
"""
    )
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--no-color",
        "--config-file",
        str(config),
        "run",
        f"{service.url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--request-timeout",
        "60",
        # The change feed is a stream that never ends (server-sent events): no answer to check, only a
        # timeout. Its keys, errors and events are tested against a real service in test_changes.py.
        "--exclude-path",
        "/v1/owners/{user}/changes",
        # A forget is answered once memory no longer holds it; this service is read-only (nothing
        # projects what the fuzzer writes), so every valid forget would wait out its wait_ms and answer
        # 409. Its keys, bodies and effect are tested against an embedded service in test_embedded.py
        # and test_http.py.
        "--exclude-path",
        "/v1/users/{user}/forget",
        # Feedback on an answer is answered once memory holds it, as a forget is, and names items by
        # id in its body, which the fuzzer can only make up (404). Its keys, bodies, errors and effect
        # are tested against an embedded service in test_embedded.py and test_http.py.
        "--exclude-path",
        "/v1/users/{user}/feedback",
        # Grants, confirmations and revocations are answered once memory holds them, as a forget is,
        # and a confirmation or revocation of a grant id the fuzzer makes up only ever answers 404.
        # Their keys, bodies and effects are tested against an embedded service in test_sharing.py;
        # the reads under a grant and the grant lists stay in the run.
        "--exclude-operation-id",
        "grant_v1_users__user__grants_post",
        "--exclude-path",
        "/v1/users/{user}/grants/{grant_id}/confirm",
        "--exclude-path",
        "/v1/users/{user}/grants/{grant_id}",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path / "report"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "No issues found" in out, out[-30_000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", out)
    assert counts and int(counts[2]) >= 300, out[-5_000:]  # it did reach the service, a few hundred times
    print(f"\nschemathesis: {counts[0]}")
