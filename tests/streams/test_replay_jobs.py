"""Replay in processes side by side: parallel equals serial equals live, also as of a time or an
offset, after a forget, from a real broker, and when a fold process is killed half-way."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import signal
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from adamem.analysis.agent import MemoryAgent
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.rules import RuleExtractor
from adamem.errors import StoreError
from adamem.events import MemoryForgotten
from adamem.ingest import load_messages, parse_time
from adamem.partitioning import owner_partition
from adamem.projections.projector import Projector
from adamem.projections.store.lance import LanceStore
from adamem.projections.store.memory import InMemoryStore
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import EventLog, OutgoingRecord
from adamem.streams.pipeline import ANALYSIS_BATCH, run_pipeline
from adamem.streams.publish import publish_messages
from adamem.streams.replay import rebuild_view, rows_checksum, store_rows
from adamem.streams.replay_jobs import FoldPlan, FoldRunner, _deal

SAMPLE = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_text()
USERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")
TABLES = {"owners", "messages", "episodic", "persona", "graph_nodes", "graph_edges"}


@functools.cache
def _embedder() -> E5Embedder:
    return E5Embedder()


def _conversations() -> bytes:
    """The sample conversation told by several owners, so the log's partitions all hold some."""
    lines = []
    for user in USERS:
        for line in SAMPLE.splitlines():
            record = json.loads(line)
            record["user_id"] = user
            record["message_id"] = f"{user}-{record['message_id']}"
            lines.append(json.dumps(record))
    return ("\n".join(lines) + "\n").encode()


async def _built(settings: Settings, tmp_path: Path) -> tuple[EventLog, str]:
    log = open_log(settings.log_url, settings)
    await log.start()
    await publish_messages(log, load_messages(_conversations(), settings), settings)
    root = str(tmp_path / "store")
    await run_pipeline(log, Projector(LanceStore(root)), MemoryAgent(RuleExtractor(), _embedder()), settings)
    return log, root


def _checksum(root: str, view: str) -> str:
    return rows_checksum(store_rows(LanceStore(root, read_only=True, view=view), TABLES))


@pytest.fixture
def four(settings: Settings) -> Settings:
    """An embedded log of four partitions, every one holding owners."""
    spread = {owner_partition(f"default:{u}", 4) for u in USERS}
    assert spread == {0, 1, 2, 3}, spread
    return dataclasses.replace(settings, embedded_partitions=4)


def test_partitions_are_dealt_largest_first_to_the_lightest_process() -> None:
    sizes = {0: 10, 1: 40, 2: 30, 3: 20, 4: 0}
    assert _deal((0, 1, 2, 3, 4), sizes, 2) == [(0, 1, 4), (2, 3)]
    assert _deal((0, 1, 2, 3, 4), sizes, 8) == [(1, 4), (2,), (3,), (0,)]
    assert _deal((0, 1), {0: 0, 1: 0}, 4) == [(0, 1)]  # nothing to fold: one process, here


def test_jobs_below_one_is_a_clear_error(settings: Settings) -> None:
    from adamem.errors import AdaMemError

    with pytest.raises(AdaMemError, match="jobs must be at least 1"):
        FoldRunner(open_log("memory://", settings), InMemoryStore(), settings, jobs=0)


async def test_parallel_replay_equals_serial_and_live(four: Settings, tmp_path: Path) -> None:
    log, root = await _built(four, tmp_path)
    live = _checksum(root, "main")
    parallel = await rebuild_view(log, root, four, verify=True, jobs=2, view="par", switch=False)
    assert parallel.verified is True and parallel.diffs == [], parallel.diffs[:5]
    assert parallel.processes == 2 and parallel.restarts == 0
    assert not _children("adamem.streams.processes")  # the process started ahead folded, and none is left
    serial = await rebuild_view(log, root, four, view="ser", switch=False, jobs=1)
    assert serial.processes == 0 and parallel.events == serial.events > 0
    assert parallel.offsets == serial.offsets
    assert _checksum(root, "par") == _checksum(root, "ser") == live
    auto = await rebuild_view(log, root, four, view="auto", switch=False, jobs=None)
    assert auto.processes == 0 and auto.events == serial.events  # too short a log to gain from processes
    switched = await rebuild_view(log, root, four, jobs=3)  # no verify: one pass per process, then the switch
    assert switched.switched and switched.events == serial.events
    assert _checksum(root, switched.view) == live
    await log.stop()


async def test_a_rebuild_that_stops_before_folding_ends_the_processes_it_started(
    four: Settings, tmp_path: Path
) -> None:
    log, root = await _built(four, tmp_path)
    await rebuild_view(log, root, four, view="taken", switch=False, jobs=1)
    with pytest.raises(StoreError, match="already exists"):
        await rebuild_view(log, root, four, view="taken", switch=False, jobs=2)
    assert not _children("adamem.streams.processes")
    await log.stop()


async def test_a_process_that_cannot_start_ends_those_started_before_it(
    four: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import adamem.streams.processes as processes

    log, root = await _built(four, tmp_path)
    spawn, started = processes._spawn, []

    async def second_fails(entry: str) -> Any:
        if started:
            raise OSError("no more processes")
        started.append(await spawn(entry))
        return started[-1]

    monkeypatch.setattr(processes, "_spawn", second_fails)
    with pytest.raises(OSError, match="no more processes"):
        await rebuild_view(log, root, four, view="three", switch=False, jobs=3)
    assert started and started[0].returncode is not None  # the one started was ended
    assert not _children("adamem.streams.processes")
    await log.stop()


async def test_views_as_of_a_time_or_an_offset_are_the_same_in_parallel(four: Settings, tmp_path: Path) -> None:
    log, root = await _built(four, tmp_path)
    when = parse_time("2024-03-10T00:00:00Z")
    by_time = [await rebuild_view(log, root, four, until_time=when, view=f"t{j}", jobs=j) for j in (1, 2)]
    assert by_time[0].events == by_time[1].events > 0
    assert _checksum(root, "t1") == _checksum(root, "t2") != _checksum(root, "main")
    by_offset = [await rebuild_view(log, root, four, until_offset=5, view=f"o{j}", jobs=j) for j in (1, 2)]
    assert by_offset[0].offsets == by_offset[1].offsets == dict.fromkeys(range(4), 5)
    assert _checksum(root, "o1") == _checksum(root, "o2")
    assert not any(r.switched for r in by_time + by_offset)
    await log.stop()


async def test_a_forget_is_replayed_in_parallel_and_the_views_before_it_removed(four: Settings, tmp_path: Path) -> None:
    log, root = await _built(four, tmp_path)
    store = LanceStore(root)
    [message] = [m for m in store.rows("messages", "default:carol") if "Haidian" in m.text]  # type: ignore[attr-defined]
    forget = MemoryForgotten("0d5e0d11-1111-4111-8111-0000000000f1", "carol", "message", 1_713_700_000_000, message.id)
    await log.append(four.topic("control"), [OutgoingRecord("carol", encode_event(forget))])
    await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), _embedder()), four)
    kept = await rebuild_view(log, root, four, view="before", switch=False, jobs=1)
    report = await rebuild_view(log, root, four, verify=True, jobs=2)
    assert report.verified and report.switched, report.diffs[:5]
    assert "before" in report.removed_views and "main" in report.removed_views  # erasure reached every view
    rebuilt = LanceStore(root, read_only=True)
    assert not [m for m in rebuilt.rows("messages", "default:carol") if "Haidian" in m.text]  # type: ignore[attr-defined]
    assert [m for m in rebuilt.rows("messages", "default:alice") if "Haidian" in m.text]  # type: ignore[attr-defined]
    assert report.events == kept.events
    await log.stop()


class _Killed(Exception):
    """The process of a member was killed."""


class _KilledAsItErases(LanceStore):
    """A member's store whose process is killed between its commit of a forget and the erasure after it."""

    def erase_history(self, partition: int) -> list[str]:
        raise _Killed(partition)


def _deleted_kept(root: str, view: str, partition: int) -> dict[str, set[str]]:
    """Per table of a shard, the ids of rows its versions kept on disk hold and its latest version does not."""
    import lance

    found = {}
    for table in sorted(TABLES):
        path = f"{root}/views/{view}/p{partition}/{table}.lance"
        if not Path(path).exists():
            continue
        versions = [v["version"] for v in lance.dataset(path).versions()]
        ids = [set(lance.dataset(path, version=v).to_table(columns=["id"]).column("id").to_pylist()) for v in versions]
        if ids and set().union(*ids) - ids[-1]:
            found[table] = set().union(*ids) - ids[-1]
    return found


async def test_a_group_rebuild_waits_for_the_erasure_a_killed_member_owed_and_switches_without_the_forgotten(
    four: Settings, tmp_path: Path
) -> None:
    """A member killed between committing a forget and erasing the history it leaves: the partition's
    checkpoint is at its target, but the job is not done until a member that claims the shard erases it,
    and the switch removes the views the rebuild replaces."""
    from adamem.streams.replay_group import POLL_S, _members_done
    from adamem.streams.replay_jobs import _fold_range

    log, root = await _built(four, tmp_path)
    store = LanceStore(root)
    item = store.rows("persona", "default:carol")[0]  # a rebuild folds it, then the forget deletes it
    forget = MemoryForgotten("0d5e0d11-1111-4111-8111-0000000000f3", "carol", "item", 1_713_700_000_000, item.id)
    await log.append(four.topic("control"), [OutgoingRecord("carol", encode_event(forget))])
    await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), _embedder()), four)
    await rebuild_view(log, root, four, view="before", switch=False, jobs=1)
    before = _checksum(root, "before")
    carol = owner_partition("default:carol", 4)
    waits: list[bool] = []

    async def member(plan: FoldPlan, erases: bool) -> None:
        assert plan.to is not None
        kind = LanceStore if erases else _KilledAsItErases
        projector = Projector(kind(root, view=plan.view, optimize_every=0, bulk=True), feed=False)
        try:
            for p in sorted(plan.partitions, key=lambda p: p == carol):  # carol's last
                await _fold_range(log, projector, four, p, plan.to[p], batch=5)
        except _Killed:
            pass
        finally:
            projector.store.close()

    async def members(rebuilt: Any, plan: FoldPlan, tick: Any) -> None:
        catalog = LanceStore(root, read_only=True)
        done = asyncio.create_task(
            _members_done(rebuilt, plan, tick, settings=four, catalog=catalog, batch=5, announce=None)
        )
        while not catalog.open_view(plan.view, read_only=True).rebuild_job():  # the job recorded
            await asyncio.sleep(0.01)
        await member(plan, erases=False)  # folds up to the forget in carol's partition, and is killed there
        view = catalog.open_view(plan.view, read_only=True)
        assert view.rebuild_job()["erasing"] == [carol] and view.rebuild_job()["erased"] == [carol]
        assert plan.to == {p: view.checkpoint(p).get(four.topic("analyses"), 0) for p in plan.partitions}
        assert _deleted_kept(root, plan.view, carol) == {"persona": {item.id}}  # an old version still holds it
        await asyncio.sleep(3 * POLL_S)
        waits.append(done.done())
        await member(plan, erases=True)  # claims the shard: erases it first, then folds the rest
        await asyncio.wait_for(done, 30)

    report = await rebuild_view(log, root, four, view="grp", members=members)
    assert waits == [False]  # the coordinator waited while the erasure was owed
    assert report.switched and report.removed_views == ["before", "main"]
    assert _deleted_kept(root, "grp", carol) == {}
    assert LanceStore(root, read_only=True).open_view("grp", read_only=True).rebuild_job()["erasing"] == []
    assert _checksum(root, "grp") == before
    await log.stop()


async def test_a_killed_fold_process_is_restarted_and_goes_on_from_its_checkpoints(
    four: Settings, tmp_path: Path
) -> None:
    log, root = await _built(four, tmp_path)
    views = LanceStore(root, read_only=True)
    for name in ("serial", "killed"):
        target = views.open_view(name, bulk=True)
        target.bind(4)
        target.close()
    ends = await log.end_offsets(four.topic("analyses"))
    plan = FoldPlan("serial", (0, 1, 2, 3), to=ends, optimize=True, batch=7)
    folded: list[int] = []
    await FoldRunner(log, root, four, jobs=1).run(plan, lambda r, e: folded.append(e), sizes=ends)

    killed: list[int] = []
    reported: list[int] = []

    runner = FoldRunner(log, root, four, jobs=2)

    def step(records: int, events: int) -> None:
        reported.append(events)
        if not killed and runner.pids:  # after a committed batch: the fold process is half-way
            victim = min(runner.pids)
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    done = await runner.run(dataclasses.replace(plan, view="killed"), step, sizes=ends)
    assert killed and runner.restarts == 1
    # what the runner says each shard reached is what the shards' checkpoints hold, the restarted share's too
    reader = LanceStore(root, read_only=True, view="killed")
    assert done.offsets == {p: reader.checkpoint(p).get(four.topic("analyses"), 0) for p in range(4)} == dict(ends)
    assert _checksum(root, "killed") == _checksum(root, "serial") == _checksum(root, "main")
    # the restarted process began at its shards' checkpoints: no batch was reported folded twice
    assert sum(reported) <= sum(folded)
    await log.stop()


async def test_parallel_replay_from_the_broker_equals_live(
    settings: Settings, kafka_bootstrap: str, tmp_path: Path
) -> None:
    kafka = dataclasses.replace(settings, log_url=f"kafka://{kafka_bootstrap}", partitions=3)
    log, root = await _built(kafka, tmp_path)
    report = await rebuild_view(log, root, kafka, verify=True, jobs=2)
    assert report.verified and report.switched, report.diffs[:5]
    assert report.checksum == report.live_checksum
    assert len(report.offsets) == 3 and all(report.offsets.values())
    # reanalysis from the broker: each process appends its partitions' analyses itself
    from adamem.streams.reanalyze import layer_changes, reanalyze

    serial = await reanalyze(kafka, root, extractor="none", view="serial", jobs=1)
    parallel = await reanalyze(kafka, root, extractor="none", view="parallel", jobs=2)
    views = LanceStore(root, read_only=True)
    changes = layer_changes(views.open_view("serial", read_only=True), views.open_view("parallel", read_only=True))
    assert all(c.added == c.removed == c.altered == 0 for c in changes.values()), changes
    assert parallel.stats.analyzed == serial.stats.analyzed > 0
    assert await _analyses(log, kafka, parallel.generation) == await _analyses(log, kafka, serial.generation)
    await log.stop()


def test_the_replay_command_folds_in_parallel_and_says_what_it_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from adamem.cli import main

    monkeypatch.setenv("ADAMEM_EMBEDDED_PARTITIONS", "4")
    (tmp_path / "in.jsonl").write_bytes(_conversations())
    places = ["--log", str(tmp_path / "log"), "--store", str(tmp_path / "store")]
    assert main(["publish", str(tmp_path / "in.jsonl"), places[0], places[1], "--quiet"]) == 0
    assert main(["project", *places, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["replay", *places, "--verify", "--jobs", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (
        "by 2 processes" in out and "verify: equal to the live view" in out and "switched: queries now read r1" in out
    ), out
    assert main(["replay", *places, "--user", "bob", "--verify", "--jobs", "2", "--quiet"]) == 0  # one partition
    assert "equal to the live view" in capsys.readouterr().out
    assert main(["replay", *places, "--jobs", "0", "--quiet"]) != 0
    assert "jobs must be at least 1" in capsys.readouterr().err
    assert LanceStore(str(tmp_path / "store"), read_only=True).views() == ["main", "r1"]  # no view was begun


def _children(name: str) -> list[int]:
    """Pids of this process's children whose command line names ``name``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and name in cmdline:
            found.append(int(stat.parent.name))
    return found


async def _analyses(log: EventLog, settings: Settings, generation: str) -> dict[int, int]:
    return await log.end_offsets(dataclasses.replace(settings, generation=generation).topic("analyses"))


async def test_parallel_reanalysis_equals_serial_even_when_a_process_is_killed(four: Settings, tmp_path: Path) -> None:
    from adamem.streams.reanalyze import layer_changes, reanalyze

    log, root = await _built(four, tmp_path)
    await log.stop()  # the reanalysis writes the log
    serial = await reanalyze(four, root, extractor="none", view="serial", jobs=1)
    parallel = await reanalyze(four, root, extractor="none", view="parallel", jobs=2)
    killed: list[int] = []

    def kill_one(_: int) -> None:
        if not killed and (pids := _children("adamem.streams.processes")):
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    resumed = await reanalyze(four, root, extractor="none", view="killed", jobs=2, progress=kill_one)
    assert killed
    views = LanceStore(root, read_only=True)
    log = open_log(four.log_url, four)
    await log.start()
    assert parallel.stats.analyzed == serial.stats.analyzed > 0
    # a process killed between a batch's append and its note loses that batch's count, never the batch
    assert serial.stats.analyzed - ANALYSIS_BATCH <= resumed.stats.analyzed <= serial.stats.analyzed
    for report in (parallel, resumed):
        changes = layer_changes(views.open_view("serial", read_only=True), views.open_view(report.view, read_only=True))
        assert all(c.added == c.removed == c.altered == 0 for c in changes.values()), changes
        assert changes["working"].unchanged and changes["graph"].unchanged
        assert {k: vars(v) for k, v in report.layers.items()} == {k: vars(v) for k, v in serial.layers.items()}
        # each message analysed once: the new generation's analyses are as many as the serial one's, per partition
        assert await _analyses(log, four, report.generation) == await _analyses(log, four, serial.generation)
    await log.stop()
