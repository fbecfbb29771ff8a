"""``adamem mcp`` driven by the MCP SDK's own client, over stdio and streamable HTTP, against a real store.

The store is built by the real pipeline from the bundled sample (``conftest.built``); ``remember``
and ``forget`` go through the log and the in-process projection, and the test then reads the
result back through ``recall``. Errors a caller can make (unknown user, bad arguments, missing or
wrong key) come back as MCP errors and the server goes on answering.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from adamem.integrations.mcp_server import build_server, http_app
from adamem.memory import Memory
from adamem.settings import Settings
from tests.api.conftest import ACME_KEY, GLOBEX_KEY, KEYS
from tests.conftest import REPO, serving

TOOLS = {"remember", "recall", "research", "as_of", "persona", "timeline", "forget", "feedback"}


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def _stdio(settings: Settings, tenant: str | None = None) -> StdioServerParameters:
    env = {
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}",  # this checkout's code, not an installed one
        "ADAMEM_STORE": settings.store_url,
        "ADAMEM_LOG": settings.log_url,
        "ADAMEM_FSYNC": "false",
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    args = ["mcp"] + (["--tenant", tenant] if tenant else [])
    return StdioServerParameters(command=str(Path(sys.executable).with_name("adamem")), args=args, env=env)


async def test_stdio_lists_typed_tools_and_answers_each(built: Settings) -> None:
    async with Client(_stdio(built), read_timeout_seconds=300) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():  # what an LLM reads to act: a description, typed and described arguments
            assert tool.description and len(tool.description) > 40
            props = tool.input_schema["properties"]
            assert props["user_id"]["type"] == "string" and props["user_id"]["description"]
        assert tools["recall"].input_schema["properties"]["top_k"]["maximum"] == 50
        assert tools["remember"].input_schema["required"] == ["user_id", "messages"]

        recalled = await client.call_tool("recall", {"user_id": "alice", "question": "What food does Alice like?"})
        assert not recalled.is_error
        text = _text(recalled)
        assert text.startswith("route: ") and "spicy" in text and "why: semantic" in text and "from: Alice in s" in text
        items = recalled.structured_content["items"]
        assert items and all(i["provenance"] and i["breakdown"] for i in items)
        assert recalled.structured_content["route"]["route"] in text.splitlines()[0]

        then = await client.call_tool(
            "as_of", {"user_id": "alice", "question": "Is Alice thinking about a pet?", "time": "2024-03-20T00:00:00Z"}
        )
        now = await client.call_tool("recall", {"user_id": "alice", "question": "Is Alice thinking about a pet?"})
        assert "Mochi" in _text(now) and "Mochi" not in _text(then)
        assert then.structured_content["as_of"]["time"] == 1710892800000

        persona = await client.call_tool("persona", {"user_id": "alice"})
        traits = persona.structured_content["traits"]
        assert any(t["value"] == "spicy food" and t["stable"] and t["evidence"] for t in traits)
        assert "likes=spicy food strength" in _text(persona)

        timeline = await client.call_tool(
            "timeline", {"user_id": "alice", "start": "2024-03-11T00:00:00Z", "end": "2024-03-12T00:00:00Z"}
        )
        entries = timeline.structured_content["entries"]
        assert entries and all(e["time"].startswith("2024-03-11") for e in entries)
        assert any("peanuts" in e["text"] for e in entries) and not any("Beijing" in e["text"] for e in entries)

        resource = await client.read_resource("adamem://users/alice/working")
        working = json.loads(resource.contents[0].text)["messages"]
        assert working and working[-1]["text"].startswith("Two weeks ago I finished my first 5k")
        traits_doc = json.loads((await client.read_resource("adamem://users/alice/persona")).contents[0].text)
        assert traits_doc["traits"] == traits


async def test_stdio_remember_is_visible_on_return_and_forget_removes_it(built: Settings) -> None:
    async with Client(_stdio(built), read_timeout_seconds=300) as client:
        done = await client.call_tool(
            "remember",
            {
                "user_id": "ines",
                "messages": [
                    {"text": "My new bike is a green Brompton.", "occurred_at": "2024-05-01T10:00:00Z"},
                    {"text": "Nice! Where will you ride it?", "speaker": "Assistant", "role": "assistant"},
                ],
            },
        )
        assert not done.is_error, _text(done)
        assert done.structured_content["visible"] and len(done.structured_content["event_ids"]) == 2
        recalled = await client.call_tool("recall", {"user_id": "ines", "question": "What bike do I have?"})
        assert "Brompton" in _text(recalled)
        message = next(i for i in recalled.structured_content["items"] if "Brompton" in i["content"])
        event_id = message["provenance"][0]["message_event_id"]
        assert event_id == done.structured_content["event_ids"][0]

        judged = {"user_id": "ines", "helped": [message["id"]], "unhelpful": []}
        noted = await client.call_tool("feedback", judged)
        assert not noted.is_error and noted.structured_content["visible"], _text(noted)
        unknown = await client.call_tool("feedback", {**judged, "helped": ["no-such-item"]})
        assert unknown.is_error and "no memory item 'no-such-item'" in _text(unknown), _text(unknown)
        empty = await client.call_tool("feedback", {"user_id": "ines"})
        assert empty.is_error and "at least one" in _text(empty), _text(empty)

        forgot = await client.call_tool("forget", {"user_id": "ines", "message_event_id": event_id})
        assert not forgot.is_error, _text(forgot)
        after = await client.call_tool("recall", {"user_id": "ines", "question": "What bike do I have?"})
        assert "Brompton" not in _text(after)


async def test_stdio_errors_are_mcp_errors_and_the_server_goes_on(built: Settings) -> None:
    async with Client(_stdio(built), read_timeout_seconds=300) as client:
        unknown = await client.call_tool("recall", {"user_id": "nobody", "question": "anything?"})
        assert unknown.is_error and "no memory for user 'nobody'" in _text(unknown)
        for bad, said in (
            ({"user_id": "alice"}, "question is missing; give text of 1 to 2000 characters"),
            ({"user_id": "alice", "question": ""}, "question: '' is not allowed; give text of 1 to 2000 characters"),
            (
                {"user_id": "alice", "question": "q", "top_k": 0},
                "top_k: 0 is not allowed; give an integer from 1 to 50",
            ),
            ({"user_id": "alice", "question": "q", "top_k": "ten"}, "top_k: 'ten' is not allowed; give an integer"),
        ):
            result = await client.call_tool("recall", bad)
            assert result.is_error and _text(result).startswith("invalid arguments to recall: "), bad
            assert said in _text(result) and "pydantic" not in _text(result) and "\n" not in _text(result), bad
        union = await client.call_tool("timeline", {"user_id": "alice", "start": 1.5, "end": "2024-01-01T00:00:00Z"})
        assert _text(union) == (
            "invalid arguments to timeline: start: 1.5 is not allowed; give a time: RFC 3339 with offset, "
            "e.g. 2024-03-01T09:30:00Z, or integer ms since the epoch"
        ), _text(union)  # one error for the argument, not one per branch of its type
        extra = await client.call_tool("remember", {"user_id": "alice", "messages": [{"text": "x", "colour": "red"}]})
        assert extra.is_error and "messages.0.colour is not allowed there" in _text(extra), _text(extra)
        badtime = await client.call_tool(
            "timeline", {"user_id": "alice", "start": "yesterday-ish", "end": "2024-01-01T00:00:00Z"}
        )
        assert badtime.is_error and "start" in _text(badtime)
        backwards = await client.call_tool(
            "timeline", {"user_id": "alice", "start": "2024-05-01T00:00:00Z", "end": "2024-01-01T00:00:00Z"}
        )
        assert backwards.is_error and "before it starts" in _text(backwards)
        two = await client.call_tool("forget", {"user_id": "alice", "item_id": "x", "everything": True})
        assert two.is_error and "exactly one" in _text(two)
        with pytest.raises(MCPError):
            await client.read_resource("adamem://users/nobody/persona")
        nothing = await client.call_tool("no_such_tool", {})
        assert nothing.is_error and "Unknown tool: no_such_tool" in _text(nothing)
        still = await client.call_tool("persona", {"user_id": "alice", "limit": 1})
        assert not still.is_error and len(still.structured_content["traits"]) == 1


async def test_stdio_acts_for_its_tenant_only(built: Settings) -> None:
    async with Client(_stdio(built, tenant="acme"), read_timeout_seconds=300) as client:
        carol = await client.call_tool("recall", {"user_id": "carol", "question": "What do I do on weekends?"})
        assert "sailing" in _text(carol)
        alice = await client.call_tool("recall", {"user_id": "alice", "question": "What food do I like?"})
        assert alice.is_error and "tenant 'acme'" in _text(alice)


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for e in group.exceptions for leaf in _leaves(e)]
    return [group]


@asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
    async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=300) as client:
        yield client


@pytest.fixture(scope="module")
def http_url(memory: Memory) -> Any:
    app = http_app(build_server(memory, api_keys=KEYS), KEYS)
    with serving(app) as plain:
        yield f"{str(plain.base_url).rstrip('/')}/mcp", plain


async def test_http_with_a_key_acts_for_that_tenant(http_url: tuple[str, httpx.Client]) -> None:
    url, _ = http_url
    async with _http(url, {"X-API-Key": ACME_KEY}) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        carol = await client.call_tool("recall", {"user_id": "carol", "question": "What do I do on weekends?"})
        assert not carol.is_error and "sailing" in _text(carol)
        for user in ("dave", "alice"):  # globex's and the default tenant's owners do not exist for acme
            other = await client.call_tool("recall", {"user_id": user, "question": "anything?"})
            assert other.is_error and f"no memory for user {user!r} of tenant 'acme'" in _text(other)
        found = await client.call_tool(
            "research", {"user_id": "carol", "query": "What do I do on weekends?", "depth": 2}
        )
        assert not found.is_error and "sailing" in _text(found) and "confidence:" in _text(found)
        assert found.structured_content["tenant"] == "acme" and 1 <= len(found.structured_content["rounds"]) <= 2
        other = await client.call_tool("research", {"user_id": "dave", "query": "What is my secret project?"})
        assert other.is_error and "no memory for user 'dave' of tenant 'acme'" in _text(other)
        deep = await client.call_tool("research", {"user_id": "carol", "query": "weekends?", "depth": 9})
        assert deep.is_error
        with pytest.raises(MCPError):
            await client.read_resource("adamem://users/dave/working")
        done = await client.call_tool("remember", {"user_id": "erin", "messages": [{"text": "I play the oboe."}]})
        assert not done.is_error, _text(done)
        erin = await client.call_tool("recall", {"user_id": "erin", "question": "Which instrument do I play?"})
        assert "oboe" in _text(erin) and erin.structured_content["tenant"] == "acme"
    async with _http(url, {"Authorization": f"Bearer {GLOBEX_KEY}"}) as client:
        erin = await client.call_tool("recall", {"user_id": "erin", "question": "Which instrument do I play?"})
        assert erin.is_error  # acme's erin is not globex's
        dave = await client.call_tool("recall", {"user_id": "dave", "question": "What is my secret project?"})
        assert "Zephyr" in _text(dave)


async def test_http_refuses_a_missing_or_wrong_key_before_mcp(http_url: tuple[str, httpx.Client]) -> None:
    url, plain = http_url
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, status, kind in (
        ({}, 401, "unauthenticated"),
        ({"X-API-Key": "not-a-key-of-anyone-at-all"}, 403, "forbidden"),
        ({"X-API-Key": ACME_KEY, "X-Tenant": "globex"}, 403, "forbidden"),
    ):
        r = plain.post("/mcp", json=initialize, headers={**accept, **headers})
        assert r.status_code == status and r.json()["error"] == kind, (headers, r.text)
    for headers in ({}, {"X-API-Key": "not-a-key-of-anyone-at-all"}):
        with pytest.raises(BaseExceptionGroup) as caught:  # the SDK's client surfaces the refusal as an MCP error
            async with _http(url, headers) as client:
                await client.list_tools()
        assert [type(e) for e in _leaves(caught.value)] == [MCPError]
    async with _http(url, {"X-API-Key": ACME_KEY}) as client:  # and the server goes on
        assert len((await client.list_tools()).tools) == len(TOOLS)


async def test_http_without_keys_runs_open_and_takes_the_tenant_from_x_tenant(memory: Memory) -> None:
    with serving(http_app(build_server(memory), "")) as plain:
        url = f"{str(plain.base_url).rstrip('/')}/mcp"
        async with _http(url, {"X-Tenant": "globex"}) as client:
            dave = await client.call_tool("recall", {"user_id": "dave", "question": "What is my secret project?"})
            assert "Zephyr" in _text(dave)
        async with _http(url, {}) as client:  # no header: the settings' tenant
            alice = await client.call_tool("persona", {"user_id": "alice"})
            assert not alice.is_error and "spicy food" in _text(alice)
            dave = await client.call_tool("recall", {"user_id": "dave", "question": "What is my secret project?"})
            assert dave.is_error


async def test_a_message_the_log_refuses_publishes_nothing(memory: Memory) -> None:
    from adamem.streams.factory import open_log

    async def published() -> int:
        log = open_log(memory.settings.log_url, memory.settings)
        await log.start()
        try:
            return sum((await log.end_offsets(memory.settings.topic("messages"))).values())
        finally:
            await log.stop()

    before = await published()
    async with Client(build_server(memory)) as client:  # in-process: the same server, no transport
        big = "x" * (memory.settings.max_text_bytes + 1)
        result = await client.call_tool("remember", {"user_id": "alice", "messages": [{"text": "fine"}, {"text": big}]})
        assert result.is_error and "over the limit" in _text(result) and "nothing was published" in _text(result)
        when = await client.call_tool(
            "remember", {"user_id": "alice", "messages": [{"text": "hi", "occurred_at": "soon"}]}
        )
        assert when.is_error and "occurred_at" in _text(when)
    assert await published() == before
