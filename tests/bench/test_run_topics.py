"""A Kafka benchmark run's topics: a prefix of its own, and all of them deleted at the end (real broker)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench import common

pytestmark = pytest.mark.kafka


async def _admin(bootstrap: str, create: Sequence[str] = (), delete: Sequence[str] = ()) -> set[str]:
    """Create and delete topics, then the broker's topic names."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if create:
            await admin.create_topics([NewTopic(n, 1, 1) for n in create])
        if delete:
            await admin.delete_topics(list(delete))
        return set(await admin.list_topics())
    finally:
        await admin.close()


def test_a_run_drops_its_log_and_worker_topics_and_nobody_elses(kafka_bootstrap: str) -> None:
    run = common.run_topics(f"kafka://{kafka_bootstrap}/", "/nowhere")
    other = common.run_topics(f"kafka://{kafka_bootstrap}", "/nowhere")
    assert run.topic_prefix != other.topic_prefix and run.topic_prefix.startswith("bench")
    assert common.kafka_bootstrap(run) == kafka_bootstrap
    mine = [run.topic("messages"), run.topic("analyses"), run.topic("raw"), f"{run.topic_prefix}-worker-__assignor"]
    theirs = [other.topic("messages"), f"{run.topic_prefix}x.messages"]  # a longer prefix is somebody else's
    asyncio.run(_admin(kafka_bootstrap, create=mine + theirs))
    common.drop_run_topics(run)
    deadline = time.monotonic() + 20
    left = asyncio.run(_admin(kafka_bootstrap))
    while set(mine) & left and time.monotonic() < deadline:  # deletion completes on the broker shortly after
        time.sleep(0.2)
        left = asyncio.run(_admin(kafka_bootstrap))
    assert not set(mine) & left and set(theirs) <= left
    asyncio.run(_admin(kafka_bootstrap, delete=theirs))
