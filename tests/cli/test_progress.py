"""Progress of long commands: a bar on a terminal, a status line otherwise, on stderr only; --quiet silences it."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from adamem.progress import Progress, status_line

EXE = Path(sys.executable).with_name("adamem")
ROWS = [
    {"user_id": f"u{i % 7}", "speaker": "U", "text": f"I like hiking number {i}", "occurred_at": 1_700_000_000_000 + i}
    for i in range(300)
]


class Clock:
    """A hand-moved clock: progress reads time only to decide when to print and to compute rates."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_line_every_interval_with_rate_and_eta() -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress("project", 100, unit="step", every=5, stream=out, clock=clock)
    clock.now += 2
    bar.update(10)
    assert out.getvalue() == ""  # not yet 5 s
    clock.now += 3
    bar.update(15)  # 25 done in 5 s: 5/s, 75 left: 15 s
    assert out.getvalue().splitlines() == ["project: 25/100 step (25%), 5.0 step/s, ETA 15s, 5s elapsed"]
    clock.now += 15
    bar.update(75)
    bar.close()
    assert out.getvalue().splitlines()[-1] == "project: 100/100 step (100%), 5.0 step/s, 20s elapsed"


def test_a_short_run_prints_nothing_and_quiet_never_does() -> None:
    out, clock = io.StringIO(), Clock()
    with Progress("publish", 3, stream=out, clock=clock) as bar:
        bar.update(3)
    assert out.getvalue() == ""
    with Progress("publish", 3, stream=out, clock=clock, quiet=True, every=0) as bar:
        clock.now += 10
        bar.update(3)
    assert out.getvalue() == ""


def test_past_its_total_progress_counts_on() -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress("project", 10, unit="step", every=1, stream=out, clock=clock)
    clock.now += 2
    bar.update(14)  # following the log: more arrived
    assert out.getvalue().splitlines() == ["project: 14 step, 7.0 step/s, 2s elapsed"]


def test_without_a_total_the_count_and_the_rate() -> None:
    assert status_line("reanalyze", 30, None, "ev", 10) == "reanalyze: 30 ev, 3.0 ev/s, 10s elapsed"
    assert status_line("replay", 10, 100, "ev", 3725 / 9).endswith("ETA 1h02m, 6m54s elapsed")


def _cli(argv: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *argv], capture_output=True, text=True, timeout=600, env={**os.environ, **env}, cwd=tmp_path
    )


def test_commands_print_status_lines_on_stderr_and_the_same_stdout(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS), encoding="utf-8")
    results = {}
    for name, extra in (("status", []), ("quiet", ["--quiet"])):
        log, store = str(tmp_path / f"log-{name}"), str(tmp_path / f"store-{name}")
        publish = _cli(["publish", "in.jsonl", "--log", log, *extra], tmp_path, ADAMEM_PROGRESS_SECONDS="0")
        project = _cli(["project", "--log", log, "--store", store, *extra], tmp_path, ADAMEM_PROGRESS_SECONDS="0")
        replay = _cli(["replay", "--log", log, "--store", store, *extra], tmp_path, ADAMEM_PROGRESS_SECONDS="0")
        assert publish.returncode == project.returncode == replay.returncode == 0, project.stderr
        results[name] = (publish, project, replay)
    publish, project, replay = results["status"]
    assert "publish: 300/300 msg (100%)" in publish.stderr
    assert "project: 600/600 step (100%)" in project.stderr  # each message analysed, then folded
    assert "replay: 300/300 ev (100%)" in replay.stderr
    for done in results["quiet"]:
        assert done.stderr == ""
    for loud, quiet in zip(results["status"], results["quiet"], strict=True):  # what scripts parse is unchanged
        assert loud.stdout.replace("-status", "-quiet") == quiet.stdout
        assert not any(f"{unit}/s" in loud.stdout for unit in ("msg", "step", "ev"))


def test_on_a_terminal_a_bar_with_rate_and_eta(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS), encoding="utf-8")
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal 120 columns wide
    done = subprocess.Popen(
        [str(EXE), "publish", "in.jsonl", "--log", str(tmp_path / "log")],
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=tmp_path,
        text=True,
    )
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    stdout, _ = done.communicate(timeout=60)
    text = seen.decode(errors="replace")
    assert done.returncode == 0 and "publish: 100%" in text and "300/300" in text and "msg/s" in text, text
    assert stdout.startswith("published 300 message(s)") and "\r" not in stdout


@pytest.mark.parametrize("command", ["publish", "project", "replay", "reanalyze"])
def test_every_long_command_takes_quiet(command: str, tmp_path: Path) -> None:
    done = _cli([command, "--help"], tmp_path)
    assert done.returncode == 0 and "--quiet" in done.stdout
