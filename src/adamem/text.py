"""Bilingual tokenisation for full-text (BM25) search: English words and Chinese via jieba.

Deterministic and offline (jieba ships its dictionary inside its package, the stemmer is code). English is
lower-cased, stripped of stop words and stemmed by Snowball's English stemmer (Porter2: ``adoption``,
``adopted`` and ``adopting`` are one word, ``painting`` is ``paint``); Chinese runs are cut for search
(overlapping words).

Phrasal verbs whose meaning is not their verb's are one token first, so the stemmer cannot make them a
false friend ("working out" → ``workout``, never ``work``; ``PHRASES_EN``).
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import threading
from collections.abc import Iterator

from snowballstemmer.english_stemmer import EnglishStemmer  # type: ignore[import-untyped]

__all__ = ["PHRASES_EN", "is_stop_word_en", "memo_search_text", "search_text", "tokenize"]

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


def is_stop_word_en(word: str) -> bool:
    """Whether a lower-case word is one of the English stop words full-text search leaves out."""
    return word in _STOP_EN


_STOP_ZH = frozenset("的 了 是 我 你 他 她 它 们 在 和 就 都 也 很 吗 呢 吧 啊 呀 这 那 个 之 与 及 着 过 么".split())  # noqa: SIM905


PHRASES_EN: tuple[tuple[str, str], ...] = (
    (r"work(?:s|ed|ing)?\s+out", "workout"),
    (r"work\s*outs", "workout"),
    (r"check\s*-?\s*ups?", "checkup"),
)
"""English phrases that are one search token, matched on lower-cased text before it is cut into words."""
_PHRASE_RES = tuple((re.compile(rf"\b(?:{p})\b"), t) for p, t in PHRASES_EN)

_stemmers = threading.local()  # a Snowball stemmer keeps its word in its own fields: one per thread


def _stem(word: str) -> str:
    """Snowball's English stem of a lower-cased word (possessive ``'s`` dropped first)."""
    if word.endswith("'s"):
        word = word[:-2]
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = EnglishStemmer()
    return str(stemmer.stemWord(word))


@functools.cache
def _jieba() -> object:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


_MEMO_PIECE_CHARS = 32


def _cut(piece: str) -> tuple[str, ...]:
    """Tokens of one piece of lower-cased text: an English word, or a run of Chinese characters."""
    if "\u3400" <= piece[0] <= "\u9fff":
        return tuple(w for w in _jieba().cut_for_search(piece) if w not in _STOP_ZH)  # type: ignore[attr-defined]
    return () if piece in _STOP_EN else (_stem(piece),)


_cut_memo = functools.lru_cache(maxsize=1 << 16)(_cut)


def _pieces(text: str) -> Iterator[tuple[str, ...]]:
    """Tokens of each piece of ``text``, in order (short pieces memoised: their tokens depend on them alone)."""
    lower = text.lower()
    if "work" in lower or "up" in lower:  # the phrases' shared parts: most texts skip the substitutions
        for pattern, token in _PHRASE_RES:
            lower = pattern.sub(token, lower)
    for piece in _WORD.findall(lower):
        yield _cut_memo(piece) if len(piece) <= _MEMO_PIECE_CHARS else _cut(piece)


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text``, in order; Chinese words may overlap (cut for search)."""
    return list(itertools.chain.from_iterable(_pieces(text)))


def search_text(text: str) -> str:
    """Tokens joined by spaces: the column a whitespace full-text index is built on."""
    return " ".join(itertools.chain.from_iterable(_pieces(text)))


_MEMO_TEXT_CHARS = 2_000


@functools.lru_cache(maxsize=1 << 14)
def _memo_search_text(text: str) -> str:
    return search_text(text)


def memo_search_text(text: str) -> str:
    """``search_text``, memoised for texts of up to 2,000 characters: a message's text is cut when its row is written,
    again whenever the row is (consolidated, evicted), and as the words before the owner's next message."""
    return _memo_search_text(text) if len(text) <= _MEMO_TEXT_CHARS else search_text(text)
