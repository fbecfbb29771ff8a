"""The ``adamem`` command line on the embedded log: publish, read back, reject bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adamem.cli import main

LINES = [
    {"user_id": "alice", "speaker": "Alice", "text": "I love hiking", "occurred_at": "2024-03-01T09:30:00Z"},
    {"user_id": "bob", "speaker": "Bob", "text": "我喜欢吃辣的", "occurred_at": "2024-03-01T09:31:00Z"},
    {"user_id": "alice", "speaker": "Alice", "text": "I moved to Beijing", "occurred_at": "2024-03-02T09:30:00Z"},
]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def _dump(log: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["log", "dump", "--log", str(log), *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_publish_then_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    assert main(["publish", str(_write(tmp_path / "in.jsonl", LINES)), "--log", str(log)]) == 0
    assert "published 3 message(s) for 2 owner(s)" in capsys.readouterr().out
    rows = _dump(log, capsys)
    assert sorted(r["event"]["text"] for r in rows) == sorted(r["text"] for r in LINES)  # type: ignore[index]
    alice = _dump(log, capsys, "--user", "alice")
    assert [r["event"]["text"] for r in alice] == ["I love hiking", "I moved to Beijing"]  # type: ignore[index]
    assert alice[0]["event"]["occurred_at"] == "2024-03-01T09:30:00Z"  # type: ignore[index]
    later = _dump(log, capsys, "--user", "alice", "--from-offset", "1")
    assert [r["offset"] for r in later] == [2]  # one partition: bob holds offset 1


def test_dump_and_tail_keep_one_tenant_of_a_shared_user_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    rows = [
        {**LINES[0], "tenant": "acme"},
        {**LINES[0], "tenant": "globex", "text": "globex's alice likes chess"},
        {**LINES[2], "tenant": "acme"},
    ]
    assert main(["publish", str(_write(tmp_path / "in.jsonl", rows)), "--log", str(log)]) == 0
    both = _dump(log, capsys, "--user", "alice")
    assert len(both) == 3  # the log's key is the bare user id: both tenants' alice
    acme = _dump(log, capsys, "--user", "alice", "--tenant", "acme")
    assert [r["event"]["text"] for r in acme] == ["I love hiking", "I moved to Beijing"]  # type: ignore[index]
    assert {r["event"]["tenant"] for r in acme} == {"acme"}  # type: ignore[index]
    capsys.readouterr()
    assert main(["log", "tail", "--log", str(log), "--tenant", "globex", "-n", "5"]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert row["event"]["text"] == "globex's alice likes chess"
    assert _dump(log, capsys, "--tenant", "initech") == []


def test_bad_batch_exits_non_zero_and_publishes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    bad = [*LINES, {"user_id": "carol", "speaker": "Carol", "text": "", "occurred_at": "2024-03-01"}]
    assert main(["publish", str(_write(tmp_path / "in.jsonl", bad)), "--log", str(log)]) == 4  # invalid input
    err = capsys.readouterr().err
    assert "in.jsonl:4: 'text' is empty" in err and "nothing was published" in err
    assert not log.exists()  # validated before the log is opened: not even created


def test_publishing_twice_gives_the_same_event_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    src = _write(tmp_path / "in.jsonl", LINES)
    assert main(["publish", str(src), "--log", str(log)]) == 0
    assert main(["publish", str(src), "--log", str(log)]) == 0
    rows = _dump(log, capsys)
    ids = [r["event"]["event_id"] for r in rows]  # type: ignore[index]
    assert len(ids) == 6 and len(set(ids)) == 3  # the log keeps both deliveries; downstream dedupes by id


def test_tail_shows_the_last_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log"
    main(["publish", str(_write(tmp_path / "in.jsonl", LINES)), "--log", str(log)])
    capsys.readouterr()
    assert main(["log", "tail", "--log", str(log), "--user", "alice", "-n", "1"]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert row["event"]["text"] == "I moved to Beijing"


def test_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["publish", str(tmp_path / "nope.jsonl"), "--log", str(tmp_path / "log")]) == 3  # not found
    err = capsys.readouterr().err
    assert "nope.jsonl: no such file" in err and "invalid record" not in err
    assert not (tmp_path / "log").exists()


def test_bad_log_url_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["publish", str(_write(tmp_path / "in.jsonl", LINES)), "--log", "s3://bucket"]) == 2
    assert "is not kafka://host:port" in capsys.readouterr().err


def test_console_script_reads_stdin_and_runs_the_demo(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("adamem")
    env = {**os.environ, "ADAMEM_LOG": str(tmp_path / "log")}
    data = "\n".join(json.dumps(r) for r in LINES).encode()
    out = subprocess.run([str(exe), "publish", "-"], input=data, capture_output=True, env=env, check=True)
    assert b"published 3 message(s)" in out.stdout
    store = str(tmp_path / "store")
    demo = subprocess.run(
        [str(exe), "demo", "--log", str(tmp_path / "demo"), "--store", store, "--no-serve"],
        capture_output=True,
        check=True,
    )
    out = demo.stdout.decode()
    assert "published 29 sample message(s) for 2 owner(s)" in out
    assert "alice (tenant default): 19 message(s) archived" in out
    assert "xiaoming (tenant default): 10 message(s) archived" in out
    assert "likes=spicy food" in out and "stable" in out
    persona = subprocess.run(
        [str(exe), "memory", "alice", "--layer", "persona", "--json", "--store", store], capture_output=True, check=True
    )
    traits = json.loads(persona.stdout)
    assert {(t["key"], t["value"], t["stable"]) for t in traits} >= {("likes", "spicy food", True)}
    missing = subprocess.run([str(exe), "memory", "nobody", "--store", store], capture_output=True)
    assert missing.returncode == 3 and b"no memory for user 'nobody' of tenant 'default'" in missing.stderr
    working = subprocess.run(
        [str(exe), "memory", "xiaoming", "--layer", "working", "--store", store], capture_output=True, check=True
    )
    assert working.stdout.decode().splitlines()[0].endswith("我刚从上海搬到北京，公司在海淀。")


def test_reanalyze_compares_and_views_switch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, store = str(tmp_path / "log"), str(tmp_path / "store")
    main(["publish", str(_write(tmp_path / "in.jsonl", LINES)), "--log", log])
    assert main(["project", "--log", log, "--store", store]) == 0
    capsys.readouterr()
    assert main(["reanalyze", "--log", log, "--store", store]) == 2
    assert "--extractor NAME" in capsys.readouterr().err
    assert main(["reanalyze", "--extractor", "none", "--log", log, "--store", store]) == 0
    out = capsys.readouterr().out
    assert "generation g2 (extractor=none, embedder=e5-pair)" in out and "analysed 3 message(s)" in out
    assert "not switched; queries still read main; switch: adamem views switch g2" in out
    assert "episodic" in out and "working" in out
    assert main(["views", "--store", store, "--log", log]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in listing] == [["g2", "g2"], ["*", "main"]]
    assert main(["views", "switch", "g2", "--store", store, "--log", log]) == 0
    assert "switched" in capsys.readouterr().out
    assert main(["log", "dump", "--log", log, "--topic", "analyses", "--generation", "g2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and {r["event"]["generation"] for r in rows} == {"g2"}  # type: ignore[index]
    assert main(["log", "dump", "--log", log, "--topic", "analyses", "--generation", "second"]) == 2
    assert main(["views", "--store", "memory://"]) == 2
    assert "need a store folder" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["serve", "--help"], ["query", "--help"], ["bench", "latency", "--help"]])
def test_query_side_commands_run_numeric_libraries_one_thread_each(argv: list[str]) -> None:
    from adamem.cli import SERVICE_THREADS

    saved = {name: os.environ.pop(name, None) for name in SERVICE_THREADS}
    try:
        with pytest.raises(SystemExit):
            main(argv)
        assert {name: os.environ.get(name) for name in SERVICE_THREADS} == dict.fromkeys(SERVICE_THREADS, "1")
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def test_other_commands_keep_the_numeric_libraries_threads() -> None:
    from adamem.cli import SERVICE_THREADS

    saved = {name: os.environ.pop(name, None) for name in SERVICE_THREADS}
    try:
        with pytest.raises(SystemExit):
            main(["worker", "--help"])
        assert not any(name in os.environ for name in SERVICE_THREADS)  # ingest embeds batches on every core
    finally:
        for name, value in saved.items():
            if value is not None:
                os.environ[name] = value
