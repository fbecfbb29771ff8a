"""What a new user met in issue 15, each a command that now says what is wrong (and one exit code per kind)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from adamem.cli import main
from adamem.cli.errors import EXIT_CODES, OUTPUT_CLOSED
from adamem.cli.main import EXAMPLES, README_POINTER, build_parser
from tests.bench.test_cli import BENCHMARKS

REPO = Path(__file__).resolve().parents[2]
EXE = Path(sys.executable).with_name("adamem")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The bundled sample conversation, published and projected: (log, store)."""
    root = tmp_path_factory.mktemp("sample")
    sample = resources.files("adamem.samples").joinpath("sample_conversation.jsonl")
    (root / "sample.jsonl").write_bytes(sample.read_bytes())
    log, store = root / "log", root / "store"
    assert main(["publish", str(root / "sample.jsonl"), "--log", str(log)]) == 0
    assert main(["project", "--log", str(log), "--store", str(store), "--quiet"]) == 0
    return log, store


@pytest.fixture(autouse=True)
def _no_default_places(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("ADAMEM_LOG", "ADAMEM_STORE"):
        monkeypatch.delenv(name, raising=False)
    yield


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_log_dump_into_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    """``adamem log dump | head -3``: three lines, no BrokenPipeError traceback, the shell's SIGPIPE status."""
    rows = [
        {"user_id": "alice", "speaker": "Alice", "text": f"message number {i} " + "x" * 400, "occurred_at": i * 1000}
        for i in range(600)
    ]  # far more than a pipe buffers, so the writer is still writing when head exits
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    log = tmp_path / "log"
    subprocess.run([str(EXE), "publish", str(tmp_path / "in.jsonl"), "--log", str(log), "--quiet"], check=True)
    script = f'"{EXE}" log dump --log "{log}" | head -3; echo "status ${{PIPESTATUS[0]}}" >&2'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    assert len(done.stdout.splitlines()) == 3
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert f"status {OUTPUT_CLOSED}" in done.stderr


@pytest.mark.parametrize("question", ["", "   "])
def test_an_empty_question_is_refused(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str], question: str
) -> None:
    code, out, err = _run(capsys, "query", "alice", question, "--store", str(built[1]))
    assert code == 2 and out == "" and "the question is empty" in err


MISSING_LOG = [
    ["log", "dump"],
    ["log", "tail"],
    ["log", "check"],
    ["project"],
    ["replay"],
    ["reanalyze", "--extractor", "none"],
    ["forget", "alice", "--all"],
    ["provenance", "alice", "some-item"],
]
MISSING_STORE = [
    ["memory", "alice"],
    ["query", "alice", "What food do I like?"],
    ["views"],
    ["serve", "--port", "1"],
]


@pytest.mark.parametrize("argv", MISSING_LOG, ids=lambda a: " ".join(a[:2]))
def test_a_missing_log_is_named_and_not_created(
    built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    typo = tmp_path / "typo-log"
    code, _, err = _run(capsys, *argv, "--log", str(typo), "--store", str(built[1]))
    assert code == 3 and f"no embedded log at {typo}" in err, err
    assert not typo.exists()


@pytest.mark.parametrize("argv", MISSING_STORE, ids=lambda a: a[0])
def test_a_missing_store_is_named_not_taken_for_an_unknown_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    typo = tmp_path / "typo-store"
    code, _, err = _run(capsys, *argv, "--store", str(typo))
    assert code == 3 and f"no store at {typo}" in err and "no memory for user" not in err, err
    assert not typo.exists()


def test_an_unknown_owner_exits_3_in_every_command(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", str(built[1])]
    for argv in (["query", "nobody", "What food do I like?", *store], ["memory", "nobody", *store]):
        code, _, err = _run(capsys, *argv)
        assert code == 3 and "no memory for user 'nobody' of tenant 'default'" in err, argv


def _control(log: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, out, _ = _run(capsys, "log", "dump", "--topic", "control", "--log", str(log))
    assert code == 0
    return out.splitlines()


def test_forget_refuses_a_message_id_the_owner_does_not_have(
    built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    log = tmp_path / "log"
    shutil.copytree(built[0], log)
    code, _, err = _run(capsys, "forget", "alice", "--message", "not-a-real-id", "--log", str(log))
    assert code == 3 and "'not-a-real-id'" in err and "user 'alice' of tenant 'default'" in err, err
    code, _, err = _run(capsys, "forget", "nobody", "--all", "--log", str(log))
    assert code == 3 and "user 'nobody' of tenant 'default' has no messages" in err, err
    code, _, err = _run(capsys, "forget", "alice", "--message", "s1-1", "--log", str(log))  # a message_id
    assert code == 3 and "--message takes its event id" in err, err
    assert _control(log, capsys) == []  # nothing was published
    code, out, _ = _run(capsys, "log", "dump", "--log", str(log), "--user", "alice")
    first = json.loads(out.splitlines()[0])["event"]
    assert first["message_id"] == "s1-1"
    code, out, _ = _run(capsys, "forget", "alice", "--message", first["event_id"], "--log", str(log))
    assert code == 0 and "published MemoryForgotten(message)" in out
    assert len(_control(log, capsys)) == 1


def test_the_text_answer_names_whose_memory(built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "query", "alice", "Why did I start working out?", "--store", str(built[1]))
    (line,) = [x for x in out.splitlines() if x.startswith("route:")]
    whose = line.partition("whose:")[2].strip()
    assert code == 0 and whose.startswith("the user's own memory") and "first person" in whose, line


@pytest.mark.parametrize(
    ("user", "question"), [("alice", "What food do I like?"), ("alice", "Why do I read every label?")]
)
def test_a_rank_out_of_score_order_shows_the_rule_that_moved_it(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str], user: str, question: str
) -> None:
    """Scores fall within a run of items no rule moved; where a later item scores higher, a rule is named.

    Fifteen items: on a fresh install the "why" question's first ten are all before the event asked
    about, and the rule's items ("later than the event asked about") start at the eleventh."""
    code, out, _ = _run(capsys, "query", user, question, "--store", str(built[1]), "--json", "--top-k", "15")
    items = json.loads(out)["items"]
    turns = [k for k in range(1, len(items)) if items[k]["score"] > items[k - 1]["score"]]
    assert code == 0 and turns, "this question is chosen because its ranking is not in score order"
    for k in range(1, len(items)):
        if items[k]["ordered_by"] == items[k - 1]["ordered_by"]:
            assert items[k]["score"] <= items[k - 1]["score"], (k, items[k - 1], items[k])
    code, text, _ = _run(capsys, "query", user, question, "--store", str(built[1]), "--top-k", "15")
    lines = [x for x in text.splitlines() if re.match(r"\s*\d+\. ", x)]
    assert len(lines) == len(items)
    for item, line in zip(items, lines, strict=True):
        assert ("[moved: " in line) == bool(item["ordered_by"]), line
        if item["ordered_by"]:
            assert item["ordered_by"] in line


def test_help_has_examples_the_exit_codes_and_the_documentation() -> None:
    helped = subprocess.run([str(EXE), "--help"], capture_output=True, text=True, check=True).stdout
    assert "examples:" in helped and README_POINTER in helped and "docs/index.md" in helped
    assert (REPO / "docs" / "index.md").is_file()
    guide = (REPO / "docs" / "guides" / "command-line.md").read_text(encoding="utf-8")
    for code, meaning in EXIT_CODES:
        assert re.search(rf"^\s+{code}\s+{re.escape(meaning[:30])}", helped, re.M), code
        assert re.search(rf"^\| {code} \|", guide, re.M), f"the command-line guide's exit-code table lacks {code}"


def _commands() -> list[str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return sorted(set(sub.choices) - {"bench"})  # type: ignore[arg-type]


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_an_example_in_its_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert command in EXAMPLES and re.search(rf"^examples?:\n\s+adamem {command}\b", out, re.M), out[-600:]


@pytest.mark.parametrize("command", BENCHMARKS)
def test_every_benchmark_has_an_example_in_its_help(command: str) -> None:
    env = {**os.environ}
    done = subprocess.run([str(EXE), "bench", command, "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and re.search(rf"^examples?:\n\s+adamem bench {command}\b", done.stdout, re.M)
