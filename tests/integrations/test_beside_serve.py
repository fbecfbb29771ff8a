"""The agent integrations on a folder a running ``adamem serve`` writes: they remember through that serve.

The embedded log has one writer; while the demo (or ``adamem serve``) runs, it is that serve.
``Memory.remember`` and ``Memory.forget`` — and so MCP's ``remember`` and LangChain's chat history —
find it from the folder (``api/notice.py``) and write through it, instead of failing on the writer
lock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from mcp import Client

from adamem.integrations.langchain import AdaMemChatMessageHistory
from adamem.integrations.mcp_server import build_server
from adamem.memory import Memory
from adamem.settings import Settings
from bench.common import wait_healthy
from tests.api.conftest import build_store, free_port
from tests.conftest import stop_process

EXE = Path(sys.executable).with_name("adamem")


@pytest.fixture(scope="module")
def beside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """An ``Memory`` over a folder an ``adamem serve`` (embedded mode) writes."""
    root = tmp_path_factory.mktemp("beside")
    settings = build_store(root)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAMEM_") or k == "ADAMEM_HOME"}
    env["ADAMEM_FSYNC"] = "false"
    out = root / "serve.log"
    with out.open("wb") as log_file:
        process = subprocess.Popen(
            [str(EXE), "serve", "--log", settings.log_url, "--store", settings.store_url, "--port", str(port)],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    memory = Memory(Settings(log_url=settings.log_url, store_url=settings.store_url, fsync=False))
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, 120, out)
        yield memory
    finally:
        memory.close()
        stop_process(process)


def _recalled(memory: Memory, question: str) -> list[str]:
    return [item.content for item in memory.recall("alice", question).items]


def test_remember_goes_through_the_serve(beside: Memory) -> None:
    done = beside.remember("alice", [{"text": "I adopted a cat named Miso."}])
    assert len(done.event_ids) == 1 and done.positions
    assert any("Miso" in text for text in _recalled(beside, "What is my cat called?"))


async def test_mcp_remember_goes_through_the_serve(beside: Memory) -> None:
    async with Client(build_server(beside)) as client:
        done = await client.call_tool("remember", {"user_id": "alice", "messages": [{"text": "I play the cello."}]})
        assert not done.is_error, done.content
    assert any("cello" in text for text in _recalled(beside, "Which instrument do I play?"))


def test_langchain_chat_history_goes_through_the_serve(beside: Memory) -> None:
    history = AdaMemChatMessageHistory(beside, "alice", conversation_id="trip")
    history.add_messages([HumanMessage("I booked a trip to Chengdu."), AIMessage("Try the hotpot!")])
    assert [m.text for m in history.messages][-2:] == ["I booked a trip to Chengdu.", "Try the hotpot!"]


def test_forget_goes_through_the_serve_and_takes_effect_at_once(beside: Memory) -> None:
    done = beside.remember("alice", [{"text": "My gym locker code is 8812."}])
    assert any("8812" in text for text in _recalled(beside, "What is my gym locker code?"))
    gone = beside.forget("alice", message=done.event_ids[0], reason="asked to")
    assert gone.event_ids and gone.positions
    assert not any("8812" in text for text in _recalled(beside, "What is my gym locker code?"))
