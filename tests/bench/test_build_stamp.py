"""The stamp a benchmark leaves beside a store it built: the code that made the store's rows."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

import adamem
from adamem.analysis.agent import MemoryAgent
from adamem.analysis.rules import RuleExtractor
from adamem.ingest import load_messages
from adamem.settings import Settings
from bench import build
from tests.conftest import FlatEmbedder


def test_a_store_stamped_by_this_code_is_the_same_code(tmp_path: Path) -> None:
    build.stamp_build(tmp_path)
    stamp = build.built_by(tmp_path)
    assert stamp["same_code"] is True
    assert stamp["code"] == build.build_code()
    assert "commit" in stamp["git"]


def test_a_store_without_a_stamp_is_of_unknown_code(tmp_path: Path) -> None:
    assert build.built_by(tmp_path) == {"same_code": None}


def test_a_store_stamped_by_other_code_is_not_the_same_code(tmp_path: Path) -> None:
    build.stamp_build(tmp_path)
    stamp = json.loads((tmp_path / build.STAMP).read_text())
    (tmp_path / build.STAMP).write_text(json.dumps({**stamp, "code": "0" * 16}))
    assert build.built_by(tmp_path)["same_code"] is False


def _package_copy(tmp_path: Path) -> Path:
    source = Path(adamem.__file__).resolve().parent
    copy = tmp_path / "adamem"
    for path in source.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".avsc", ".toml", ".jsonl"}:
            target = copy / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return copy


@pytest.mark.parametrize(
    ("changed", "same"),
    [
        ("projections/folds/apply.py", False),  # the folds make the rows
        ("analysis/rules.py", False),  # so does the extractor
        ("retrieval/base.py", True),  # the query side reads them
        ("api/app.py", True),
    ],
)
def test_the_fingerprint_follows_the_code_that_makes_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: str, same: bool
) -> None:
    copy = _package_copy(tmp_path)
    monkeypatch.setattr(build.adamem, "__file__", str(copy / "__init__.py"))
    before = build.build_code()
    target = copy / changed
    assert target.is_file(), changed
    target.write_text(target.read_text() + "\n# changed\n")
    assert (build.build_code() == before) is same


def test_a_build_stamps_the_folder_of_its_store(tmp_path: Path) -> None:
    settings = Settings.from_env(log_url=str(tmp_path / "log"), store_url=f"lancedb://{tmp_path / 'store'}")
    data = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_bytes()
    messages = load_messages(data, settings, "sample_conversation.jsonl", "jsonl")
    build.build_memory(messages, settings, MemoryAgent(RuleExtractor(), FlatEmbedder()))  # type: ignore[arg-type]
    assert build.built_by(tmp_path)["same_code"] is True
