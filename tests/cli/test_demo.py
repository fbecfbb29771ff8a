"""``adamem demo`` and ``deploy/demo.sh`` run twice, on a taken port, and as a first-time user sees them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adamem.cli import main

REPO = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).with_name("adamem")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_running_the_demo_again_publishes_nothing_and_keeps_a_forget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, store = tmp_path / "log", tmp_path / "store"
    demo = ["demo", "--no-serve", "--log", str(log), "--store", str(store)]

    def messages() -> list[dict[str, str]]:
        code, out, _ = _run(capsys, "log", "dump", "--log", str(log))
        assert code == 0
        return [json.loads(line)["event"] for line in out.splitlines()]

    code, out, err = _run(capsys, *demo)
    assert code == 0 and "published 29 sample message(s)" in out, err
    assert len(messages()) == 29
    first = messages()[0]
    code, _, err = _run(capsys, "forget", first["user_id"], "--message", first["event_id"], "--log", str(log))
    assert code == 0, err
    code, out, err = _run(capsys, *demo)
    assert code == 0 and "the sample's 29 messages are already in" in out and "nothing published" in out, err
    assert len(messages()) == 29  # not 58
    code, out, _ = _run(capsys, "memory", first["user_id"], "--layer", "archive", "--json", "--store", str(store))
    assert first["text"] and first["text"] not in [row["text"] for row in json.loads(out)]  # still forgotten


def test_a_taken_port_is_refused_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("ADAMEM_PORT", str(port))
        code, out, err = _run(capsys, "demo", "--log", str(tmp_path / "log"), "--store", str(tmp_path / "store"))
        assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err and f"ADAMEM_PORT={port + 1}" in err, err
        assert "serving" not in out and not (tmp_path / "log").exists()
        code, _, err = _run(capsys, "serve", "--store", str(tmp_path / "store"), "--log", str(tmp_path / "log"))
        assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err, err


def test_demo_sh_says_what_it_does_before_it_installs(tmp_path: Path) -> None:
    """The install is stood in for by a setup.sh that takes two seconds; the first line comes before it ends."""
    (tmp_path / "deploy").mkdir()
    shutil.copy(REPO / "deploy" / "demo.sh", tmp_path / "deploy" / "demo.sh")
    (tmp_path / "deploy" / "setup.sh").write_text("sleep 2\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "adamem").write_text('#!/bin/sh\necho demo ran "$@"\n')
    (tmp_path / ".venv" / "bin" / "adamem").chmod(0o755)
    started = time.monotonic()
    process = subprocess.Popen(
        ["bash", str(tmp_path / "deploy" / "demo.sh"), "--no-serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert process.stderr is not None
    first = process.stderr.readline()
    said_after = time.monotonic() - started
    out, _ = process.communicate(timeout=60)
    assert "installing" in first and said_after < 1.5, (first, said_after)
    assert out.strip() == "demo ran demo --no-serve"
