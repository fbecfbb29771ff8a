"""`adamem bench scale` builds its synthetic stores from the current row classes and measures each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
