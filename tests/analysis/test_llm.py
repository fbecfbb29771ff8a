"""The OpenAI-compatible adapters against a real local HTTP server (127.0.0.1, ephemeral port)."""

from __future__ import annotations

import datetime as dt
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from adamem.analysis import Extraction
from adamem.analysis.llm import (
    OpenAICompatibleEmbedder,
    OpenAICompatibleExtractor,
)
from adamem.errors import AdaMemError, MalformedModelAnswer, ModelUnavailable
from adamem.events import ChatMessage, ExtractedAttribute, ExtractedEvent, ExtractedFact, Speaker

GOOD = {
    "summary": "Alice: I went to the gym yesterday.",
    "topics": ["Fitness"],
    "sentiment": 0.4,
    "dialog_act": "statement",
    "certainty": "certain",
    "facts": [{"content": "Alice lives in Beijing", "type": "location", "key": "lives_in", "confidence": 0.9}],
    "attributes": [{"key": "likes", "value": "spicy food", "confidence": 1.7}],
    "events": [
        {"content": "Alice went to the gym", "when": "2024-03-31", "when_text": "yesterday", "confidence": 0.85}
    ],
    "entities": ["Beijing"],
}


@dataclass
class Reply:
    """One scripted answer of the fake endpoint."""

    status: int = 200
    body: Any = None
    delay_s: float = 0.0


def chat(content: Any) -> Reply:
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(body={"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})


@dataclass
class FakeEndpoint:
    """Scripted replies, and what the client sent."""

    url: str
    replies: list[Reply] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    fake = FakeEndpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append((self.path, dict(self.headers), body))
            reply = fake.replies.pop(0) if fake.replies else Reply(500, {"error": "no reply scripted"})
            time.sleep(reply.delay_s)
            payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def message() -> ChatMessage:
    at = int(dt.datetime(2024, 4, 1, 8, 15, tzinfo=dt.UTC).timestamp() * 1000)
    return ChatMessage("e1", "alice", "c1", "m1", Speaker("user", "Alice"), "I went to the gym yesterday.", at)


def extractor(url: str, **kwargs: Any) -> OpenAICompatibleExtractor:
    options: dict[str, Any] = {"timeout_s": 2.0, "retries": 2, "backoff_s": 0.01} | kwargs
    return OpenAICompatibleExtractor(url, "qwen2.5-7b-instruct", **options)


def test_good_answer_parses_into_a_validated_extraction(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [chat(GOOD)]
    result = extractor(endpoint.url, api_key="sk-test").extract(message())
    assert result == Extraction(
        summary="Alice: I went to the gym yesterday.",
        topics=("fitness",),
        sentiment=0.4,
        dialog_act="statement",
        certainty="certain",
        facts=(ExtractedFact("Alice lives in Beijing", 0.9, "location", "lives_in"),),
        attributes=(ExtractedAttribute("likes", "spicy food", 1.0),),
        events=(ExtractedEvent("Alice went to the gym", 0.85, 1711843200000, "yesterday"),),
        entities=("Beijing",),
    )
    path, headers, body = endpoint.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "qwen2.5-7b-instruct"
    assert body["response_format"]["type"] == "json_schema"
    schema = body["response_format"]["json_schema"]["schema"]
    assert set(schema["required"]) == {f for f in Extraction.__dataclass_fields__}
    assert "2024-04-01T08:15:00" in body["messages"][1]["content"]


def test_identity_is_recorded() -> None:
    e = OpenAICompatibleExtractor("http://127.0.0.1:1/v1", "some-model")
    assert (e.name, e.version, e.model) == ("openai", "1", "some-model")


def test_server_error_then_good_answer_succeeds_by_retrying(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [Reply(500, {"error": "overloaded"}), Reply(503, {}), chat(GOOD)]
    assert extractor(endpoint.url).extract(message()).summary == GOOD["summary"]
    assert len(endpoint.requests) == 3


def test_timeout_then_good_answer_succeeds_by_retrying(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [Reply(200, {}, delay_s=1.0), chat(GOOD)]
    assert extractor(endpoint.url, timeout_s=0.3).extract(message()).topics == ("fitness",)


def test_persistent_server_errors_raise_model_unavailable(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [Reply(500, {"error": "boom"})] * 3
    with pytest.raises(ModelUnavailable, match=r"kept failing after 3 attempt\(s\); last: HTTP 500") as info:
        extractor(endpoint.url).extract(message())
    assert f"{endpoint.url}/chat/completions" in str(info.value)
    assert isinstance(info.value, AdaMemError)


def test_client_errors_are_not_retried(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [Reply(401, {"error": "bad key"}), chat(GOOD)]
    with pytest.raises(ModelUnavailable, match=r"HTTP 401.*API key"):
        extractor(endpoint.url).extract(message())
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("this is not JSON", "did not answer with JSON"),
        ("[1, 2]", "must be a JSON object"),
        (GOOD | {"dialog_act": "rant"}, "dialog_act must be one of"),
        (GOOD | {"facts": [{"content": "x", "type": "t", "key": "k", "confidence": "high"}]}, r"facts\[0\].confidence"),
        (GOOD | {"events": [{"content": "x", "when": "last week", "when_text": "", "confidence": 1}]}, "ISO date"),
        (GOOD | {"topics": "fitness"}, "topics must be a list"),
    ],
)
def test_malformed_answer_raises_a_clear_error(endpoint: FakeEndpoint, content: Any, problem: str) -> None:
    endpoint.replies = [chat(content)]
    with pytest.raises(MalformedModelAnswer, match=problem) as info:
        extractor(endpoint.url).extract(message())
    assert "message e1" in str(info.value)


def test_answer_without_choices_is_malformed(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [Reply(200, {"object": "error"})]
    with pytest.raises(MalformedModelAnswer, match=r"without choices\[0\].message.content"):
        extractor(endpoint.url).extract(message())


def test_fenced_json_and_clamped_numbers_are_accepted(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [chat("```json\n" + json.dumps(GOOD | {"sentiment": -3}) + "\n```")]
    result = extractor(endpoint.url).extract(message())
    assert (result.sentiment, result.attributes[0].confidence) == (-1.0, 1.0)


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_closed_port_raises_model_unavailable_quickly() -> None:
    url = closed_port_url()
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match=r"cannot reach .*Start the model server") as info:
        OpenAICompatibleExtractor(url, "m", retries=2).extract(message())
    assert time.monotonic() - started < 1.0
    assert f"{url}/chat/completions" in str(info.value)


def test_embedder_returns_ordered_l2_normalised_vectors(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [
        Reply(body={"data": [{"index": 1, "embedding": [0.0, 2.0, 0.0]}, {"index": 0, "embedding": [3, 0, 4]}]}),
        Reply(body={"data": [{"index": 0, "embedding": [0.0, 0.0, 0.0]}]}),
    ]
    embedder = OpenAICompatibleEmbedder(endpoint.url, "bge-m3", dim=3, batch_size=2, backoff_s=0.01)
    vectors = embedder.embed(["a", "b", "c"])
    assert vectors == [[0.6, 0.0, 0.8], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    assert all(math.isclose(sum(x * x for x in v), 1.0) for v in vectors[:2])
    assert [r[2] for r in endpoint.requests] == [
        {"model": "bge-m3", "input": ["a", "b"]},
        {"model": "bge-m3", "input": ["c"]},
    ]
    assert (embedder.name, embedder.dim) == ("openai:bge-m3", 3)


def test_embedder_rejects_the_wrong_dimension(endpoint: FakeEndpoint) -> None:
    endpoint.replies = [Reply(body={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})]
    with pytest.raises(MalformedModelAnswer, match="2-dimensional vectors, expected 3"):
        OpenAICompatibleEmbedder(endpoint.url, "bge-m3", dim=3).embed(["a"])


def test_embedder_retries_then_reports_the_endpoint_down() -> None:
    with pytest.raises(ModelUnavailable, match="cannot reach"):
        OpenAICompatibleEmbedder(closed_port_url(), "bge-m3", dim=3).embed(["a"])
