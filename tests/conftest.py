"""Shared fixtures. Kafka tests talk to the real broker that ``deploy/kafka.sh start`` runs.

The broker address comes from ``ADAMEM_TEST_KAFKA`` (default 127.0.0.1:9092). A Kafka test
whose broker is missing FAILS with instructions; it is never skipped.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from adamem.projections.store import MemoryStore
from adamem.settings import Settings

REPO = Path(__file__).resolve().parent.parent
LOCOMO = Path(os.environ.get("ADAMEM_LOCOMO", REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"))


def stop_process(process: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """Stop a process a test started: SIGTERM, then SIGKILL after ``grace_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)


@pytest.fixture(scope="session", autouse=True)
def _adamem_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Kafka keystores (``$ADAMEM_HOME/keys/<prefix>``) go to a temporary folder, never the user's home.

    Set in the environment, so the ``adamem`` processes the tests start inherit it.
    """
    before = os.environ.get("ADAMEM_HOME")
    os.environ["ADAMEM_HOME"] = str(tmp_path_factory.mktemp("adamem-home"))
    yield
    if before is None:
        os.environ.pop("ADAMEM_HOME", None)
    else:
        os.environ["ADAMEM_HOME"] = before


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with a unique topic prefix, so tests never see each other's events."""
    return Settings(
        log_url=str(tmp_path / "log"),
        store_url=str(tmp_path / "store"),
        topic_prefix=f"t{uuid.uuid4().hex[:10]}",
        partitions=3,
        embedded_partitions=2,
        fsync=False,
        kafka_timeout_s=20.0,
        home=os.environ.get("ADAMEM_HOME", "~/.adamem"),  # the session's temporary one (as the processes it starts)
    )


def _listening(variable: str, default: str, what: str, script: str, marker: str) -> str:
    """The address in ``variable`` (or ``default``), once something accepts connections there; else fail, not skip."""
    address = os.environ.get(variable, default)
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            pass
    except OSError as exc:
        pytest.fail(
            f"no {what} at {address} ({exc}). Start one with `bash {script} start` "
            f"or run the whole suite with `bash deploy/test.sh`; deselect with -m 'not {marker}'."
        )
    return address


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Address of the real broker; fails (not skips) when nothing listens there."""
    return _listening("ADAMEM_TEST_KAFKA", "127.0.0.1:9092", "Kafka broker", "deploy/kafka.sh", "kafka")


@pytest.fixture(scope="session")
def s3_endpoint() -> str:
    """Address of the S3-compatible server (deploy/s3.sh); fails (not skips) when nothing listens there."""
    return _listening("ADAMEM_TEST_S3", "127.0.0.1:9000", "S3-compatible server", "deploy/s3.sh", "s3")


def s3_store_env(endpoint: str) -> dict[str, str]:
    """The settings that reach the test server (its bucket ``adamem``; moto takes any keys)."""
    return {
        "ADAMEM_STORE_ENDPOINT": f"http://{endpoint}",
        "ADAMEM_STORE_ALLOW_HTTP": "true",
        "ADAMEM_STORE_REGION": "us-east-1",
        "ADAMEM_STORE_ACCESS_KEY": "testing",
        "ADAMEM_STORE_SECRET_KEY": "testing",
    }


@contextlib.contextmanager
def serving(app: Any) -> Iterator[httpx.Client]:
    """The app on a real uvicorn server on a free loopback port, and an HTTP client for it."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            yield c
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Callable[[MemoryStore], list[str]]:
    """``loads(store)``: the owners the store loads every row of from now on."""

    def watch(store: MemoryStore) -> list[str]:
        seen: list[str] = []
        for name in ("load_owner", "load_owner_columns"):  # as rows, and as a query process loads them
            real = getattr(store, name)

            def counting(user_id: str, messages_from_seq: int = 0, real: Any = real) -> Any:
                seen.append(user_id)
                return real(user_id, messages_from_seq)

            monkeypatch.setattr(store, name, counting)
        return seen

    return watch


class FlatEmbedder:
    """Every text is the same vector: for tests of where records go and what is recorded, not of the analysis."""

    name, dim = "flat", 2

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)
