"""R@10 on LoCoMo when a message is also ranked by a vector of the dialogue around it (an experiment).

    .venv/bin/python -m bench.context_vectors --work /tmp/loc --which prev --mode mean base "messages-only:base"

The store under ``--work`` is the one ``bench/locomo_variants.py`` builds. Each message of every conversation is
embedded a second time (``passage:`` side) with the turn before it (``prev``), after it (``next``) or both, as
the analyser's embedded texts (``embedding_text``) in dialogue order (a neighbour in the owner's stream within the same
session); the vectors are kept in ``WORK/context_vectors_WHICH.npz``. In this process the question's
cosine with a message is then its cosine with the message's own vector, the context vector (``replace``), the larger
of the two (``max``) or their mean (``mean``) — for the questions whose messages are scored with their context's
words (``RetrievalConfig.context_words``, not the graph route), or for every question (``--every-question``).
Variants and the output line are ``bench/locomo_variants.py``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adamem.analysis import Embedder
from adamem.analysis.agent import embedding_text
from adamem.ingest import load_messages
from adamem.projections.folds.rows import MessageRow
from adamem.retrieval import base
from adamem.settings import Settings
from bench.locomo_quick import built_store
from bench.locomo_variants import measure

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"


def context_texts(store: Any, data: list[dict[str, Any]], work: Path, which: str) -> dict[str, str]:
    """Each message's embedded text (``embedding_text``) with its neighbours' (``prev``, ``next`` or ``both``), by
    message row id (the message's event id)."""
    settings = Settings(log_url=str(work / "log"), store_url=str(work / "store"), fsync=False)
    embedded = {
        m.event_id: embedding_text(m) for m in load_messages(json.dumps(data).encode(), settings, "locomo", "locomo")
    }
    texts = {}
    for sample in data:
        rows = sorted(
            (m for m in store.rows("messages", f"default:{sample['sample_id']}") if isinstance(m, MessageRow)),
            key=lambda m: m.seq,
        )
        for i, m in enumerate(rows):
            parts = [embedded[rows[i - 1].id]] if which in ("prev", "both") and i > 0 and m.context else []
            parts.append(embedded[m.id])
            if which in ("next", "both") and i + 1 < len(rows) and rows[i + 1].context:
                parts.append(embedded[rows[i + 1].id])
            texts[m.id] = "\n".join(parts)
    return texts


def context_vectors(
    store: Any, data: list[dict[str, Any]], embedder: Embedder, work: Path, which: str
) -> dict[str, Any]:
    """The unit context vectors by message row id, embedded once and kept in ``WORK/context_vectors_WHICH.npz``."""
    path = work / f"context_vectors_{which}.npz"
    if path.exists():
        with np.load(path) as saved:
            return {k: saved[k] for k in saved.files}
    texts = context_texts(store, data, work, which)
    ids = sorted(texts)
    found = {}
    for mid, v in zip(ids, embedder.embed([texts[i] for i in ids]), strict=True):
        a = np.asarray(v, dtype=np.float32)
        found[mid] = a / (float(np.linalg.norm(a)) or 1.0)
    np.savez(path, **found)  # type: ignore[arg-type]
    return found


def rank_by_context(vectors: dict[str, Any], mode: str, every_question: bool) -> None:
    """Make ``SemanticScorer.cosines`` rank messages by their context vectors too, in this process."""
    own: Callable[[base.SemanticScorer, str], Any] = base.SemanticScorer.cosines

    def cosines(self: base.SemanticScorer, table: str) -> Any:
        found = self._cosines.get(table)
        if found is not None:
            return found
        mine = own(self, table)
        if table != "messages" or not (every_question or self.context):
            return mine
        ids = self.view.snapshot.vector_index(table).ids
        ctx = np.array(
            [float(vectors[i] @ self._q32) if i in vectors else mine[k] for k, i in enumerate(ids)], dtype=mine.dtype
        )
        combined = {"replace": ctx, "max": np.maximum(mine, ctx), "mean": (mine + ctx) / 2}[mode]
        self._cosines[table] = combined
        return combined

    base.SemanticScorer.cosines = cosines  # type: ignore[method-assign]


def main() -> int:
    """Measure every variant with messages ranked by their context vectors; one JSON line each."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help='"base" or "field=value;field=value", as bench/locomo_variants.py')
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--work", default="/tmp/loc", help="folder of the built log and store")
    ap.add_argument("--which", choices=("prev", "next", "both"), default="prev")
    ap.add_argument("--mode", choices=("replace", "max", "mean"), default="mean")
    ap.add_argument("--every-question", action="store_true", help="also for the graph route's questions")
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    work = Path(args.work)
    embedder, store, queries = built_store(data, work)
    vectors = context_vectors(store, data, embedder, work, args.which)
    rank_by_context(vectors, args.mode, args.every_question)
    scope = "every" if args.every_question else "context"
    for variant in args.variants:
        label = f"{args.mode}/{args.which}/{scope}:{variant}"
        print(json.dumps(measure(store, data, queries, variant, label=label)), flush=True)
    queries.save()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
