"""Whose memory a question is about, from explicit references, names and pronouns (EN/ZH)."""

from __future__ import annotations

import pytest

from adamem.retrieval import Subject, whose_memory

U, A, B, Q = Subject.USER, Subject.ASSISTANT, Subject.BOTH, Subject.AMBIGUOUS
LOCOMO = [("Caroline", "user"), ("Melanie", "other")]
CHAT = [("Sam", "user"), ("Assistant", "assistant")]
ZH = [("小明", "user"), ("助手", "assistant")]

CASES: list[tuple[str, list[tuple[str, str]], Subject, tuple[str, ...], bool]] = [
    # explicit references restrict to one side
    ("What did you say about my diet?", CHAT, A, (), True),
    ("You told me to drink more water, right?", CHAT, A, (), True),
    ("What was your advice on sleep?", CHAT, A, (), True),
    ("I said I liked jazz, didn't I?", CHAT, U, (), True),
    ("Did I mention my sister's name?", CHAT, U, (), True),
    ("你之前说过我应该多运动吗？", ZH, A, (), True),
    ("你说过什么？", ZH, A, (), True),
    ("我说过我喜欢什么？", ZH, U, (), True),
    ("我跟你说过我的生日吗？", ZH, U, (), True),
    # names of known speakers boost those speakers
    ("When did Caroline go to the LGBTQ support group?", LOCOMO, U, ("Caroline",), False),
    ("When did Melanie paint a sunrise?", LOCOMO, A, ("Melanie",), False),
    ("What do Caroline and Melanie have in common?", LOCOMO, B, ("Caroline", "Melanie"), False),
    ("What is Caroline's identity?", LOCOMO, U, ("Caroline",), False),
    ("小明喜欢什么？", ZH, U, ("小明",), False),
    # pronouns
    ("why did I start working out?", CHAT, U, (), False),
    ("Can you remind me when my dentist appointment is?", CHAT, U, (), False),
    ("Do you think I should quit my job?", CHAT, U, (), False),
    ("What do you like?", CHAT, A, (), False),
    ("What did we talk about last week?", CHAT, B, (), False),
    ("我为什么开始健身？", ZH, U, (), False),
    ("你还记得我喜欢吃什么吗？", ZH, U, (), False),
    ("你喜欢什么颜色？", ZH, A, (), False),
    ("我们上次聊了什么？", ZH, B, (), False),
    # nothing to go by
    ("What is the capital of France?", CHAT, Q, (), False),
    ("天气怎么样？", ZH, Q, (), False),
]


@pytest.mark.parametrize(("question", "speakers", "subject", "names", "restrict"), CASES, ids=[c[0] for c in CASES])
def test_whose_memory(
    question: str, speakers: list[tuple[str, str]], subject: Subject, names: tuple[str, ...], restrict: bool
) -> None:
    decision = whose_memory(question, speakers)
    assert (decision.subject, decision.speakers, decision.restrict) == (subject, names, restrict)
    assert decision.reason


def test_names_match_whole_words_only() -> None:
    assert whose_memory("Is Sammy coming?", CHAT).speakers == ()
    assert whose_memory("Is Sam's bike fixed?", CHAT).speakers == ("Sam",)
