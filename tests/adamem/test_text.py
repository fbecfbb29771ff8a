"""Search tokens: memoised per piece of text, exactly the tokens of cutting every piece afresh."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
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


def test_phrasal_verbs_and_word_endings_make_no_false_friends() -> None:
    assert tokenize("How have I been working out?") == ["workout"]
    assert tokenize("I worked out at the gym") == ["workout", "gym"]
    assert "work" not in tokenize("my workouts")
    assert tokenize("Working late at work") == ["work", "late", "work"]  # the job keeps its stem
    assert tokenize("this evening's news") == ["evening", "news"]  # not "even", not "new"
    assert tokenize("my annual check-up") == ["annual", "checkup"] == tokenize("my annual checkup")


def test_a_word_and_its_derived_forms_are_one_token() -> None:
    """Snowball's English stemmer joins derivations the question and the message may use apart."""
    assert tokenize("the adoption agency") == tokenize("agencies for adopting")[::-1] == ["adopt", "agenc"]
    assert tokenize("She adopted a dog") == ["adopt", "dog"]
    assert tokenize("painting, painted, paints") == ["paint"] * 3
    assert tokenize("volunteering as a volunteer") == ["volunt", "volunt"]
    assert tokenize("Caroline's happiness") == ["carolin", "happi"] == tokenize("caroline happy")


def test_stems_are_the_same_from_many_threads() -> None:
    """One stemmer per thread: threads cutting at once get the stems one thread gets."""
    words = [w for value in samples() for w in value.lower().split()] * 20
    alone = [text._stem(w) for w in words]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(text._stem, words, chunksize=7)) == alone

    together = threading.Barrier(4)

    def stemmer_of_thread(_: int) -> int:
        assert text._stem("running") == "run"
        together.wait(timeout=30)  # four threads, each alive while the others look
        return id(text._stemmers.english)

    with ThreadPoolExecutor(4) as pool:
        assert len(set(pool.map(stemmer_of_thread, range(4)))) == 4
