"""Bilingual tokenisation for full-text (BM25) search: English words and Chinese via jieba.

Deterministic and offline (jieba ships its dictionary inside its package). English is lower-cased,
stripped of stop words and lightly stemmed; Chinese runs are cut for search (overlapping words).
"""

from __future__ import annotations

import functools
import logging
import re

__all__ = ["search_text", "tokenize"]

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[\u3400-\u4dbf\u4e00-\u9fff]+")
_STOP_EN = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i i'm i've if in into is it it's its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves""".split()  # noqa: SIM905
)
_STOP_ZH = frozenset("的 了 是 我 你 他 她 它 们 在 和 就 都 也 很 吗 呢 吧 啊 呀 这 那 个 之 与 及 着 过 么".split())  # noqa: SIM905


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A light, deterministic English stemmer (plural, -ing, -ed); enough for BM25 recall (memoised: pure)."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 4 and word.endswith("ied"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@functools.cache
def _jieba() -> object:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text``, in order; Chinese words may overlap (cut for search)."""
    out: list[str] = []
    for match in _WORD.finditer(text.lower()):
        piece = match.group(0)
        if "\u3400" <= piece[0] <= "\u9fff":
            for word in _jieba().cut_for_search(piece):  # type: ignore[attr-defined]
                if word not in _STOP_ZH:
                    out.append(word)
        elif piece not in _STOP_EN:
            out.append(_stem(piece))
    return out


def search_text(text: str) -> str:
    """Tokens joined by spaces: the column a whitespace full-text index is built on."""
    return " ".join(tokenize(text))
