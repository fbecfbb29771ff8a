"""Search tokens: memoised per piece of text, exactly the tokens of cutting every piece afresh."""

from __future__ import annotations

import json
from importlib import resources

from adamem import text
from adamem.text import search_text, tokenize


def reference(value: str) -> list[str]:
    """Tokenisation as written before pieces were memoised (phrases made one token first)."""
    out: list[str] = []
    lower = value.lower()
    for pattern, token in text._PHRASE_RES:
        lower = pattern.sub(token, lower)
    for match in text._WORD.finditer(lower):
        piece = match.group(0)
        if "\u3400" <= piece[0] <= "\u9fff":
            out.extend(w for w in text._jieba().cut_for_search(piece) if w not in text._STOP_ZH)  # type: ignore[attr-defined]
        elif piece not in text._STOP_EN:
            out.append(text._stem(piece))
    return out


def samples() -> list[str]:
    lines = resources.files("adamem.samples").joinpath("sample_conversation.jsonl").read_text(encoding="utf-8")
    out = [json.loads(line)["text"] for line in lines.splitlines() if line.strip()]
    out += [
        "I'm running; he's tired. THE dogs' bones, the studies studied, hopping & hoped",
        "我喜欢吃辣的川菜，周末去健身房锻炼。体检报告显示我血脂偏高",
        "体检报告显示我血脂偏高" * 6,  # a Chinese run longer than the memoised pieces
        "supercalifragilisticexpialidocious-antidisestablishmentarianism " * 2,
        "",
        "   ",
        "x",
    ]
    return out


def test_memoised_tokens_are_the_tokens_of_each_piece() -> None:
    for _ in range(2):  # cold, then from the memo
        for value in samples():
            assert tokenize(value) == reference(value), value
            assert search_text(value) == " ".join(reference(value))


def test_phrasal_verbs_and_unstemmed_words_make_no_false_friends() -> None:
    assert tokenize("How have I been working out?") == ["workout"]
    assert tokenize("I worked out at the gym") == ["workout", "gym"]
    assert "work" not in tokenize("my workouts")
    assert tokenize("Working late at work") == ["work", "late", "work"]  # the job keeps its stem
    assert tokenize("this evening's news") == ["evening", "news"]  # not "even", not "new"
    assert tokenize("my annual check-up") == ["annual", "checkup"] == tokenize("my annual checkup")
