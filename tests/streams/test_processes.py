"""Processes started ahead of their jobs (``streams.processes.Started``): they prepare, take the jobs,
the ones no job took are ended, and every job is in its process before the caller works on."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from adamem.streams.processes import Started, run_jobs

ENTRY = "jobmod:work"
MODULE = """
import os
import pathlib

PREPARED = []


def prepare():
    PREPARED.append(os.getpid())


async def work(job, channel):
    (pathlib.Path(job["dir"]) / f"got-{job['n']}").write_text(str(os.getpid()))
    return {"pid": os.getpid(), "prepared": PREPARED == [os.getpid()], "double": job["n"] * 2}
"""


@pytest.fixture
def entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A job module the processes import (through ``PYTHONPATH``, which they inherit)."""
    (tmp_path / "jobmod.py").write_text(MODULE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *sys.path]))
    return tmp_path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


async def test_started_processes_prepare_take_the_jobs_and_the_idle_one_is_ended(entry: Path) -> None:
    pids: set[int] = set()
    started = Started(ENTRY)
    await started.start(3, pids)
    ahead = set(pids)
    assert len(ahead) == 3
    results, restarts = await run_jobs(ENTRY, [{"dir": str(entry), "n": n} for n in (1, 2)], pids=pids, started=started)
    assert [r["double"] for r in results] == [2, 4] and restarts == 0
    assert {r["pid"] for r in results} < ahead  # the jobs ran in processes started before them …
    assert all(r["prepared"] for r in results)  # … which had run their module's prepare()
    (idle,) = ahead - {r["pid"] for r in results}
    assert pids == {idle}
    await started.close(pids)
    assert not pids and not _alive(idle)


async def test_every_job_is_in_its_process_before_the_caller_works_without_pausing(entry: Path) -> None:
    handed = asyncio.Event()
    jobs = [{"dir": str(entry), "n": n} for n in (1, 2)]
    running = asyncio.ensure_future(run_jobs(ENTRY, jobs, handed=handed))
    await handed.wait()
    # The caller now works without giving its event loop a turn: the jobs must already be with the
    # processes, or they would never start (the files appear only once a process has its job).
    deadline = time.monotonic() + 60
    while not all((entry / f"got-{n}").exists() for n in (1, 2)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all((entry / f"got-{n}").exists() for n in (1, 2))
    results, _ = await running
    assert [r["double"] for r in results] == [2, 4]


async def test_a_started_process_killed_before_its_job_is_started_again(entry: Path) -> None:
    pids: set[int] = set()
    started = Started(ENTRY)
    await started.start(1, pids)
    (victim,) = pids
    os.kill(victim, signal.SIGKILL)
    results, restarts = await run_jobs(ENTRY, [{"dir": str(entry), "n": 5}], pids=pids, started=started)
    assert results[0]["double"] == 10 and results[0]["pid"] != victim and restarts == 1
    await started.close(pids)
    assert not pids


async def test_processes_started_for_one_entry_do_not_run_another(entry: Path) -> None:
    started = Started(ENTRY)
    with pytest.raises(ValueError, match="cannot run"):
        await run_jobs("jobmod:other", [{}], started=started)
