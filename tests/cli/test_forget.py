"""``adamem forget`` says what it did and what is left to do: the command it prints makes the store forget."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from adamem.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_forget_names_the_command_after_which_the_store_forgets(
    sample_built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(sample_built[0].parent, root)  # the log, its keystore beside it, the store
    log, store = root / "log", root / "store"
    code, out, _ = _run(capsys, "log", "dump", "--log", str(log), "--user", "alice")
    first = json.loads(out.splitlines()[0])["event"]
    archive = ["memory", "alice", "--layer", "archive", "--json", "--store", str(store)]

    def texts() -> list[str]:
        code, out, err = _run(capsys, *archive)
        assert code == 0, err
        return [row["text"] for row in json.loads(out)]

    assert first["text"] in texts()
    code, out, err = _run(
        capsys, "forget", "alice", "--message", first["event_id"], "--log", str(log), "--store", str(store)
    )
    assert code == 0, err
    assert first["text"] in texts()  # the key is gone, the store is not projected yet: and the output says so
    said = re.search(r"the store answers as before until this event is projected: run `(adamem project [^`]+)`", out)
    assert said, out
    argv = shlex.split(said.group(1))
    assert argv[:2] == ["adamem", "project"] and str(log) in argv and str(store) in argv
    code, _, err = _run(capsys, *argv[1:], "--quiet")
    assert code == 0, err
    assert first["text"] not in texts()
