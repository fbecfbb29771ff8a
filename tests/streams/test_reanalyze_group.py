"""A reanalysis shared by a group of member processes on the real broker.

* Two ``adamem worker --reanalyze VIEW`` processes analyse the generation ``adamem reanalyze
  --group`` began; one is SIGKILLed after it committed part of the work. Its partitions move to the
  other, which resumes from what the analyses topic accounts for: every message has exactly one
  analysis on the new topic, and the view the coordinator folds equals a reanalysis in one process,
  layer by layer.
* ``adamem reanalyze --group`` names the view to start members with; a member of a reanalysis that
  is done leaves at once; a view that records no reanalysis, or a rebuild member on a reanalysis,
  is a clear error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from adamem.errors import ConfigError, NotFound
from adamem.events import MessageAnalyzed
from adamem.projections.store.lance import LanceStore
from adamem.schemas.serde import decode_event
from adamem.settings import Settings
from adamem.streams.kafka_log import KafkaLog
from adamem.streams.keys import keystore_for
from adamem.streams.reanalyze import layer_changes, reanalyze
from adamem.streams.reanalyze_group import KIND, open_reanalysis
from adamem.streams.replay_group import open_job
from tests.streams.test_replay_group import SESSION_TIMEOUT_S, _until
from tests.streams.test_replay_jobs import _built

pytestmark = pytest.mark.kafka


class Members:
    """Member processes of one test, each in a session of its own (killed by its own pid only)."""

    def __init__(self, tmp_path: Path, bootstrap: str, settings: Settings, root: str) -> None:
        self.tmp_path, self.bootstrap, self.settings, self.root = tmp_path, bootstrap, settings, root
        self.procs: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "ADAMEM_TOPIC_PREFIX": self.settings.topic_prefix,
            "ADAMEM_PARTITIONS": str(self.settings.partitions),
            "ADAMEM_WORKER_SESSION_TIMEOUT": str(SESSION_TIMEOUT_S),
            "ADAMEM_WORKER_BATCH": "4",  # many small transactions: a kill lands between two of them
        }

    def argv(self, view: str, n: int) -> list[str]:
        return [str(Path(sys.executable).with_name("adamem")), "worker", "--reanalyze", view,
                "--log", f"kafka://{self.bootstrap}", "--store", self.root,
                "--worker-log", str(self.tmp_path / f"faust-{n}.log")]  # fmt: skip

    def start(self, view: str) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        with (self.tmp_path / f"member-{n}.log").open("wb") as out:
            proc = subprocess.Popen(
                self.argv(view, n), env=self.env(), cwd=self.tmp_path, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def output(self, n: int) -> str:
        return (self.tmp_path / f"member-{n}.log").read_text(errors="replace")

    def faust_log(self, n: int) -> str:
        path = self.tmp_path / f"faust-{n}.log"
        return path.read_text(errors="replace") if path.exists() else ""

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


def _commits(text: str) -> int:
    """Transactions a member's worker committed (its Faust log)."""
    return len(re.findall(r"p\d+: committed \d+ record", text))


async def _analyses(bootstrap: str, settings: Settings, topic: str) -> Counter[str]:
    """How many analyses each message (by event id) has on ``topic`` (read_committed)."""
    log = KafkaLog(bootstrap, settings)
    keys = keystore_for(log, settings)
    counts: Counter[str] = Counter()
    async for rec in log.read(topic):
        event = decode_event(rec.value, keys)
        if isinstance(event, MessageAnalyzed):
            counts[event.message.event_id] += 1
    return counts


async def test_members_share_a_reanalysis_and_one_killed_midway_analyses_nothing_twice(
    kafka: Settings, kafka_bootstrap: str, members: Members, tmp_path: Path
) -> None:
    log, root = await _built(kafka, tmp_path)
    messages = sum((await log.end_offsets(kafka.topic("messages"))).values())
    serial = await reanalyze(kafka, root, extractor="none", view="serial")
    coordinator = asyncio.create_task(reanalyze(kafka, root, extractor="none", view="grp", group=True))
    views = LanceStore(root, read_only=True)
    await _until(lambda: "grp" in views.views() and bool(views.open_view("grp").rebuild_job()), 30, "the job")
    job, view = open_reanalysis(views, "grp")
    assert job.total == messages and view.generation()["name"] != serial.generation
    procs = [members.start("grp") for _ in range(2)]
    await _until(lambda: any(_commits(members.faust_log(n)) >= 2 for n in range(2)), 120, "a member's commits")
    victim = next(n for n in range(2) if _commits(members.faust_log(n)) >= 2)
    os.killpg(procs[victim].pid, signal.SIGKILL)
    procs[victim].wait(10)
    survivor = 1 - victim
    assert not coordinator.done()
    report = await asyncio.wait_for(coordinator, 240)
    assert report.group and report.accounted == messages and not report.switched
    assert procs[survivor].wait(60) == 0, members.output(survivor)
    assert "done; this member analysed" in members.output(survivor), members.output(survivor)
    assert _commits(members.faust_log(survivor)) >= 1
    # every message analysed exactly once on the group's topic, as on the topic of the reanalysis in one process
    group_counts = await _analyses(kafka_bootstrap, kafka, report.analyzer["topic"])
    serial_counts = await _analyses(kafka_bootstrap, kafka, serial.analyzer["topic"])
    assert set(group_counts) == set(serial_counts) and len(group_counts) == messages
    assert set(group_counts.values()) == {1}, [e for e, c in group_counts.items() if c > 1][:5]
    # and the view equals the reanalysis in one process, layer by layer
    changes = layer_changes(views.open_view("serial"), views.open_view("grp"))
    assert all(c.added == c.removed == c.altered == 0 for c in changes.values()), changes
    assert sum(c.unchanged for c in changes.values()) > 0
    assert LanceStore(root, read_only=True).active_view() == "main"
    await log.stop()


async def test_a_member_of_a_done_reanalysis_leaves_and_other_views_are_refused(
    kafka: Settings, members: Members, tmp_path: Path
) -> None:
    log, root = await _built(kafka, tmp_path)
    await log.stop()
    exe = str(Path(sys.executable).with_name("adamem"))
    places = ["--log", kafka.log_url, "--store", root]
    env = {**members.env(), "PYTHONUNBUFFERED": "1"}
    coordinator = subprocess.Popen(
        [exe, "reanalyze", "--group", "--extractor", "none", "--view", "grp", *places, "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert coordinator.stdout is not None
        waiting = (await asyncio.to_thread(coordinator.stdout.readline)).decode()
        assert "adamem worker --reanalyze grp" in waiting, waiting
        views = LanceStore(root, read_only=True)
        assert views.open_view("grp").rebuild_job()["kind"] == KIND
        with pytest.raises(ConfigError, match="is a reanalysis the group shares"):
            open_job(views, "grp")  # a rebuild member is told to run --reanalyze
        with pytest.raises(ConfigError, match="records no reanalysis"):
            open_reanalysis(views, "main")
        with pytest.raises(NotFound, match="has no view 'nope'"):
            open_reanalysis(views, "nope")
        first = await asyncio.to_thread(
            subprocess.run, members.argv("grp", 0), env=env, capture_output=True, timeout=180
        )
        assert first.returncode == 0, first.stderr[-2000:]
        out, err = await asyncio.to_thread(coordinator.communicate, timeout=120)
        assert coordinator.returncode == 0, err[-2000:]
        assert "members accounted for" in out.decode() and "folded into view grp" in out.decode(), out
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
            coordinator.wait(30)
    again = subprocess.run(members.argv("grp", 1), env=env, capture_output=True, timeout=60)
    assert again.returncode == 0 and b"every partition is analysed already" in again.stdout, again
    with pytest.raises(ConfigError, match="needs a kafka:// log"):
        await reanalyze(dataclasses.replace(kafka, log_url=str(tmp_path / "log")), root, extractor="none", group=True)


async def test_a_coordinator_begun_again_on_its_view_waits_for_the_same_members(
    kafka: Settings, members: Members, tmp_path: Path
) -> None:
    log, root = await _built(kafka, tmp_path)
    messages = sum((await log.end_offsets(kafka.topic("messages"))).values())
    first = asyncio.create_task(reanalyze(kafka, root, extractor="none", view="grp", group=True))
    views = LanceStore(root, read_only=True)
    await _until(lambda: "grp" in views.views() and bool(views.open_view("grp").rebuild_job()), 30, "the job")
    first.cancel()  # the coordinator stops; its job stays recorded in the view
    with pytest.raises(asyncio.CancelledError):
        await first
    generation = views.open_view("grp").generation()["name"]
    member = members.start("grp")
    with pytest.raises(ConfigError, match="is a reanalysis with extractor 'none', not 'rules'"):
        await reanalyze(kafka, root, extractor="rules", view="grp", group=True)
    report = await asyncio.wait_for(reanalyze(kafka, root, extractor="none", view="grp", group=True), 180)
    assert report.group and report.accounted == messages and report.generation == generation
    assert member.wait(60) == 0, members.output(0)
    counts = await _analyses(members.bootstrap, kafka, report.analyzer["topic"])
    assert len(counts) == messages and set(counts.values()) == {1}
    assert sum(c.unchanged + c.altered + c.added for c in report.layers.values()) > 0
    assert sorted(v for v in views.views() if v != "main") == ["grp"]  # no second generation begun
    await log.stop()
