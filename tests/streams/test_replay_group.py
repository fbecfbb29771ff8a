"""A rebuild shared by a group of member processes on the real broker.

* Three ``adamem worker --rebuild VIEW`` processes fold the view ``adamem replay --group`` began;
  one is SIGKILLed after it committed part of a partition. Its partitions move to the others,
  which go on from the shards' checkpoints: the members' commits add up to the events of one
  uninterrupted rebuild (nothing folded twice), the view is switched to only once every partition
  reached its target, and its rows equal a rebuild in one process and the live view.
* A forget a member folds is erased in the view, and the switch removes the views it replaces, as
  ``rebuild_view`` does.
* ``adamem replay --group`` names the view to start members with, waits for them and switches;
  a member started on a rebuild that is done exits cleanly; a view that is missing, or that is
  the active one, is a clear error with the exit code of its kind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adamem.projections.store.lance import LanceStore
from adamem.settings import Settings
from adamem.streams.replay import rebuild_view
from adamem.streams.replay_group import group_of, open_job, rebuild_in_group
from tests.conftest import stop_process
from tests.streams.test_replay_jobs import _built, _checksum

SESSION_TIMEOUT_S = 6  # the broker's smallest (group.min.session.timeout.ms)
pytestmark = pytest.mark.kafka


class Members:
    """Member processes of one test, each in a session of its own (killed by its own pid only)."""

    def __init__(self, tmp_path: Path, bootstrap: str, settings: Settings, root: str) -> None:
        self.tmp_path, self.bootstrap, self.settings, self.root = tmp_path, bootstrap, settings, root
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, view: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "ADAMEM_TOPIC_PREFIX": self.settings.topic_prefix,
            "ADAMEM_PARTITIONS": str(self.settings.partitions),
            "ADAMEM_WORKER_SESSION_TIMEOUT": str(SESSION_TIMEOUT_S),
        }
        with (self.tmp_path / f"member-{len(self.procs)}.log").open("wb") as out:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("adamem")), "worker", "--rebuild", view,
                 "--log", f"kafka://{self.bootstrap}", "--store", self.root],
                env=env, cwd=self.tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def output(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.tmp_path / f"member-{self.procs.index(proc)}.log").read_text()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


@pytest.fixture
def kafka(settings: Settings, kafka_bootstrap: str) -> Settings:
    return dataclasses.replace(settings, log_url=f"kafka://{kafka_bootstrap}", partitions=3)


@pytest.fixture
def members(tmp_path: Path, kafka_bootstrap: str, kafka: Settings) -> Iterator[Members]:
    m = Members(tmp_path, kafka_bootstrap, kafka, str(tmp_path / "store"))
    yield m
    m.stop_all()


def _checkpoints(root: str, view: str, topic: str) -> dict[int, tuple[int, int]]:
    """Per shard of the view: its checkpoint's offset and the pid of the writer that wrote it."""
    reader = LanceStore(root, read_only=True, view=view)
    out = {}
    for p in range(reader.partition_count()):
        try:
            shard = reader._shard(p, create=False)
            row = shard.checkpoint_row() if shard else None
        except ValueError:  # being created
            continue
        if row:
            offset = int(json.loads(row["offsets"]).get(topic, 0))
            out[p] = (offset, int(str(row.get("writer") or ":-1").rsplit(":", 1)[1]))
    return out


async def _until(predicate: Any, timeout: float, what: str) -> float:
    """Wait for ``predicate()``; the seconds it took."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.05)
    return time.monotonic() - t0


def _committed(text: str) -> int:
    return sum(int(n) for n in re.findall(r"p\d+: committed (\d+) event", text))


async def test_members_share_a_rebuild_and_one_killed_midway_loses_nothing(
    kafka: Settings, members: Members, tmp_path: Path
) -> None:
    log, root = await _built(kafka, tmp_path)
    live = _checksum(root, "main")
    serial = await rebuild_view(log, root, kafka, view="serial", switch=False)
    topic = kafka.topic("analyses")
    coordinator = asyncio.create_task(rebuild_in_group(log, root, kafka, view="grp", verify=True, batch=1))
    views = LanceStore(root, read_only=True)
    await _until(lambda: "grp" in views.views() and bool(views.open_view("grp").rebuild_job()), 20, "the job")
    job = open_job(views, "grp")
    assert job.group == group_of(kafka, "grp") and job.targets == serial.offsets
    procs = [members.start("grp") for _ in range(3)]
    pids = {p.pid for p in procs}

    def midway() -> bool:
        return any(0 < o < job.targets[p] and w in pids for p, (o, w) in _checkpoints(root, "grp", topic).items())

    await _until(midway, 40, "a member half-way through a partition")
    partition, (offset, victim) = next(
        (p, (o, w)) for p, (o, w) in _checkpoints(root, "grp", topic).items() if 0 < o < job.targets[p] and w in pids
    )
    os.kill(victim, signal.SIGKILL)
    killed = next(p for p in procs if p.pid == victim)
    killed.wait(10)
    assert LanceStore(root, read_only=True).active_view() == "main" and not coordinator.done()

    def taken_over() -> bool:
        offset_now, writer = _checkpoints(root, "grp", topic)[partition]
        return writer in pids - {victim} and offset_now > offset  # the new owner went on from the checkpoint

    took = await _until(taken_over, 30, f"p{partition} taken over from the killed member")
    print(f"p{partition} went on at offset {offset} in another member {took:.1f} s after the SIGKILL")
    report = await asyncio.wait_for(coordinator, 40)
    assert report.switched and report.verified is True, report.diffs[:5]
    assert report.group == group_of(kafka, "grp") and report.offsets == job.targets
    assert _checksum(root, "grp") == _checksum(root, "serial") == live
    assert LanceStore(root, read_only=True).active_view() == "grp"
    survivors = [p for p in procs if p.pid != victim]
    for proc in survivors:
        assert proc.wait(30) == 0, members.output(proc)
    outputs = {p.pid: members.output(p) for p in procs}
    assert all("done; this member folded" in outputs[p.pid] for p in survivors), outputs
    # every event folded once: what the members committed adds up to one rebuild's events (the killed
    # one may have committed its last batch without saying so)
    folded = sum(_committed(text) for text in outputs.values())
    assert serial.events - job.batch <= folded <= serial.events, (folded, serial.events)
    await log.stop()


def test_a_member_of_a_done_rebuild_leaves_and_bad_views_are_refused(
    kafka: Settings,
    members: Members,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adamem.cli import main

    async def built() -> str:
        log, root = await _built(kafka, tmp_path)
        await log.stop()
        return root

    root = asyncio.run(built())
    places = ["--log", kafka.log_url, "--store", root]
    monkeypatch.setenv("ADAMEM_TOPIC_PREFIX", kafka.topic_prefix)
    assert main(["worker", "--rebuild", "main", *places]) == 2  # the active view: live workers fold it
    assert "no group rebuild recorded and it is the active view" in capsys.readouterr().err
    exe = str(Path(sys.executable).with_name("adamem"))
    env = {**_env(members), "PYTHONUNBUFFERED": "1"}
    coordinator = subprocess.Popen(
        [exe, "replay", "--group", "--view", "g1", *places, "--quiet"], env=env, stdout=subprocess.PIPE
    )
    try:
        assert coordinator.stdout is not None
        waiting = coordinator.stdout.readline().decode()
        assert "adamem worker --rebuild g1" in waiting, waiting
        member = subprocess.run(_member_argv(members, "g1"), env=env, capture_output=True, timeout=60)
        assert member.returncode == 0, member.stderr[-2000:]
        out = coordinator.communicate(timeout=60)[0].decode()
    finally:
        stop_process(coordinator)
    assert coordinator.returncode == 0, out
    assert f"after the members of {group_of(kafka, 'g1')} folded" in out and "switched: queries now read g1" in out, out
    assert "done; this member folded" in member.stdout.decode()
    before = _checkpoints(root, "g1", kafka.topic("analyses"))
    capsys.readouterr()
    assert main(["worker", "--rebuild", "g1", *places, "--quiet"]) == 0  # done (and switched to) already
    assert "nothing to fold" in capsys.readouterr().out
    assert _checkpoints(root, "g1", kafka.topic("analyses")) == before  # no shard claimed, nothing written
    assert main(["worker", "--rebuild", "nope", *places]) == 3
    assert "has no view 'nope'" in capsys.readouterr().err
    assert main(["worker", "--rebuild", "main", *places]) == 2  # the view the rebuild replaced: no job in it
    assert "has no group rebuild recorded;" in capsys.readouterr().err  # no longer the active one
    assert main(["replay", "--group", "--log", str(tmp_path / "log"), "--store", root, "--quiet"]) == 2
    assert "needs a kafka:// log" in capsys.readouterr().err
    assert main(["replay", "--group", "--user", "bob", *places, "--quiet"]) == 2
    assert "drop --user" in capsys.readouterr().err


def _member_argv(members: Members, view: str) -> list[str]:
    exe = str(Path(sys.executable).with_name("adamem"))
    return [
        exe,
        "worker",
        "--rebuild",
        view,
        "--log",
        f"kafka://{members.bootstrap}",
        "--store",
        members.root,
        "--quiet",
    ]


def _env(members: Members) -> dict[str, str]:
    return {
        **os.environ,
        "ADAMEM_TOPIC_PREFIX": members.settings.topic_prefix,
        "ADAMEM_PARTITIONS": str(members.settings.partitions),
        "ADAMEM_WORKER_SESSION_TIMEOUT": str(SESSION_TIMEOUT_S),
    }


async def test_a_forget_folded_by_a_member_removes_the_views_the_switch_replaces(
    kafka: Settings, members: Members, tmp_path: Path
) -> None:
    from adamem.analysis.agent import MemoryAgent
    from adamem.analysis.rules import RuleExtractor
    from adamem.events import MemoryForgotten
    from adamem.projections.projector import Projector
    from adamem.schemas.serde import encode_event
    from adamem.streams.log import OutgoingRecord
    from adamem.streams.pipeline import run_pipeline
    from tests.streams.test_replay_jobs import _embedder

    log, root = await _built(kafka, tmp_path)
    store = LanceStore(root)
    [message] = [m for m in store.rows("messages", "default:carol") if "Haidian" in m.text]  # type: ignore[attr-defined]
    forget = MemoryForgotten("0d5e0d11-1111-4111-8111-0000000000f2", "carol", "message", 1_713_700_000_000, message.id)
    await log.append(kafka.topic("control"), [OutgoingRecord("carol", encode_event(forget))])
    await run_pipeline(log, Projector(store), MemoryAgent(RuleExtractor(), _embedder()), kafka)
    kept = await rebuild_view(log, root, kafka, view="before", switch=False)
    coordinator = asyncio.create_task(rebuild_in_group(log, root, kafka, view="grp"))
    views = LanceStore(root, read_only=True)
    await _until(lambda: "grp" in views.views() and bool(views.open_view("grp").rebuild_job()), 20, "the job")
    member = members.start("grp")
    report = await asyncio.wait_for(coordinator, 50)
    assert member.wait(30) == 0, members.output(member)
    assert views.open_view("grp", read_only=True).rebuild_job()["erased"]  # the member noted its erasure
    assert report.switched and report.removed_views == ["before", "main"]
    assert _committed(members.output(member)) == kept.events and report.events == 0  # all folded by the member
    rebuilt = LanceStore(root, read_only=True)
    assert not [m for m in rebuilt.rows("messages", "default:carol") if "Haidian" in m.text]  # type: ignore[attr-defined]
    assert [m for m in rebuilt.rows("messages", "default:alice") if "Haidian" in m.text]  # type: ignore[attr-defined]
    await log.stop()
