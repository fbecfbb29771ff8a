"""``adamem add`` run again: a message with its own id is kept once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from adamem.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_add_with_a_message_id_twice_keeps_the_message_once(
    sample_built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(sample_built[0].parent, root)
    folder = ["--log", str(root / "log"), "--store", str(root / "store")]
    added = []
    for _ in range(2):
        code, out, err = _run(
            capsys, "add", "alice", "I adopted a cat named Miso.", "--message-id", "miso", "--json", *folder
        )
        assert code == 0, err
        added.append(json.loads(out)["event_id"])
    assert added[0] == added[1]
    code, out, _ = _run(capsys, "memory", "alice", "--layer", "archive", "--json", "--store", str(root / "store"))
    assert [row["text"] for row in json.loads(out)].count("I adopted a cat named Miso.") == 1
