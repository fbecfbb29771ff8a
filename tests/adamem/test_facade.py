"""The library's face: ``from adamem import Memory`` and the names ``adamem.__all__`` promises."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import adamem

PUBLIC = [
    "AdaMemError",
    "Answer",
    "AsyncMemory",
    "InputError",
    "InvalidArgument",
    "Memory",
    "NotFound",
    "NotVisible",
    "PersonaTrait",
    "RebuildReport",
    "Remembered",
    "Research",
    "Settings",
    "TimelineEntry",
    "TraitEvidence",
    "UnknownUser",
]


def test_the_public_api_is_pinned_and_every_name_resolves() -> None:
    assert adamem.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(adamem, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'Retriever'"):
        _ = adamem.Retriever  # type: ignore[attr-defined]


def test_importing_the_package_loads_no_store_or_model() -> None:
    code = "import sys, adamem; print(sorted(m for m in ('lancedb', 'numpy', 'adamem.memory') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_three_lines_add_then_query_read_their_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's example, in a folder of its own: the embedded default, no server."""
    monkeypatch.chdir(tmp_path)
    for name in ("ADAMEM_LOG", "ADAMEM_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ADAMEM_HOME", str(tmp_path / "home"))
    from adamem import Memory

    with Memory() as m:
        m.add("alice", "I moved to Lisbon last week for a job at a bakery.")
        m.add("alice", "My sister Ana plays the cello.", occurred_at="2026-03-02T10:00:00Z")
        answer = m.query("alice", "Which city did I move to?")
        assert "Lisbon" in answer.items[0].content
        past = m.search("alice", "Who plays the cello?", as_of="2026-03-01T00:00:00Z")
        assert not any("cello" in item.content for item in past.items)  # not said yet at that time
    assert (tmp_path / "data" / "log").is_dir() and (tmp_path / "data" / "store").is_dir()


def test_async_memory_adds_and_queries(tmp_path: Path) -> None:
    from adamem import AsyncMemory, InvalidArgument, UnknownUser

    async def run() -> None:
        async with AsyncMemory(log=str(tmp_path / "log"), store=str(tmp_path / "store"), tenant="acme") as m:
            done = await m.add("bo", "I am allergic to peanuts.", message_id="m-1")
            again = await m.add("bo", "I am allergic to peanuts.", message_id="m-1")
            assert done.event_ids == again.event_ids  # the same message id is the same event
            answer = await m.query("bo", "What am I allergic to?")
            assert "peanuts" in answer.items[0].content
            assert len([i for i in answer.items if "peanuts" in i.content and i.layer == "working"]) <= 1
            with pytest.raises(UnknownUser):
                await m.query("nobody", "anything")
            with pytest.raises(InvalidArgument, match="as_of"):
                await m.query("bo", "anything", as_of="last tuesday")
            assert m.settings.default_tenant == "acme"

    asyncio.run(run())


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## In three lines", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("ADAMEM_")}
    env["ADAMEM_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Lisbon" in out.stdout


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("Two weeks ago I finished my first 5k run!", "When did I finish my first 5k run?"),
        ("两周前我跑完了第一个五公里。", "我什么时候跑完第一个五公里的？"),
    ],
)
def test_a_when_answer_names_the_day_it_happened_not_only_the_day_it_was_said(
    tmp_path: Path, text: str, question: str
) -> None:
    from adamem import Memory
    from adamem.retrieval.answer import when_text

    with Memory(log=str(tmp_path / "log"), store=str(tmp_path / "store")) as m:
        m.add("lin", text, occurred_at="2024-04-15T21:02:00Z")
        m.add("lin", "I had pasta for lunch.", occurred_at="2024-04-15T21:05:00Z")
        top = m.query("lin", question).items[0]
    assert top.content == text
    assert when_text(top.occurred_at, top.event_time) == "2024-04-15T21:02:00Z (happened 2024-04-01)"
    assert when_text(top.occurred_at, -1) == "2024-04-15T21:02:00Z" and when_text(-1, -1) == "-"
