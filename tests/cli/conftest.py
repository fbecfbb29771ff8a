"""What the command-line tests share: the bundled sample, published and projected by the commands themselves."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from adamem.cli import main


@pytest.fixture(scope="session")
def sample_built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``adamem publish`` the sample conversation, then ``adamem project`` it: (log, store). Read it, never write."""
    root = tmp_path_factory.mktemp("sample-built")
    sample = resources.files("adamem.samples").joinpath("sample_conversation.jsonl")
    (root / "sample.jsonl").write_bytes(sample.read_bytes())
    assert main(["publish", str(root / "sample.jsonl"), "--log", str(root / "log"), "--quiet"]) == 0
    assert main(["project", "--log", str(root / "log"), "--store", str(root / "store"), "--quiet"]) == 0
    return root / "log", root / "store"
