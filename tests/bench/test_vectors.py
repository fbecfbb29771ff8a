"""What `adamem bench scaleout` measures with: a process's CPU seconds, and e5 vectors computed once and served."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from bench.vectors import PrecomputedEmbedder, proc_cpu_s


def test_proc_cpu_s_reads_this_process_cpu_time() -> None:
    before = proc_cpu_s(os.getpid())
    t = time.process_time()
    while time.process_time() - t < 0.3:  # burn CPU, not wall time
        sum(range(1000))
    after = proc_cpu_s(os.getpid())
    # /proc counts in clock ticks (1/100 s): the two clocks agree to a few ticks
    assert after - before == pytest.approx(time.process_time() - t, abs=0.05)
    assert abs(after - time.process_time()) < 0.05


def test_precomputed_embedder_returns_the_stored_vectors_and_refuses_unknown_texts(tmp_path: Path) -> None:
    vectors = np.eye(3, 384, dtype=np.float32)
    path = tmp_path / "v.npz"
    np.savez(path, name=np.array("e5-test"), texts=np.array(["a", "b", "c"]), vectors=vectors)
    e = PrecomputedEmbedder(path)
    assert e.name == "e5-test" and e.dim == 384
    got = e.embed(["c", "a"])
    assert got[0] == vectors[2].tolist() and got[1] == vectors[0].tolist()
    with pytest.raises(KeyError, match="no precomputed vector for 1"):
        e.embed(["a", "zzz"])


def test_vector_service_answers_the_workers_openai_compatible_embedder(tmp_path: Path) -> None:
    from adamem.analysis.llm import OpenAICompatibleEmbedder
    from adamem.errors import AdaMemError
    from bench.vectors import VectorService

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((2, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    path = tmp_path / "v.npz"
    np.savez(path, name=np.array("e5-test"), texts=np.array(["hello", "你好"]), vectors=vectors)
    service = VectorService(PrecomputedEmbedder(path))
    try:
        env = service.env()
        assert env["ADAMEM_EMBEDDER"] == "openai" and env["ADAMEM_EMBED_DIM"] == "384"
        client = OpenAICompatibleEmbedder(env["ADAMEM_EMBED_URL"], env["ADAMEM_EMBED_MODEL"], 384, retries=0)
        got = np.array(client.embed(["你好", "hello"]))
        assert np.allclose(got, vectors[[1, 0]], atol=1e-6)
        with pytest.raises(AdaMemError):  # an unknown text is refused, not answered with a made-up vector
            client.embed(["not precomputed"])
    finally:
        service.close()
