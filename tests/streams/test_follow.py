"""The write path in a background thread (``Follower``) and read-your-writes from the log (``visible_messages``).

Real parts: an embedded log and a LanceDB store in a temporary folder; the Memory Agent is the
rule extractor with a flat embedder (what is tested is where records go, not the analysis).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.errors import LogError
from adamem.ingest import load_messages
from adamem.projections.store.factory import open_store
from adamem.settings import Settings
from adamem.streams.embedded_log import EmbeddedLog
from adamem.streams.follow import Follower
from adamem.streams.publish import publish_messages
from adamem.streams.visible import visible_messages
from tests.conftest import FlatEmbedder


def _agent(settings: Settings) -> MemoryAgent:
    return MemoryAgent(RuleExtractor(), FlatEmbedder(), settings.generation)


def _lines(*texts: str, user: str = "ada") -> bytes:
    return "\n".join(
        f'{{"user_id": "{user}", "speaker": "Ada", "text": "{t}", "occurred_at": "2024-01-0{i + 1}T10:00:00Z"}}'
        for i, t in enumerate(texts)
    ).encode()


async def _until_visible(log: EmbeddedLog, settings: Settings, partition: int, offset: int) -> None:
    reader = open_store(settings.store, read_only=True)
    deadline = time.monotonic() + 60  # a bound for a loaded machine; the follower's own poll is 10 minutes
    while await visible_messages(log, reader, settings, partition) <= offset:
        assert time.monotonic() < deadline, f"offset {offset} never became visible"
        await asyncio.sleep(0.05)


async def test_a_publish_that_wakes_the_follower_is_projected_long_before_its_poll(settings: Settings) -> None:
    settings = replace(settings, embedded_partitions=1)
    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    follower = Follower(log, settings, _agent, poll_s=600)
    follower.start()
    try:
        reader = open_store(settings.store, read_only=True)
        for round_, text in enumerate(("I love sailing.", "My cat is called Miso.")):
            report = await publish_messages(log, load_messages(_lines(text), settings), settings)
            assert report.last == {0: round_}
            assert await visible_messages(log, reader, settings, 0) <= round_  # not before the follower ran
            follower.wake()
            await _until_visible(log, settings, 0, round_)
            texts = {r.text for r in reader.rows("messages", "default:ada")}
            assert text in texts
        assert follower.status().running and follower.status().last_error is None
    finally:
        assert follower.stop()
        await log.stop()
    assert not follower.status().running


async def test_the_follower_is_the_logs_one_writer_until_it_stops(settings: Settings) -> None:
    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    first = Follower(log, settings, _agent)
    first.start()
    other = EmbeddedLog(settings.log_url, settings)
    await other.start()
    with pytest.raises(LogError, match=f"another process is writing to the log in {settings.log_url}"):
        Follower(other, settings, _agent).start()
    assert first.stop()
    await log.stop()  # releases the lock
    other.hold_writer_lock()  # now it may write
    await other.stop()


async def test_visible_counts_only_what_the_store_has_folded(settings: Settings) -> None:
    """Analysed but not yet projected is not visible; projected is, up to the analyses' resume header."""
    from adamem.projections.folds.apply import Positioned
    from adamem.projections.projector import Projector
    from adamem.schemas.serde import decode_event
    from adamem.streams.pipeline import analyze_pending, project_pending

    settings = replace(settings, embedded_partitions=1)
    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    store = open_store(settings.store)
    store.bind(1)
    try:
        await publish_messages(log, load_messages(_lines("One.", "Two.", "Three."), settings), settings)
        assert await visible_messages(log, store, settings, 0) == 0
        await analyze_pending(log, _agent(settings), settings, 0)
        assert await visible_messages(log, store, settings, 0) == 0  # analysed, not folded
        analyses = settings.topic("analyses")
        first_two = [
            Positioned(decode_event(r.value), r.topic, r.partition, r.offset)
            async for r in log.read(analyses, until={0: 2})
        ]
        projector = Projector(store)
        projector.apply_batch(0, analyses, first_two)
        assert await visible_messages(log, store, settings, 0) == 2  # the header of the last one folded
        await project_pending(log, projector, settings, 0)
        assert await visible_messages(log, store, settings, 0) == 3
        await publish_messages(log, load_messages(_lines("Four.", user="ada"), settings), settings)
        assert await visible_messages(log, store, settings, 0) == 3  # the new one is not
    finally:
        store.close()
        await log.stop()


async def test_a_failing_pass_is_reported_and_retried_and_the_follower_goes_on(settings: Settings) -> None:
    from adamem.errors import ConfigError

    calls: list[str] = []

    def flaky(s: Settings) -> MemoryAgent:
        calls.append(s.generation)
        if len(calls) == 1:
            raise ConfigError("ADAMEM_EXTRACTOR='nope' is not an extractor")
        return _agent(s)

    settings = replace(settings, embedded_partitions=1)
    log = EmbeddedLog(settings.log_url, settings)
    await log.start()
    follower = Follower(log, settings, flaky, poll_s=600, retry_s=600)
    follower.start()
    try:
        deadline = time.monotonic() + 60
        while follower.status().last_error is None:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert "is not an extractor" in str(follower.status().last_error) and follower.status().running
        await publish_messages(log, load_messages(_lines("I play the oboe."), settings), settings)
        follower.wake()  # the retry: this pass succeeds, and clears the error
        await _until_visible(log, settings, 0, 0)
        while follower.status().last_error is not None:  # cleared as the pass returns, just after its commit
            assert time.monotonic() < deadline + 60
            await asyncio.sleep(0.02)
        assert calls == ["g1", "g1"]
    finally:
        assert follower.stop()
        await log.stop()
