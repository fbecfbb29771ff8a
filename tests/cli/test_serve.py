"""``adamem serve`` as a user starts it: what goes to stdout and what to stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from adamem.bench.common import wait_healthy
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
