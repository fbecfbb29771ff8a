"""The documentation's Agents guide (``docs/guides/agents.md``), run as written: its help text, its MCP client
configurations, its code.

Each Python block runs in a fresh interpreter (``-W error``) in a folder holding ``./data/log`` and
``./data/store`` built by the pipeline from the bundled sample, as ``deploy/demo.sh`` leaves them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.api.conftest import build_store, free_port
from tests.conftest import REPO

ADAMEM = str(Path(sys.executable).with_name("adamem"))


PAGE = REPO / "docs" / "guides" / "agents.md"


def _section() -> str:
    """The Agents guide, whole: every block on the page is one of those checked here."""
    return PAGE.read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", _section(), flags=re.S | re.M)


EXPECTED = [  # what each Python block must print
    ["working", "spicy", "'semantic'", "Question: Why did Alice start working out?", "exercise"],
    ["('human', 'I booked a trip to Chengdu in May.'), ('ai', 'Try the hotpot there!')"],
    ["Alice prefers a window seat on long train rides."],
    ["[memory]", "[knowledge:catalogue] Crunchy Satay Bar contains peanuts", "words peanuts from memory items"],
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder as ``deploy/demo.sh`` leaves it: ``data/log`` and ``data/store``."""
    root = tmp_path_factory.mktemp("readme")
    build_store(root / "data")
    return root


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "ADAMEM_FSYNC": "false", "COLUMNS": "100", **extra}


def test_the_help_shown_is_the_help_printed() -> None:
    [shown] = _blocks("text")
    printed = subprocess.run([ADAMEM, "mcp", "--help"], env=_env(), capture_output=True, text=True, check=True)
    assert printed.stdout == shown


def test_every_python_block_runs_and_prints_what_it_says(demo: Path) -> None:
    blocks = _blocks("python")
    assert len(blocks) == len(EXPECTED) == 4
    for code, expected in zip(blocks, EXPECTED, strict=True):
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", code], cwd=demo, env=_env(), capture_output=True, text=True
        )
        assert done.returncode == 0, f"{code}\n--- stderr:\n{done.stderr}"
        for want in expected:
            assert want in done.stdout, f"{want!r} not printed by:\n{code}\n--- stdout:\n{done.stdout}"


async def test_the_stdio_configuration_starts_a_working_server(demo: Path) -> None:
    config = json.loads(_blocks("json")[0])["mcpServers"]["adamem"]
    assert config["command"] == "adamem"
    args = [a.replace("/home/me/adamem", str(demo)) for a in config["args"]]  # the user's own paths
    server = StdioServerParameters(command=ADAMEM, args=args, cwd=REPO, env=_env())
    async with Client(server, read_timeout_seconds=300) as client:
        assert len((await client.list_tools()).tools) == 8
        answer = await client.call_tool("recall", {"user_id": "alice", "question": "What food does Alice like?"})
        assert not answer.is_error and "spicy" in answer.content[0].text


async def test_the_http_configuration_reaches_adamem_mcp_over_http(demo: Path) -> None:
    config = json.loads(_blocks("json")[1])["mcpServers"]["adamem"]
    assert config["url"] == "http://127.0.0.1:8765/mcp" and set(config["headers"]) == {"X-API-Key"}
    port, key = free_port(), "readme-key-0123456789"
    log = demo / "mcp-http.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [ADAMEM, "mcp", "--transport", "http", "--port", str(port)],
            cwd=demo,
            env=_env(ADAMEM_API_KEYS=f"default:{key}"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = config["url"].replace("8765", str(port))
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx2.get(url, timeout=2).status_code == 401:  # up, and asking for the key
                    break
            except httpx2.TransportError:
                assert time.monotonic() < deadline, "adamem mcp --transport http did not start"
                time.sleep(0.3)
        http = httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=httpx2.Timeout(30, read=300))
        async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=300) as client:
            persona = await client.call_tool("persona", {"user_id": "alice"})
            assert not persona.is_error and "spicy food" in persona.content[0].text
    finally:
        process.terminate()
        process.wait(30)
