"""``adamem worker`` prints one status line (partitions, lag, ev/s); Faust's own output goes to a log file."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

from adamem.cli.worker_status import worker_line
from adamem.settings import Settings

EXE = Path(sys.executable).with_name("adamem")


def test_the_status_line_names_partitions_lag_and_rate() -> None:
    line = worker_line("g1", [0, 2], 3, 12, 3, 40, 37, 8.25)
    assert line == (
        "worker g1: partitions 0,2 of 3 | lag 12 to analyse, 3 to fold | 8.2 ev/s (analysed 40, folded 37 since start)"
    )
    assert "none yet" in worker_line("g2", [], 3, None, None, 0, 0, 0.0)
    assert "lag unknown" in worker_line("g2", [], 3, None, None, 0, 0, 0.0)


@pytest.mark.kafka
def test_the_worker_prints_status_lines_and_keeps_faust_in_its_log(
    settings: Settings, kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "ADAMEM_LOG": f"kafka://{kafka_bootstrap}",
        "ADAMEM_TOPIC_PREFIX": settings.topic_prefix,
        "ADAMEM_PARTITIONS": str(settings.partitions),
        "ADAMEM_PROGRESS_SECONDS": "1",
        "ADAMEM_WORKER_SESSION_TIMEOUT": "6",
    }
    sample = tmp_path / "sample.jsonl"
    sample.write_bytes(resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes())
    published = subprocess.run([str(EXE), "publish", str(sample)], env=env, capture_output=True, text=True, timeout=120)
    assert published.returncode == 0, published.stderr
    store = tmp_path / "store"
    err_path = tmp_path / "stderr.txt"
    with err_path.open("wb") as err, (tmp_path / "stdout.txt").open("wb") as out:
        proc = subprocess.Popen(
            [str(EXE), "worker", "--store", str(store), "--worker-log", "faust.log"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    caught_up = re.compile(
        r"^worker g1: partitions 0,1,2 of 3 \| lag 0 to analyse, 0 to fold \| .* \(analysed 29, folded 29", re.M
    )
    try:
        deadline = time.monotonic() + 240
        while not caught_up.search(err_path.read_text()) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    shown = err_path.read_text()
    assert caught_up.search(shown), shown[-3000:]
    assert re.search(r"^worker g1: .* \| [1-9][0-9.]* ev/s", shown, re.M), shown[-3000:]  # the rate while working
    assert "faust.log" in shown.splitlines()[0]  # where Faust's output went is said first
    others = [x for x in shown.splitlines() if not x.startswith("worker")]
    assert others == [], others[:20]  # no Faust banner, table or log line on the terminal
    assert (tmp_path / "stdout.txt").read_text() == ""
    assert "[^Worker]" in (tmp_path / "faust.log").read_text()  # ... they are in the log file
