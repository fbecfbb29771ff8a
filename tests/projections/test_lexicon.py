"""The lexicon's term matching, grouped per label, labels exactly as matching term by term did."""

from __future__ import annotations

import itertools

import pytest

from adamem.projections.folds import lexicon
from adamem.projections.folds.lexicon import ACTIVITIES, PREFERENCE_CLUSTERS, activity_of, lexicon_cluster, normalize


def _contains(term: str, norm: str, words: set[str]) -> bool:
    """The term test the lexicon used before grouping terms (the reference)."""
    if not term.isascii():
        return term in norm
    if " " in term:
        return f" {term} " in f" {' '.join(lexicon._WORD.findall(norm))} "
    return term in words


def _reference(table: dict[str, tuple[str, ...]], text: str) -> str | None:
    norm = normalize(text)
    words = set(lexicon._WORD.findall(norm))
    return next((label for label, terms in table.items() if any(_contains(t, norm, words) for t in terms)), None)


def texts() -> list[str]:
    terms = [t for table in (ACTIVITIES, PREFERENCE_CLUSTERS) for ts in table.values() for t in ts]
    frames = ["{}", "I really like {} a lot.", "went {}!", "not-{}-ish", "{}s", "周末去{}了", "Worked out, then {}"]
    out = [f.format(t) for t, f in itertools.product(terms, frames)]
    out += [
        "I worked out at the gym",
        "we went on a bike ride",
        "biked to work",
        "Hot pot with friends",
        "hotpot",
        "spicy",
        "I'm cooking dinner",
        "ran a marathon",
        "",
        "游泳和跑步",
        "ice-cream",
        "icecream",
        "I love ice  cream",
    ]
    return out


@pytest.mark.parametrize("table", ["activities", "clusters"])
def test_grouped_terms_label_as_term_by_term_matching(table: str) -> None:
    terms = ACTIVITIES if table == "activities" else PREFERENCE_CLUSTERS
    grouped = lexicon._ACTIVITY_TERMS if table == "activities" else lexicon._CLUSTER_TERMS
    for text in texts():
        assert lexicon._first_label(grouped, text)[0] == _reference(terms, text), text


def test_public_lookups_use_the_grouped_terms() -> None:
    assert activity_of("I worked out at the gym last night") == "gym"
    assert activity_of("we went on a bike ride") == "cycling"
    assert lexicon_cluster("Sichuan hot pot") == "strong flavours"
    assert lexicon_cluster("ice cream") == "sweets"
    assert lexicon_cluster("quantum physics") is None
