"""Search tokens: memoised per piece of text, exactly the tokens of cutting every piece afresh."""

from __future__ import annotations

import json
from importlib import resources

from adamem import text
from adamem.text import search_text, tokenize


def reference(value: str) -> list[str]:
    """Tokenisation as written before pieces were memoised."""
    out: list[str] = []
    for match in text._WORD.finditer(value.lower()):
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
