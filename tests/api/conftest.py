"""What the HTTP tests share: a store built from the bundled sample by the real pipeline, and the keys.

``built`` is that store, for services run in-process (``tests.conftest.serving``); ``service`` is a
real ``adamem serve`` process over another such store, for what must be measured from outside:
the fuzzer's run and the process's memory. In both, acme's carol has granted the default tenant
read access to her whole memory (``GRANT``, confirmed), so that a default key naming tenant acme
reads her under a grant.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from adamem.analysis import Embedder
from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_embedder
from adamem.analysis.rules import RuleExtractor
from adamem.events import GrantChanged, grant_event_id
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store.factory import open_store
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from bench.common import wait_healthy
from tests.conftest import stop_process

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
ACME_KEY = "acme-key-0001-0001-0001"
GLOBEX_KEY = "globex-key-0002-0002"
DEFAULT_KEY = "default-key-0003-0003"
KEYS = f"acme:{ACME_KEY},globex:{GLOBEX_KEY},default:{DEFAULT_KEY}"
ACME = {"X-API-Key": ACME_KEY}
GLOBEX = {"X-API-Key": GLOBEX_KEY}
DEFAULT = {"X-API-Key": DEFAULT_KEY}


@functools.cache
def embedder() -> Embedder:
    """The default embedder, as the settings of ``build_store`` record it for the store's generation."""
    return build_embedder(Settings())


def tenant_lines() -> bytes:
    """One owner of tenant acme (carol) and one of tenant globex (dave), beside the sample's default tenant."""
    rows = [
        {
            "tenant": "acme",
            "user_id": "carol",
            "speaker": "Carol",
            "text": "I love sailing on weekends.",
            "occurred_at": "2024-02-01T10:00:00Z",
            "conversation_id": "a1",
        },
        {
            "tenant": "globex",
            "user_id": "dave",
            "speaker": "Dave",
            "text": "My secret project is called Zephyr.",
            "occurred_at": "2024-02-01T10:00:00Z",
            "conversation_id": "g1",
        },
    ]
    return "\n".join(json.dumps(r) for r in rows).encode()


GRANT = "carol-to-default"


def grant_events() -> list[GrantChanged]:
    """acme's carol grants the default tenant her whole memory, sensitive data masked, and confirms it."""
    granted = GrantChanged(
        event_id=grant_event_id("acme", "carol", "granted", GRANT),
        user_id="carol",
        tenant="acme",
        grant_id=GRANT,
        action="granted",
        occurred_at=1_706_781_600_000,  # 2024-02-01T10:00:00Z
        grantee_tenant="default",
        layers=("working", "archive", "episodic", "persona", "graph"),
    )
    confirmed = GrantChanged(
        event_id=grant_event_id("acme", "carol", "confirmed", GRANT),
        user_id="carol",
        tenant="acme",
        grant_id=GRANT,
        action="confirmed",
        occurred_at=1_706_781_660_000,
    )
    return [granted, confirmed]


def build_store(root: Path) -> Settings:
    """Publish the sample and the tenants' lines to an embedded log under ``root``, and project them."""
    settings = Settings(log_url=str(root / "log"), store_url=str(root / "store"), fsync=False)

    async def build() -> None:
        log = open_log(settings.log_url, settings)
        await log.start()
        await publish_messages(log, load_messages(SAMPLE, settings) + load_messages(tenant_lines(), settings), settings)
        await log.append(settings.topic("control"), [OutgoingRecord("carol", encode_event(e)) for e in grant_events()])
        await run_pipeline(
            log, Projector(open_store(settings.store)), MemoryAgent(RuleExtractor(), embedder()), settings
        )
        await log.stop()

    asyncio.run(build())
    return settings


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str]:
    settings = build_store(tmp_path_factory.mktemp("api"))
    return settings, settings.store_url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Service:
    """A running ``adamem serve``: where it listens, its process, and its store and log."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    settings: Settings
    log_file: Path

    def rss_mib(self) -> tuple[float, float]:
        """The process's resident memory now and at its peak, in MiB (``/proc``)."""
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines())
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``adamem serve --read-only`` with a log (the console script, as a user starts it) and the tenants' keys.

    Read-only: what the fuzzer publishes is appended but not analysed, so that its queries are timed
    against the store alone. In embedded mode the write path analyses the fuzzer's messages (up to
    a MiB per request) beside the queries; on this 2-core machine at load 20, one query then took
    12 s, past Schemathesis's 10 s limit. The embedded mode has tests of its own (``test_embedded.py``).
    """
    root = tmp_path_factory.mktemp("served")
    settings = build_store(root)
    port = free_port()
    env = {
        **os.environ,
        "ADAMEM_STORE": settings.store_url,
        "ADAMEM_LOG": settings.log_url,
        "ADAMEM_API_KEYS": KEYS,
        "ADAMEM_HOST": "127.0.0.1",
        "ADAMEM_PORT": str(port),
        "ADAMEM_FSYNC": "false",
    }
    log_file = root / "serve.log"
    with log_file.open("wb") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("adamem")), "serve", "--read-only"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, 120, log_file)
        yield Service(url, port, process, settings, log_file)
    finally:
        stop_process(process)
