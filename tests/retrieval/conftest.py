"""Memory built with the real write path (rule extractor, the default embedder, projector), and the conversations used.

Test modules reach these through fixtures (``memory``, ``build``, ``motivating``) rather than imports.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from adamem.analysis import Embedder
from adamem.analysis.agent import MemoryAgent
from adamem.analysis.factory import build_embedder
from adamem.analysis.rules import RuleExtractor
from adamem.events import MemoryForgotten
from adamem.ingest import load_messages
from adamem.projections.projector import Projector
from adamem.projections.store import MemoryStore
from adamem.projections.store.factory import open_store
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.factory import open_log
from adamem.streams.log import OutgoingRecord
from adamem.streams.pipeline import run_pipeline
from adamem.streams.publish import publish_messages


def turn(user: str, conv: str, n: int, speaker: str, role: str, text: str, at: str) -> dict[str, Any]:
    """One JSON Lines message."""
    return {
        "user_id": user,
        "conversation_id": conv,
        "message_id": f"{conv}-{n}",
        "speaker": speaker,
        "role": role,
        "text": text,
        "occurred_at": at,
    }


def _script(user: str, me: str, bot: str, sessions: list[tuple[str, list[tuple[str, str]]]]) -> list[dict[str, Any]]:
    out = []
    for day, lines in sessions:
        conv = f"{user}-{day}"
        for n, (who, text) in enumerate(lines, start=1):
            out.append(
                turn(
                    user,
                    conv,
                    n,
                    me if who == "u" else bot,
                    "user" if who == "u" else "assistant",
                    text,
                    f"{day}T20:{n:02d}:00Z",
                )
            )
    return out


CHECKUP_EN = "Got my annual check-up results today: my blood lipids are high."
GYM_EN = "I finally went to the gym yesterday and worked out for an hour."
MOTIVATING_EN = _script(
    "sam",
    "Sam",
    "Assistant",
    [
        (
            "2024-03-04",
            [
                ("u", "Morning! Work is crazy this week, we are shipping a big release on Friday."),
                ("a", "Good luck with the release! Remember to take breaks."),
                ("u", "I made Sichuan noodles for dinner last night, they were great."),
                ("u", "My cat Mochi keeps stealing my chair."),
            ],
        ),
        (
            "2024-03-11",
            [
                ("u", CHECKUP_EN),
                ("a", "I'm sorry to hear that. What did the doctor say?"),
                ("u", "She said it is a warning sign and I should take it seriously."),
                ("u", "Anyway, I'm reading a great sci-fi novel right now."),
            ],
        ),
        (
            "2024-03-18",
            [
                ("u", "My sister Emma is visiting Beijing next month."),
                ("a", "How nice! Any plans together?"),
                ("u", "We'll probably try the new hotpot place near my office."),
            ],
        ),
        (
            "2024-03-25",
            [
                ("u", "I've decided to start working out three times a week, for my health."),
                ("a", "That's a great decision! Do you have a plan?"),
                ("u", "I'll try the gym near my office on weekday evenings."),
            ],
        ),
        (
            "2024-04-08",
            [
                ("u", GYM_EN),
                ("a", "Good for you! How did it feel?"),
                ("u", "Exhausting, but I feel stronger already."),
                ("u", "Also, the release finally went out and my boss was happy."),
            ],
        ),
        (
            "2024-04-15",
            [
                ("u", "Emma loved the hotpot, we went twice."),
                ("a", "Sounds like a fun visit."),
                ("u", "I'm thinking about adopting a second cat."),
            ],
        ),
    ],
)

CHECKUP_ZH = "今天拿到了年度体检报告，血脂偏高。"
GYM_ZH = "我昨天去了健身房，人特别多。"
MOTIVATING_ZH = _script(
    "xiaolin",
    "小林",
    "助手",
    [
        (
            "2024-05-06",
            [
                ("u", "这周工作特别忙，周五要发布新版本。"),
                ("a", "加油！记得休息。"),
                ("u", "昨天晚上我做了川味面条，很好吃。"),
                ("u", "我家的猫总是抢我的椅子。"),
            ],
        ),
        (
            "2024-05-13",
            [
                ("u", CHECKUP_ZH),
                ("a", "听到这个很遗憾。医生怎么说？"),
                ("u", "医生说这是个警告信号，要重视。"),
                ("u", "对了，我最近在看一本很棒的科幻小说。"),
            ],
        ),
        (
            "2024-05-20",
            [
                ("u", "我姐姐下个月要来北京看我。"),
                ("a", "真好！有什么计划吗？"),
                ("u", "我们可能去公司附近新开的火锅店。"),
            ],
        ),
        (
            "2024-05-27",
            [
                ("u", "为了健康，我决定开始健身，每周三次。"),
                ("a", "这个决定很棒！有具体计划吗？"),
                ("u", "我打算工作日晚上去公司附近的健身房。"),
            ],
        ),
        (
            "2024-06-10",
            [
                ("u", GYM_ZH),
                ("a", "真棒！感觉怎么样？"),
                ("u", "很累，但是感觉自己变强壮了。"),
                ("u", "另外新版本终于发布了，老板很满意。"),
            ],
        ),
        (
            "2024-06-17",
            [
                ("u", "姐姐很喜欢那家火锅店，我们去了两次。"),
                ("a", "听起来是一次很愉快的相聚。"),
                ("u", "我在考虑再养一只猫。"),
            ],
        ),
    ],
)


def _session(user: str, me: str, day: str, lines: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        turn(
            user,
            f"{user}-{day}",
            n,
            me if who == "u" else "Assistant",
            "user" if who == "u" else "assistant",
            text,
            f"{day}T09:{n:02d}:00Z",
        )
        for n, (who, text) in enumerate(lines, start=1)
    ]


MOVE_BEFORE = _session(
    "alice",
    "Alice",
    "2024-03-04",
    [
        ("u", "I live in Beijing, close to the Summer Palace."),
        ("a", "Beijing is lovely in spring!"),
        ("u", "I love spicy food, especially Sichuan hotpot."),
    ],
) + _session(
    "alice",
    "Alice",
    "2024-04-01",
    [
        ("u", "Work has been busy, lots of meetings."),
        ("a", "Take care of yourself."),
    ],
)
MOVE = _session(
    "alice",
    "Alice",
    "2024-05-06",
    [
        ("u", "I just moved to Shenzhen for a new job."),
        ("a", "Congratulations on the move!"),
    ],
)
MOVE_AFTER = _session(
    "alice",
    "Alice",
    "2024-05-13",
    [
        ("u", "The weather has been hot lately."),
        ("a", "Stay cool!"),
    ],
)
"""Alice lives in Beijing (March), moves to Shenzhen (6 May); a later session consolidates the move."""

MOTIVATING = {
    "en": ("default:sam", "why did I start working out?", CHECKUP_EN, GYM_EN),
    "zh": ("default:xiaolin", "我为什么开始健身？", CHECKUP_ZH, GYM_ZH),
}
"""Per language: owner, question, the check-up message (the cause), the gym visit (similar, not a cause)."""


class Memory:
    """An embedded log and a store in a folder; ``add`` publishes messages and projects them."""

    def __init__(self, folder: Path, embedder: Embedder, store_url: str | None = None) -> None:
        self.settings = Settings(
            log_url=str(folder / "log"),
            store_url=store_url or str(folder / "store"),
            topic_prefix="rt",
            fsync=False,
            embedded_partitions=2,
        )
        self.store: MemoryStore = open_store(self.settings.store)
        self.agent = MemoryAgent(RuleExtractor(), embedder)
        self.projector = Projector(self.store)

    def add(self, lines: Sequence[dict[str, Any]]) -> None:
        """Publish messages (JSON Lines objects) and run the pipeline until everything is projected."""
        data = "\n".join(json.dumps(m, ensure_ascii=False) for m in lines).encode()
        messages = load_messages(data, self.settings, "test", "jsonl")

        async def run() -> None:
            log = open_log(self.settings.log_url, self.settings)
            await log.start()
            try:
                await publish_messages(log, messages, self.settings)
                await run_pipeline(log, self.projector, self.agent, self.settings)
            finally:
                await log.stop()

        asyncio.run(run())

    def forget(self, user: str, message_id: str, at_ms: int) -> None:
        """Publish a MemoryForgotten of one message of ``user`` on the control topic and project it."""
        event = MemoryForgotten(str(uuid.uuid4()), user, "message", at_ms, target_id=message_id)

        async def run() -> None:
            log = open_log(self.settings.log_url, self.settings)
            await log.start()
            try:
                await log.append(self.settings.topic("control"), [OutgoingRecord(user, encode_event(event))])
                await run_pipeline(log, self.projector, self.agent, self.settings)
            finally:
                await log.stop()

        asyncio.run(run())

    @property
    def partitions(self) -> int:
        """Shard count of the store (the embedded log's partition count)."""
        return self.settings.embedded_partitions


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real default embedder (e5-pair: multilingual e5 beside English e5-small-v2), loaded once."""
    return build_embedder(Settings())


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    """An empty embedded log and LanceDB store in tmp_path."""
    m = Memory(tmp_path, embedder)
    yield m
    m.store.close()


@pytest.fixture
def build(tmp_path: Path, embedder: Embedder) -> Iterator[Callable[[str, str | None], Memory]]:
    """Make more memories in tmp_path: ``build(name, store_url=None)`` (None: LanceDB in tmp_path/name)."""
    made: list[Memory] = []

    def make(name: str, store_url: str | None = None) -> Memory:
        m = Memory(tmp_path / name, embedder, store_url)
        made.append(m)
        return m

    yield make
    for m in made:
        m.store.close()


@pytest.fixture(scope="session")
def motivating(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Memory]:
    """The motivating conversations (English owner ``sam``, Chinese owner ``xiaolin``) in one LanceDB store."""
    memory = Memory(Path(tmp_path_factory.mktemp("motivating")), embedder)
    memory.add(MOTIVATING_EN + MOTIVATING_ZH)
    yield memory
    memory.store.close()


@pytest.fixture(params=sorted(MOTIVATING))
def case(request: pytest.FixtureRequest) -> tuple[str, str, str, str]:
    """(owner, question, check-up text, gym-visit text) per language."""
    return MOTIVATING[request.param]


@pytest.fixture
def moving() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Alice's move from Beijing to Shenzhen: (before, the move, a later session)."""
    return MOVE_BEFORE, MOVE, MOVE_AFTER


@pytest.fixture(scope="session")
def memory_class() -> type[Memory]:
    """The ``Memory`` helper class, for module-scoped fixtures of test modules."""
    return Memory


@pytest.fixture(scope="session")
def motivating_conversations() -> Callable[[], list[dict[str, Any]]]:
    """Both motivating conversations as JSON Lines objects."""
    return lambda: MOTIVATING_EN + MOTIVATING_ZH
