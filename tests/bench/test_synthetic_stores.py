"""`adamem bench scale` and `objectstore` build their synthetic stores from the current row classes and measure them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_scale_bench_builds_and_measures_a_small_store_held_tiered_and_whole(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    args = ["--per-owner", "300", "--owners", "20", "--hot", "100", "0", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    series = json.loads(out.read_text(encoding="utf-8"))["series"]
    one = {r["hot_messages"]: r for r in series["messages_per_owner"]}
    many = {r["hot_messages"]: r for r in series["owners"]}
    assert set(one) == set(many) == {100, 0}
    assert all(r["rows"] == 300 and r["owners_loaded"] == 1 for r in one.values())
    assert all(r["rows"] == 200 and r["owners_loaded"] == 20 for r in many.values())
    for r in [*one.values(), *many.values()]:
        assert r["cold"]["n"] > 0 and r["warm"]["n"] == 30 and r["cold"]["p50_ms"] > 0


@pytest.mark.s3
def test_the_objectstore_bench_writes_and_reads_a_small_store_on_s3(s3_endpoint: str, tmp_path: Path) -> None:
    out = tmp_path / "objectstore.json"
    args = ["--s3", s3_endpoint, "--owners", "4", "--messages", "200", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.objectstore", *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["setup"]["messages"] == 200
    for place in ("local", "s3"):
        assert result[place]["load_owner"]["n"] == 4 and result[place]["vector_search"]["p50_ms"] > 0


def test_the_footprint_bench_compares_vector_indexes_on_a_stores_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.footprint import INDEXES, index_compression

    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--build", str(store), "1", "600"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with pytest.raises(SystemExit, match="its vectors have 384 values"):  # the default e5-pair gives 768
        index_compression(store, ["where do I live now"], k=5)
    monkeypatch.setenv("ADAMEM_EMBEDDER", "e5")  # the width of bench.scale's stand-in vectors
    result = index_compression(store, ["where do I live now", "what did I eat"], k=5)
    assert result["rows"] == 600 and result["queries"] == 2
    assert set(result["indexes"]) == set(INDEXES)
    for entry in result["indexes"].values():
        assert entry["index_bytes"] > 0 and 0 <= entry["no_refine"]["recall_at_k"] <= 100
