"""Query replicas: several ``adamem serve`` processes over one store, each with its own caches.

Both replicas answer a question (their snapshot and answer caches now hold the owner), then a
commit lands in the store from a third process; asked again, each replica answers from the new
rows — its caches followed the store's change token, no replica answers from stale memory. The
same holds for ``adamem serve --workers 2`` (two query processes on one port).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from bench.common import wait_healthy
from tests.api.conftest import build_store, embedder, free_port

QUESTION = "Do I have a parrot?"
NEW = {
    "user_id": "alice",
    "speaker": "Alice",
    "text": "I adopted a green parrot called Kiwi",
    "occurred_at": "2024-06-01T10:00:00Z",
    "conversation_id": "replica-test",
    "message_id": "kiwi",
}


def _serve(settings: Settings, root: Path, name: str, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "ADAMEM_STORE": settings.store_url, "ADAMEM_HOST": "127.0.0.1", "ADAMEM_PORT": str(port)}
    env.pop("ADAMEM_LOG", None)
    env.pop("ADAMEM_API_KEYS", None)
    with (root / f"{name}.log").open("wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("adamem")), "serve", *extra],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc, f"http://127.0.0.1:{port}"


def _contents(url: str) -> list[str]:
    r = httpx.post(f"{url}/v1/users/alice/query", json={"question": QUESTION, "top_k": 10}, timeout=60)
    assert r.status_code == 200, r.text
    return [item["content"] for item in r.json()["items"]]


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[Settings, list[str]]]:
    settings = build_store(tmp_path)
    procs = [
        _serve(settings, tmp_path, "replica-a"),
        _serve(settings, tmp_path, "replica-b"),
        _serve(settings, tmp_path, "replicas-workers", "--workers", "2"),
    ]
    try:
        for (proc, url), name in zip(procs, ("replica-a", "replica-b", "replicas-workers"), strict=True):
            wait_healthy(url, proc, 180, tmp_path / f"{name}.log")
        yield settings, [url for _, url in procs]
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(30)


def test_no_replica_answers_from_stale_memory_after_a_commit(replicas: tuple[Settings, list[str]]) -> None:
    settings, urls = replicas
    for url in urls:  # warm: every replica (and, four asks, both processes of --workers 2) holds alice now
        for _ in range(4):
            assert not any("parrot" in c for c in _contents(url))

    async def commit() -> None:  # a third process (this one) appends and projects one message
        log = open_log(settings.log_url, settings)
        await log.start()
        try:
            await publish_messages(log, load_messages(json.dumps(NEW).encode(), settings), settings)
            await run_pipeline(
                log, Projector(open_store(settings.store)), MemoryAgent(RuleExtractor(), embedder()), settings
            )
        finally:
            await log.stop()

    asyncio.run(commit())
    for url in urls:
        for _ in range(4):
            assert any("parrot called Kiwi" in c for c in _contents(url)), url
