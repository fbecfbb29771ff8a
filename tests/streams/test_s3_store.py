"""The store on an object store: the projection writes ``s3://bucket/prefix`` and the HTTP query
service reads it, on the S3-compatible server of deploy/s3.sh (moto, an emulator of S3; production
uses S3, GCS or MinIO). Rows and answers equal those of the same log projected into a folder."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.api.app import create_app
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.retrieval.service import Retriever
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from tests.conftest import FlatEmbedder, s3_store_env, serving

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
QUESTIONS = [("alice", "Why did I start working out?"), ("xiaoming", "我为什么开始健身？"), ("alice", "hiking")]


def _snapshot(store: Any) -> dict[str, list[Any]]:
    return {o: sorted(store.load_owner(o), key=lambda r: (r.TABLE, r.id)) for o in store.owners()}


def _answers(settings: Settings, store_url: str) -> list[list[tuple[str, str]]]:
    retriever = Retriever(open_store(Settings.from_env(store_url=store_url).store, read_only=True), FlatEmbedder())
    out = []
    with serving(create_app(settings, retriever, None, api_keys="")) as client:
        for user, question in QUESTIONS:
            r = client.post(f"/v1/users/{user}/query", json={"question": question, "top_k": 5})
            assert r.status_code == 200, r.text
            out.append([(i["layer"], i["content"]) for i in r.json()["items"]])
    return out


@pytest.mark.s3
def test_the_pipeline_writes_and_the_service_reads_a_store_on_s3(
    settings: Settings, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_store_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    s3_url = f"s3://adamem/e2e-{uuid.uuid4().hex}"
    local_url = str(tmp_path / "local-store")

    async def project(store_url: str) -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        try:
            if store_url == local_url:
                await publish_messages(log, load_messages(SAMPLE, settings), settings)
            await run_pipeline(
                log,
                Projector(open_store(Settings.from_env(store_url=store_url).store)),
                MemoryAgent(RuleExtractor(), FlatEmbedder()),
                settings,
            )
        finally:
            await log.stop()

    asyncio.run(project(local_url))
    asyncio.run(project(s3_url))
    s3_store = open_store(Settings.from_env(store_url=s3_url).store, read_only=True)
    on_s3, local = _snapshot(s3_store), _snapshot(open_store(local_url, read_only=True))
    assert set(on_s3) == {"default:alice", "default:xiaoming"}
    assert sum(len(rows) for rows in on_s3.values()) > 20
    assert on_s3 == local
    answers = _answers(dataclasses.replace(settings, store_url=s3_url), s3_url)
    assert all(answers) and answers == _answers(dataclasses.replace(settings, store_url=local_url), local_url)
