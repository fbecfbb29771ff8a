"""Reanalysis: a new generation of analyses beside the current one, compared per layer, switched on request."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from importlib import resources
from pathlib import Path

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.factory import build_extractor
from adamem.analysis.rules import RuleExtractor
from adamem.errors import AdaMemError, ConfigError, StoreError
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store.lance import LanceStore, current_view
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.generations import generation_record, resolve, settings_for
from adamem.streams.log import EventLog
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.reanalyze import layer_changes, reanalyze, switch_to
from adamem.streams.replay import rebuild_view, rows_checksum, store_rows
from tests.conftest import serving

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
NEW = [
    {
        "user_id": "alice",
        "speaker": "Alice",
        "text": "I started learning the violin last month and I love it.",
        "occurred_at": "2024-05-01T10:00:00Z",
        "conversation_id": "c9",
    }
]


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The shared settings with e5, the embedder this module's agents embed with, as their generation records."""
    return dataclasses.replace(settings, embedder="e5")


def _agent(settings: Settings) -> MemoryAgent:
    return MemoryAgent(build_extractor(settings), _embedder(), settings.generation)


async def _built(settings: Settings, tmp_path: Path) -> tuple[EventLog, str]:
    """The sample ingested by the in-process pipeline (generation g1, rules)."""
    log = open_log(settings.log_url, settings)
    await log.start()
    await publish_messages(log, load_messages(SAMPLE, settings), settings)
    root = settings.store_url
    store = LanceStore(root)
    resolved = resolve(settings, store, record_if_missing=True)
    await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), _embedder()), resolved)
    await log.stop()  # reanalyze opens the embedded log itself (one writer at a time)
    return log, root


async def _analyses(settings: Settings) -> list[object]:
    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        return [decode_event(r.value) async for r in log.read(settings.topic("analyses"))]
    finally:
        await log.stop()


async def test_reanalysis_is_projected_beside_the_active_view_and_compared(settings: Settings, tmp_path: Path) -> None:
    _, root = await _built(settings, tmp_path)
    live = LanceStore(root, read_only=True)
    before = rows_checksum(store_rows(live, {"messages", "episodic", "persona", "graph_nodes", "graph_edges"}))

    report = await reanalyze(settings, root, extractor="none")

    assert (report.generation, report.view, report.switched) == ("g2", "g2", False)
    assert current_view(root) == "main"  # nothing switches unless asked
    assert rows_checksum(store_rows(live, {"messages", "episodic", "persona", "graph_nodes", "graph_edges"})) == before
    assert report.stats.analyzed == 29
    g2 = dataclasses.replace(settings, generation="g2")
    analyses = await _analyses(g2)
    assert len(analyses) == 29 and {a.generation for a in analyses} == {"g2"}  # type: ignore[attr-defined]
    assert {a.analyzer.name for a in analyses} == {"none"}  # type: ignore[attr-defined]
    assert len(await _analyses(settings)) == 29  # the first generation is untouched

    new = LanceStore(root, read_only=True, view="g2")
    assert new.generation()["extractor"] == "none" and new.generation()["topic"] == "adamem.analyses.g2".replace(
        "adamem", settings.topic_prefix
    )
    # Nothing is extracted any more: every episodic record and persona trait is removed, messages stay.
    assert report.layers["episodic"].removed == len(store_rows(live, {"episodic"})) > 0
    assert report.layers["persona"].removed == len(store_rows(live, {"persona"})) > 0
    assert report.layers["episodic"].added == report.layers["persona"].added == 0
    working = report.layers["working"]
    assert working.added == working.removed == 0
    # Message rows keep their text; what the extractor said about them (topics, summary...) changed.
    altered = [e for e in working.examples if e[0] == "altered"]
    assert altered and all("[" in text for _, _, _, text in altered)
    assert {r.id for r in store_rows(new, {"messages"})} == {r.id for r in store_rows(live, {"messages"})}


async def test_an_unchanged_analyzer_changes_nothing(settings: Settings, tmp_path: Path) -> None:
    _, root = await _built(settings, tmp_path)
    report = await reanalyze(settings, root, extractor="rules", view="same")
    assert report.view == "same" and report.generation == "g2"
    for layer, changes in report.layers.items():
        assert (changes.added, changes.removed, changes.altered) == (0, 0, 0), layer
        assert changes.unchanged > 0


async def test_switch_catches_up_and_the_pipeline_follows_the_new_generation(
    settings: Settings, tmp_path: Path
) -> None:
    _, root = await _built(settings, tmp_path)
    await reanalyze(settings, root, extractor="none")
    log = open_log(settings.log_url, settings)
    await log.start()
    await publish_messages(log, load_messages(json.dumps(NEW[0]).encode(), settings), settings)
    await log.stop()

    stats = await switch_to(settings, root, "g2")  # the new message is analysed into g2 before the switch
    assert stats.analyzed == 1 and current_view(root) == "g2"
    active = LanceStore(root, read_only=True)
    assert any("violin" in r.text for r in active.rows("messages", "default:alice"))  # type: ignore[union-attr]

    # The write path takes the generation of the active view, not the environment's extractor.
    resolved = resolve(settings, LanceStore(root))
    assert (resolved.generation, resolved.extractor) == ("g2", "none")
    assert resolved.topic("analyses") == f"{settings.topic_prefix}.analyses.g2"

    # Switching back catches the first generation up, analysed by its own (rules) extractor.
    await switch_to(settings, root, "main")
    main = LanceStore(root, read_only=True)
    assert main.view == "main"
    violin = [r for r in main.rows("messages", "default:alice") if "violin" in r.text]  # type: ignore[union-attr]
    assert [r.analyzer.split("/")[0] for r in violin] == ["rules"]  # type: ignore[union-attr]
    assert len(await _analyses(settings)) == 30


async def test_a_following_pipeline_moves_to_the_switched_generation(settings: Settings, tmp_path: Path) -> None:
    _, root = await _built(settings, tmp_path)
    await reanalyze(settings, root, extractor="none")
    settings = dataclasses.replace(settings, fsync=False)
    store = LanceStore(root)
    resolved = resolve(settings, store)
    log = open_log(settings.log_url, resolved)
    await log.start()
    stop = asyncio.Event()
    made: list[str] = []

    def factory(s: Settings) -> MemoryAgent:
        made.append(s.generation)
        return _agent(s)

    task = asyncio.create_task(
        run_pipeline(
            log,
            Projector(store),
            _agent(resolved),
            resolved,
            follow=True,
            poll_s=0.05,
            stop=stop,
            agent_factory=factory,
        )
    )
    await asyncio.sleep(0.3)
    from adamem.projections.store.lance import switch_view

    switch_view(root, "g2")  # g2 is complete: a plain switch, the pipeline must notice by itself
    await publish_messages(log, load_messages(json.dumps(NEW[0]).encode(), settings), settings)
    g2 = dataclasses.replace(settings, generation="g2")
    for _ in range(200):
        if any(
            "violin" in r.text for r in LanceStore(root, read_only=True, view="g2").rows("messages", "default:alice")
        ):  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 30)
    await log.stop()
    assert made == ["g2"]
    assert [a.analyzer.name for a in await _analyses(g2)][-1] == "none"  # type: ignore[attr-defined]
    assert len(await _analyses(settings)) == 29  # nothing more was analysed into g1


async def test_a_pipeline_without_a_factory_refuses_to_mix_generations(settings: Settings, tmp_path: Path) -> None:
    _, root = await _built(settings, tmp_path)
    await switch_to(settings, root, (await reanalyze(settings, root, extractor="none")).view)
    log = open_log(settings.log_url, settings)
    await log.start()
    try:
        with pytest.raises(AdaMemError, match="generation g2"):
            await run_pipeline(log, Projector(LanceStore(root)), _agent(settings), settings)
    finally:
        await log.stop()


async def test_replay_of_a_reanalysed_view_folds_its_own_generation(settings: Settings, tmp_path: Path) -> None:
    _, root = await _built(settings, tmp_path)
    await switch_to(settings, root, (await reanalyze(settings, root, extractor="none")).view)
    resolved = resolve(settings, LanceStore(root, read_only=True))
    log = open_log(settings.log_url, resolved)
    await log.start()
    report = await rebuild_view(log, root, resolved, verify=True)
    await log.stop()
    assert report.verified is True and report.events == 29
    assert LanceStore(root, read_only=True, view=report.view).generation()["name"] == "g2"


async def test_generation_numbers_and_bad_names(settings: Settings, tmp_path: Path) -> None:
    _, root = await _built(settings, tmp_path)
    first = await reanalyze(settings, root, extractor="none")
    second = await reanalyze(settings, root, extractor="adamem.analysis.factory:NoExtractor")  # a plugin factory
    assert (first.generation, second.generation) == ("g2", "g3")
    assert second.analyzer["extractor"] == "adamem.analysis.factory:NoExtractor"
    assert all(
        (c.added, c.removed) == (0, 0)
        for c in layer_changes(
            LanceStore(root, read_only=True, view="g2"), LanceStore(root, read_only=True, view="g3")
        ).values()
    )
    with pytest.raises(ConfigError, match="not one of"):
        await reanalyze(settings, root, extractor="nonsense")
    with pytest.raises(ConfigError, match="cannot import"):
        await reanalyze(settings, root, extractor="no.such.module:make")
    with pytest.raises(StoreError, match="already exists"):
        await reanalyze(settings, root, extractor="none", view="g2")
    with pytest.raises(StoreError, match="no view"):
        await switch_to(settings, root, "nope")


def test_settings_name_one_analyses_topic_per_generation() -> None:
    s = Settings(topic_prefix="p")
    assert s.topic("analyses") == "p.analyses"
    g3 = dataclasses.replace(s, generation="g3")
    assert (g3.topic("analyses"), g3.topic("messages")) == ("p.analyses.g3", "p.messages")
    record = generation_record(dataclasses.replace(g3, extractor="none"))
    assert record == {"name": "g3", "topic": "p.analyses.g3", "extractor": "none", "embedder": "e5-pair"}
    assert settings_for(s, record) == dataclasses.replace(g3, extractor="none")
    with pytest.raises(ConfigError):
        settings_for(s, {"name": "third"})


def test_health_measures_lag_on_the_active_generation(settings: Settings, tmp_path: Path) -> None:
    from adamem.api.app import create_app
    from adamem.cli.commands import build_retriever

    async def prepare() -> None:
        _, root = await _built(settings, tmp_path)
        await switch_to(settings, root, (await reanalyze(settings, root, extractor="none")).view)
        log = open_log(settings.log_url, settings)
        await log.start()
        await publish_messages(log, load_messages(json.dumps(NEW[0]).encode(), settings), settings)
        await log.stop()

    asyncio.run(prepare())
    retriever = build_retriever(settings)
    try:
        with serving(create_app(settings, retriever, open_log(settings.log_url, settings))) as client:
            lag = client.get("/health").json()["lag"]
    finally:
        retriever.close()
    assert (lag["generation"], lag["analysis"], lag["projection"]) == ("g2", 1, 0)
