"""The HTTP surface: one error shape, declared on every route; the body limit; the keys.

The body limit is measured on a real ``adamem serve`` process: a 200 MiB chunked upload must be
refused while it streams in, without the process growing (it used to buffer the whole body: RSS
from 406 MB to 1 GB).
"""

from __future__ import annotations

import hmac
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adamem.api import auth
from adamem.api.app import MAX_BODY, BodyLimit, create_app
from adamem.api.auth import MIN_KEY_LENGTH, KeyRing
from adamem.errors import ConfigError
from adamem.projections.store.factory import open_store
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from tests.api.conftest import DEFAULT, DEFAULT_KEY, KEYS, Service, embedder
from tests.conftest import serving

MESSAGE = {"user_id": "alice", "speaker": "Alice", "text": "hi", "occurred_at": "2024-05-01T00:00:00Z"}


@pytest.fixture(scope="module")
def client(built: tuple[Settings, str]) -> Iterator[httpx.Client]:
    settings, store = built
    app = create_app(settings, Retriever(open_store(store, read_only=True), embedder()), None, api_keys=KEYS)
    with serving(app) as c:
        yield c


# ---------------------------------------------------------------- the description and the error shape


def test_every_route_declares_the_error_body_for_each_status_it_can_answer(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]  # FastAPI's own 422 shape is gone
    assert set(spec["components"]["schemas"]["ErrorBody"]["required"]) == {"error", "detail"}
    changes = {"400", "401", "403", "404", "409", "413", "415", "422", "500", "503"}  # grant, confirm, revoke
    expected = {
        ("post", "/v1/users/{user}/query"): {
            "200",
            "400",
            "401",
            "403",
            "404",
            "409",
            "413",
            "415",
            "422",
            "500",
            "503",
        },
        ("post", "/v1/users/{user}/research"): {"200", "400", "401", "403", "404", "413", "415", "422", "500", "503"},
        ("get", "/v1/users/{user}/memory"): {"200", "401", "403", "404", "422", "500", "503"},
        ("get", "/v1/users/{user}/memory/{item}/provenance"): {"200", "401", "403", "404", "422", "500", "503"},
        ("post", "/v1/messages"): {"202", "400", "401", "403", "413", "415", "422", "500", "503"},
        ("post", "/v1/visible"): {"200", "400", "401", "403", "409", "413", "415", "422", "500", "503"},
        ("post", "/v1/users/{user}/forget"): {
            "200",
            "400",
            "401",
            "403",
            "404",
            "409",
            "413",
            "415",
            "422",
            "500",
            "503",
        },
        ("post", "/v1/users/{user}/feedback"): {
            "200",
            "400",
            "401",
            "403",
            "404",
            "409",
            "413",
            "415",
            "422",
            "500",
            "503",
        },
        ("get", "/v1/owners/{user}/changes"): {"200", "401", "403", "422", "500", "503"},
        ("post", "/v1/users/{user}/grants"): {"201", *changes},
        ("get", "/v1/users/{user}/grants"): {"200", "401", "403", "422", "500", "503"},
        ("get", "/v1/users/{user}/audit"): {"200", "401", "403", "422", "500", "503"},
        ("post", "/v1/users/{user}/grants/{grant_id}/confirm"): {"200", *changes},
        ("delete", "/v1/users/{user}/grants/{grant_id}"): {"200", *changes},
        ("get", "/health"): {"200", "500"},
    }
    operations = {(m, p): op for p, item in spec["paths"].items() for m, op in item.items()}
    assert set(operations) == set(expected)
    for key, statuses in expected.items():
        responses = operations[key]["responses"]
        assert set(responses) == statuses, key
        for status, response in responses.items():
            if status[0] in "45":
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (key, status)
        assert ("security" in operations[key]) == (key[1] != "/health"), key
    schemes = spec["components"]["securitySchemes"]
    assert schemes["APIKeyHeader"] == {**schemes["APIKeyHeader"], "type": "apiKey", "in": "header", "name": "X-API-Key"}
    assert schemes["HTTPBearer"]["scheme"] == "bearer"


def test_the_described_limits_are_the_enforced_ones(client: httpx.Client) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    top_k = schemas["QueryBody"]["properties"]["top_k"]
    assert (top_k["type"], top_k["minimum"], top_k["maximum"]) == ("integer", 1, 100)
    text = schemas["MessageBody"]["properties"]["text"]
    assert text["maxLength"] == Settings().max_text_bytes and "pattern" in text
    times, null = schemas["MessageBody"]["properties"]["occurred_at"]["anyOf"]  # absent or null: now
    assert null == {"type": "null"} and "occurred_at" not in schemas["MessageBody"]["required"]
    millis, rfc3339 = times["oneOf"]
    assert (millis["minimum"], millis["maximum"]) == (-62135596800000, 253402300799999)
    assert rfc3339["format"] == "date-time"
    assert schemas["AsOfBody"]["additionalProperties"] is False
    assert (schemas["AsOfBody"]["minProperties"], schemas["AsOfBody"]["maxProperties"]) == (1, 1)


def _is_error(r: httpx.Response, status: int, kind: str) -> bool:
    return r.status_code == status and r.headers["content-type"] == "application/json" and r.json()["error"] == kind


def test_every_error_has_the_one_shape(client: httpx.Client) -> None:
    answers = {
        "unknown path": (client.get("/nowhere"), 404, "not_found"),
        "wrong method": (client.delete("/v1/messages", headers=DEFAULT), 405, "method_not_allowed"),
        "no key": (client.get("/v1/users/alice/memory"), 401, "unauthenticated"),
        "wrong key": (client.get("/v1/users/alice/memory", headers={"X-API-Key": "x" * 20}), 403, "forbidden"),
        "wrong bearer": (
            client.get("/v1/users/alice/memory", headers={"Authorization": "Bearer " + "y" * 20}),
            403,
            "forbidden",
        ),
        "bad query parameter": (client.get("/v1/users/alice/memory?limit=0", headers=DEFAULT), 422, "invalid_request"),
        "bad layer": (client.get("/v1/users/alice/memory?layer=attic", headers=DEFAULT), 422, "invalid_request"),
        "no body": (client.post("/v1/users/alice/query", headers=DEFAULT), 422, "invalid_request"),
        "body not an object": (client.post("/v1/users/alice/query", json=[], headers=DEFAULT), 422, "invalid_request"),
        "unknown owner": (client.get("/v1/users/nobody/memory", headers=DEFAULT), 404, "unknown_user"),
        "unknown item": (client.get("/v1/users/alice/memory/nothing/provenance", headers=DEFAULT), 404, "unknown_item"),
        "too large": (
            client.post("/v1/messages", content=b"[" * (MAX_BODY + 1), headers=DEFAULT),
            413,
            "too_large",
        ),
        "no log": (client.post("/v1/messages", json={"messages": [MESSAGE]}, headers=DEFAULT), 503, "log_unavailable"),
    }
    for what, (r, status, kind) in answers.items():
        assert _is_error(r, status, kind), (what, r.status_code, r.text)
        assert set(r.json()) == {"error", "detail"} and r.json()["detail"], what
    assert answers["wrong method"][0].headers["allow"] == "POST"


def test_a_bearer_token_is_a_key_too(client: httpx.Client) -> None:
    r = client.get("/v1/users/alice/memory", headers={"Authorization": f"Bearer {DEFAULT_KEY}"})
    assert r.status_code == 200 and r.json()["count"] > 0


# ---------------------------------------------------------------- the body limit


def test_a_chunked_body_over_the_limit_is_refused_and_one_under_it_is_read(client: httpx.Client) -> None:
    def chunks(total: int, size: int = 64 << 10) -> Iterator[bytes]:
        sent = 0
        while sent < total:
            yield b" " * min(size, total - sent)
            sent += size

    json_type = {**DEFAULT, "content-type": "application/json"}
    over = client.post("/v1/messages", content=chunks(MAX_BODY + 1), headers=json_type)  # no Content-Length
    assert over.request.headers["transfer-encoding"] == "chunked"
    assert _is_error(over, 413, "too_large"), over.text

    def question() -> Iterator[bytes]:
        yield b'{"question": "What food'
        yield b' does Alice like?", "top_k": 3}'

    under = client.post("/v1/users/alice/query", content=question(), headers=json_type)
    assert under.request.headers["transfer-encoding"] == "chunked"
    assert under.status_code == 200 and len(under.json()["items"]) == 3


async def _asgi(app: Any, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> tuple[int, bytes, list[Any]]:
    sent: list[Any] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Any:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/messages", "headers": headers, "query_string": b""}
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), sent[0]["headers"]


@pytest.mark.parametrize("value", [b"abc", b"-1", b"+5", b"0x10", b"1e3", b"5 5", b"99999999999999999999"])
async def test_a_malformed_content_length_is_a_400(value: bytes) -> None:
    async def never(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the request went past the body limit")

    status, body, headers = await _asgi(BodyLimit(never), [(b"content-length", value)])
    assert status == 400 and b'"error":"bad_request"' in body and (b"connection", b"close") in headers
    status, _, _ = await _asgi(BodyLimit(never), [(b"content-length", b"5"), (b"content-length", b"6")])
    assert status == 400


def _answered(answer: bytes) -> bool:
    """Whether ``answer`` holds a whole HTTP response (its head and a body of its Content-Length)."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    lengths = [
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    ]
    return bool(sep) and len(body) >= (lengths[0] if lengths else 0)


def _exchange(port: int, frames: Iterator[bytes], deadline_s: float = 180) -> tuple[bytes, int]:
    """Send every frame, reading the answer as it comes; the answer, and how many bytes were sent.

    Sends the whole request even after the answer has come, as a client that does not look would.
    """
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    pending, answer, sent = b"", b"", 0
    deadline = time.monotonic() + deadline_s
    try:
        while True:
            if not pending:
                pending = next(frames, b"")
            if not pending and _answered(answer):
                break
            assert time.monotonic() < deadline, f"no answer after {sent} bytes: {answer!r}"
            readable, writable, _ = select.select([s], [s] if pending else [], [], 1)
            if readable:
                data = s.recv(1 << 16)
                if not data:
                    break
                answer += data
            if writable and pending:
                n = s.send(pending)
                pending, sent = pending[n:], sent + n
    except ConnectionError as exc:
        raise AssertionError(f"the server dropped the connection after {sent} bytes: {answer!r}") from exc
    finally:
        s.close()
    return answer, sent


def _head(**headers: str) -> bytes:
    fields = {"Host": "127.0.0.1", "X-API-Key": DEFAULT_KEY, "Content-Type": "application/json", **headers}
    lines = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in fields.items())
    return f"POST /v1/messages HTTP/1.1\r\n{lines}\r\n".encode()


def _chunked(total: int, size: int = 1 << 16) -> Iterator[bytes]:
    chunk = b"%x\r\n" % size + b"x" * size + b"\r\n"
    for _ in range(total // size):
        yield chunk
    yield b"0\r\n\r\n"


def test_a_200_mib_chunked_upload_does_not_grow_the_process(service: Service) -> None:
    total = 200 << 20
    before, peak_before = service.rss_mib()
    t0 = time.monotonic()
    answer, sent = _exchange(service.port, iter([_head(Transfer_Encoding="chunked"), *_chunked(total)]))
    elapsed = time.monotonic() - t0
    after, peak_after = service.rss_mib()
    status = answer.split(b"\r\n", 1)[0].decode()
    print(
        f"\n{sent / (1 << 20):.0f} MiB chunked upload: {status} in {elapsed:.1f} s; "
        f"adamem serve RSS {before:.0f} -> {after:.0f} MiB, peak {peak_before:.0f} -> {peak_after:.0f} MiB"
    )
    assert sent > total and answer.startswith(b"HTTP/1.1 413 ") and b'"error":"too_large"' in answer, answer
    assert after - before < 32 and peak_after - peak_before < 32
    assert httpx.get(f"{service.url}/health").status_code == 200  # and the service goes on


def test_a_declared_length_over_the_limit_is_refused_before_the_body(service: Service) -> None:
    total = 50 << 20
    before, _ = service.rss_mib()
    frames = iter([_head(Content_Length=str(total)), *(b"x" * (1 << 16) for _ in range(total >> 16))])
    answer, _ = _exchange(service.port, frames)
    assert answer.startswith(b"HTTP/1.1 413 ") and b'"error":"too_large"' in answer, answer
    assert service.rss_mib()[0] - before < 32


@pytest.mark.parametrize("value", ["abc", "-1", "1_0", "10, 11"])
def test_the_real_server_answers_a_malformed_content_length_with_400(service: Service, value: str) -> None:
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as s:
        s.sendall(_head(Content_Length=value) + b"{}")
        answer = s.recv(1 << 16)
    assert answer.startswith(b"HTTP/1.1 400 "), answer


# ---------------------------------------------------------------- the keys


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("acme:short", f"needs at least {MIN_KEY_LENGTH}"),
        ("acme:" + "k" * (MIN_KEY_LENGTH - 1), f"has a key of {MIN_KEY_LENGTH - 1} characters"),
        ("acme", "is not 'tenant:key'"),
        (":" + "k" * 20, "is not 'tenant:key'"),
        ("acme:" + "k" * 20 + ",globex:" + "k" * 20, "repeats the key of tenant 'acme'"),
    ],
)
def test_malformed_keys_stop_the_service_with_a_clear_error(spec: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as info:
        KeyRing(spec)
    assert "k" * 10 not in str(info.value) and "short" not in str(info.value)  # the key itself is never shown


def test_a_short_key_stops_adamem_serve_at_start_up(built: tuple[Settings, str], tmp_path: Path) -> None:
    _, store = built
    done = subprocess.run(
        [str(Path(sys.executable).with_name("adamem")), "serve", "--store", store, "--port", "1"],
        env={"ADAMEM_API_KEYS": "acme:too-short", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert f"a key needs at least {MIN_KEY_LENGTH}" in done.stderr and "too-short" not in done.stderr


def test_a_key_is_compared_with_every_key_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [f"key-{i}-".ljust(24, "x") for i in range(3)]
    ring = KeyRing(",".join(f"t{i}:{key}" for i, key in enumerate(keys)))
    calls: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def compare(a: bytes, b: bytes) -> bool:
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", compare)
    for presented, tenant in [
        (keys[0], "t0"),
        (keys[2], "t2"),
        ("key-2-", None),  # a prefix
        ("n" * 500, None),  # another length
    ]:
        calls.clear()
        who = ring.principal(presented)
        assert (who.tenant if who else None) == tenant
        assert calls == [(32, 32)] * 3  # every key, digests of one length: no early exit, no length leak
