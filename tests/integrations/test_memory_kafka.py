"""``Memory`` on a real broker: remember and forget return once a real ``adamem worker`` projected them.

The other integration tests project in-process (embedded log) or run the pipeline as the worker
over the in-memory log; this is the deployment an agent meets in production: a Kafka log,
``adamem worker`` processes that project it, and the agent's process that only reads the store.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adamem.memory import Memory
from adamem.settings import Settings
from tests.conftest import stop_process

pytestmark = pytest.mark.kafka


@pytest.fixture
def worker(settings: Settings, kafka_bootstrap: str, tmp_path: Path) -> Iterator[Settings]:
    """One ``adamem worker`` on the broker and the test's topics; the settings an agent uses beside it."""
    settings = dataclasses.replace(settings, log_url=f"kafka://{kafka_bootstrap}")
    env = {
        **os.environ,
        "ADAMEM_LOG": settings.log_url,
        "ADAMEM_TOPIC_PREFIX": settings.topic_prefix,
        "ADAMEM_PARTITIONS": str(settings.partitions),
    }
    exe = Path(sys.executable).with_name("adamem")
    with (tmp_path / "worker.log").open("ab") as out:
        proc = subprocess.Popen(
            [str(exe), "worker", "--store", settings.store_url, "--loglevel", "warning", "--verbose"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=tmp_path,
        )
    try:
        yield settings
    finally:
        stop_process(proc)


def test_remember_and_forget_wait_for_the_worker_on_a_kafka_log(worker: Settings) -> None:
    memory = Memory(worker, wait_timeout_s=180)
    marker = "my locker code is zebra-4471"
    try:
        done = memory.remember("alice", [{"text": "I adopted a grey cat called Miso."}, {"text": marker}])
        assert len(done.event_ids) == 2 and done.positions  # where the worker's checkpoint had to reach
        # visible on return: the worker (another process) projected it, this process only reads the store
        assert any(marker in item.content for item in memory.recall("alice", "What is my locker code?").items)
        assert [m.text for m in memory.working("alice")][-2:] == ["I adopted a grey cat called Miso.", marker]
        memory.forget("alice", message=done.event_ids[1])
        assert not any("zebra" in item.content for item in memory.recall("alice", "What is my locker code?").items)
        assert any("Miso" in item.content for item in memory.recall("alice", "What is my cat called?").items)
        with pytest.raises(Exception, match="bob"):
            memory.forget("bob", everything=True)  # nobody of that name: refused, nothing published
    finally:
        memory.close()
