"""The two pieces ``adamem bench scaleout`` measures with: a process's CPU seconds and the precomputed vectors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from adamem.bench.scaleout import PrecomputedEmbedder, proc_cpu_s


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
