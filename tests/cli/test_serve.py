"""``adamem serve`` as a user starts it: what goes to stdout and what to stderr; adding beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from adamem.cli import main
from adamem.cli.remote import ServiceNotice
from bench.common import wait_healthy
from tests.api.conftest import free_port
from tests.conftest import stop_process

EXE = Path(sys.executable).with_name("adamem")


def test_the_access_log_goes_to_stderr_and_stdout_stays_empty(sample_built: tuple[Path, Path], tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADAMEM_") or k == "ADAMEM_HOME"}
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [str(EXE), "serve", "--read-only", "--store", str(sample_built[1]), "--port", str(port)],
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, process, 120, err)
        assert httpx.get(f"{base}/v1/users/alice/memory", timeout=30).status_code == 200
    finally:
        stop_process(process)
    assert out.read_text() == "", out.read_text()
    assert '"GET /v1/users/alice/memory?' in err.read_text() or '"GET /v1/users/alice/memory HTTP' in err.read_text()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ADAMEM_") or k == "ADAMEM_HOME"}


def test_add_on_a_folder_a_serve_writes_goes_through_that_serve_and_project_is_refused(
    sample_built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Quickstart's `adamem serve`, then `adamem add alice ...` on the same folder: added, not refused."""
    for name in ("ADAMEM_LOG", "ADAMEM_STORE", "ADAMEM_API_KEY", "ADAMEM_API_KEYS"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "copy"
    shutil.copytree(sample_built[0].parent, root)
    log, store = root / "log", root / "store"
    port = free_port()
    folder = ["--log", str(log), "--store", str(store)]
    err = tmp_path / "serve.err"
    with err.open("wb") as stderr:
        process = subprocess.Popen(
            [str(EXE), "serve", *folder, "--port", str(port)],
            env=_clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, process, 120, err)
        assert json.loads((log / ServiceNotice.NAME).read_text())["url"] == base
        capsys.readouterr()
        assert main(["project", *folder, "--quiet"]) == 5  # nothing pending, and still: the serve projects here
        said = capsys.readouterr().err
        assert "another process is writing to the log" in said and f"the adamem serve at {base}" in said, said
        code = main(["add", "alice", "I adopted a cat named Miso.", *folder])
        out, said = capsys.readouterr()
        assert code == 0 and "in memory after" in out, said
        assert f"adding through it at {base}" in said
        code = main(["query", "alice", "What is my cat called?", "--url", base, "--json"])
        assert code == 0 and "Miso" in capsys.readouterr().out
        assert httpx.get(f"{base}/health", timeout=30).json()["status"] == "ok"  # its write path was not fenced
    finally:
        stop_process(process)
    assert not (log / ServiceNotice.NAME).exists(), process.returncode  # gone with the service


def test_a_notice_left_by_a_crashed_serve_is_not_followed(
    sample_built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ADAMEM_LOG", "ADAMEM_STORE"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "copy"
    shutil.copytree(sample_built[0].parent, root)
    gone = f"http://127.0.0.1:{free_port()}"
    (root / "log" / ServiceNotice.NAME).write_text(json.dumps({"url": gone, "pid": 1}))
    capsys.readouterr()
    folder = ["--log", str(root / "log"), "--store", str(root / "store")]
    code = main(["add", "alice", "I adopted a cat named Miso.", *folder])
    out, said = capsys.readouterr()
    assert code == 0 and "in memory after" in out and gone not in said, said  # in-process: nobody holds the lock
