"""An answer says when its question is in neither English nor Chinese (memory is analysed in those two)."""

from __future__ import annotations

import pytest

from adamem.analysis import Embedder
from adamem.retrieval import Retriever
from adamem.retrieval.language import NOTICE, language_notice
from tests.retrieval.conftest import Memory, turn

READ = [
    "Where does Alice live?",
    "Why did I start working out?",
    "What is my café order?",  # a borrowed word
    "Zoë birthday party date",  # keywords, and a name with a diaeresis
    "Caroline LGBTQ support group date?",
    "小明住在哪里？",
    "我为什么开始健身？",
    "Alice 在哪里工作？",
]
OTHER = [
    "Где я живу сейчас?",  # Russian
    "どこに住んでいますか",  # Japanese
    "내가 어디에 살아요?",  # Korean
    "أين أعيش الآن؟",  # Arabic
    "Où habite-t-elle à présent ?",  # French
    "Qué comió José ayer?",  # Spanish
]


@pytest.mark.parametrize("question", READ)
def test_english_and_chinese_questions_get_no_notice(question: str) -> None:
    assert language_notice(question) is None


@pytest.mark.parametrize("question", OTHER)
def test_a_question_in_another_language_gets_the_notice(question: str) -> None:
    assert language_notice(question) == NOTICE


def test_the_answer_carries_the_notice(memory: Memory, embedder: Embedder) -> None:
    memory.add([turn("ana", "c1", 0, "Ana", "user", "I moved to Lisbon last month.", "2024-06-10T09:00:00Z")])
    retriever = Retriever(memory.store, embedder, partitions=memory.partitions)
    other = retriever.query("default:ana", "Où habite-t-elle à présent ?").to_dict()
    assert other["notices"] == [NOTICE] and other["items"]  # still answered, by meaning
    assert retriever.query("default:ana", "Where does Ana live?").to_dict()["notices"] == []
