"""A message's BM25 document with the words of the turns beside it: R@10 on LoCoMo and the scenario suite.

An experiment, not the shipped retrieval: importing this module replaces, in this process, the held
messages' BM25 index of every owner held whole with one whose documents also hold the text of the owner's
message before (``ADAMEM_CONTEXT=prev``), after (``next``) or both (``both``) each message, ordered by
``occurred_at`` then id, at the same weight as its own words. ``ADAMEM_CONTEXT_SKIP`` says which questions
keep the index as shipped: ``none``, ``causal`` (a "why") or ``graph`` (every question the seed's cues send
to the graph route: a "when" or a "why"). Owners with older messages outside the process (tiered) keep it
as shipped: their older messages' words are counted from the store's tokens, which hold no context.

    ADAMEM_CONTEXT=prev ADAMEM_CONTEXT_SKIP=graph python -m bench.context_expansion --work W base
    ADAMEM_CONTEXT=prev ADAMEM_CONTEXT_SKIP=graph python -m pytest -p bench.context_expansion \
        tests/retrieval/test_scenarios.py

The first runs ``bench/locomo_variants.py`` (its arguments) with the replacement in place; the second, the
scenario suite. Figures: ``bench/results/notes.md`` ("a message found by the words of the turns beside it").
"""

from __future__ import annotations

import itertools
import os
import runpy
import sys
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import adamem.retrieval.base as base
import adamem.retrieval.service as service
from adamem.projections.folds.rows import MessageRow
from adamem.projections.store.base import TEXT_FIELDS
from adamem.retrieval.config import Route
from adamem.retrieval.index import TextIndex, extracted_text
from adamem.retrieval.route import route_query
from adamem.retrieval.snapshot import OwnerSnapshot, View

__all__ = ["main"]

MODE = os.environ.get("ADAMEM_CONTEXT", "prev")
SKIP = os.environ.get("ADAMEM_CONTEXT_SKIP", "graph")
if MODE not in ("prev", "next", "both") or SKIP not in ("none", "causal", "graph"):
    raise SystemExit(f"ADAMEM_CONTEXT {MODE!r} (prev|next|both), ADAMEM_CONTEXT_SKIP {SKIP!r} (none|causal|graph)")


def _context_index(snapshot: OwnerSnapshot) -> TextIndex:
    rows = snapshot.table_rows("messages")
    ordered = sorted((r for r in rows if isinstance(r, MessageRow)), key=lambda r: (r.occurred_at, r.id))
    before = {b.id: a.text for a, b in itertools.pairwise(ordered)}
    after = {a.id: b.text for a, b in itertools.pairwise(ordered)}

    def extra(row: Any) -> str:
        words = [extracted_text(row)]
        if MODE in ("prev", "both"):
            words.append(before.get(row.id, ""))
        if MODE in ("next", "both"):
            words.append(after.get(row.id, ""))
        return " ".join(words)

    return TextIndex(rows, TEXT_FIELDS["messages"], extra=extra)


_cached = cached_property(_context_index)
_cached.__set_name__(OwnerSnapshot, "_context_index")
OwnerSnapshot._context_index = _cached  # type: ignore[attr-defined]


class ContextScorer(base.SemanticScorer):
    """The shipped scorer, its messages' BM25 taken from the context index for the questions not skipped.

    Both indexes are built from the same rows in the same order, so the scores fill the scorer's own
    cache of the messages' BM25, and every other step reads them as it reads the shipped ones.
    """

    def __init__(self, view: View, question: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(view, question, *args, **kwargs)
        plan = route_query(question)
        skipped = {"none": False, "causal": plan.causal, "graph": plan.route is Route.GRAPH}[SKIP]
        if not skipped and view.snapshot.archive is None:
            index: TextIndex = view.snapshot._context_index  # type: ignore[attr-defined]
            self._bm25["messages"] = index.scores(self.terms, self.expansion, None)


service.SemanticScorer = ContextScorer  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    """``bench/locomo_variants.py`` with the context index in place."""
    sys.argv = ["locomo_variants.py", *(sys.argv[1:] if argv is None else argv)]
    runpy.run_path(str(Path(__file__).with_name("locomo_variants.py")), run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
