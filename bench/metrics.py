"""The arithmetic of the benchmarks, kept pure so the tests can check it on hand-made cases.

- ``parse_evidence``: LoCoMo evidence ids that survive malformed input ("D8:6; D9:17" is two ids,
  "D" is none, ids that point to no turn are dropped);
- ``flatten``: ranked items' provenance → distinct message ids in rank order;
- ``recall_at``: share of the gold ids among the first k ranked ids;
- ``reciprocal_rank`` / ``ndcg_at``: 1 / rank of the first gold id within k, and binary-relevance
  nDCG@k (ideal: every gold id first);
- ``answer_tokens`` / ``coverage``: the LLM-free proxy "are the answer's words in the retrieved text";
- ``percentile``: linear interpolation between closest ranks (numpy's default method).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "CATEGORIES",
    "STOP_WORDS",
    "answer_tokens",
    "coverage",
    "flatten",
    "mean",
    "ndcg_at",
    "parse_evidence",
    "percentile",
    "recall_at",
    "reciprocal_rank",
    "summary_ms",
    "words",
]

CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo's official category numbers."""

_SPLIT = re.compile(r"[;,\s]+")
_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS: frozenset[str] = frozenset(
    """a an the and or but if of at by for with about against between into through during before after above
    below to from up down in out on off over under again further then once here there all any both each few
    more most other some such no nor not only own same so than too very s t can will just don should now is
    are was were be been being have has had having do does did doing i me my myself we our ours ourselves you
    your yours yourself yourselves he him his himself she her hers herself it its itself they them their
    theirs themselves what which who whom this that these those am as until while""".split()  # noqa: SIM905
)
"""English stop words dropped from answers before coverage is counted."""


def parse_evidence(raw: Any, turns: Iterable[str] | None = None) -> list[str]:
    """Distinct evidence ids of one question, in order; malformed parts and ids naming no turn are dropped.

    ``raw`` is the question's ``evidence`` value: a list of ids, or one string, or None. An entry may
    hold several ids (``"D8:6; D9:17"``). With ``turns`` (the conversation's ``dia_id``s) only ids of
    real turns are kept; without it, only ids shaped like ``D<session>:<turn>``.
    """
    known = set(turns) if turns is not None else None
    entries = raw if isinstance(raw, list | tuple) else ([] if raw is None else [raw])
    out: list[str] = []
    for entry in entries:
        for part in _SPLIT.split(str(entry)):
            part = part.strip()
            if not part or part in out:
                continue
            if known is not None and part not in known:
                continue
            if known is None and not re.fullmatch(r"D\d+:\d+", part):
                continue
            out.append(part)
    return out


def flatten(ranked: Iterable[Sequence[str]]) -> list[str]:
    """Distinct message ids of ranked items, in rank order; each item contributes its provenance in order."""
    seen: dict[str, None] = {}
    for ids in ranked:
        for mid in ids:
            seen.setdefault(mid, None)
    return list(seen)


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the distinct gold ids among the first ``k`` distinct ranked ids (0 ≤ recall ≤ 1)."""
    want = set(gold)
    if not want:
        raise ValueError("recall of a question without evidence is undefined; skip the question")
    top = flatten([ranked])[:k]
    return len(want.intersection(top)) / len(want)


def reciprocal_rank(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """1 / (rank of the first gold id among the first ``k`` distinct ranked ids), 0 when none is there."""
    want = set(gold)
    if not want:
        raise ValueError("the reciprocal rank of a question without evidence is undefined; skip the question")
    for rank, mid in enumerate(flatten([ranked])[:k], start=1):
        if mid in want:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Binary-relevance nDCG@k: DCG of the first ``k`` distinct ids over the DCG of every gold id ranked first."""
    want = set(gold)
    if not want:
        raise ValueError("nDCG of a question without evidence is undefined; skip the question")
    dcg = sum(1.0 / math.log2(rank + 1) for rank, mid in enumerate(flatten([ranked])[:k], start=1) if mid in want)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(want), k) + 1))
    return dcg / ideal


def words(text: str) -> list[str]:
    """Lower-case words (letters and digits) of a text."""
    return _WORD.findall(text.lower())


def answer_tokens(answer: Any) -> set[str]:
    """Content words of a gold answer (answers may be ints); stop words dropped."""
    if answer is None or isinstance(answer, bool):
        return set()
    return {w for w in words(str(answer)) if w not in STOP_WORDS}


def coverage(answer: Any, retrieved: Iterable[str]) -> float | None:
    """Share of the answer's content words found among the words of the retrieved texts (None: no words)."""
    want = answer_tokens(answer)
    if not want:
        return None
    have: set[str] = set()
    for text in retrieved:
        have.update(words(text))
    return len(want & have) / len(want)


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, or None for no values."""
    return sum(values) / len(values) if values else None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not in [0, 100]")
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(data[lo])
    return float(data[lo] + (data[hi] - data[lo]) * (pos - lo))


def summary_ms(values: Sequence[float]) -> Mapping[str, float | int]:
    """Count, mean and p50/p95/p99 of latencies in milliseconds."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "mean": round(sum(values) / len(values), 3),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }
