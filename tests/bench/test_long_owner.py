"""`python -m bench.long_owner` measures one owner of a kept store in a fresh process per source tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from adamem import Memory

REPO = Path(__file__).resolve().parents[2]


def test_the_long_owner_bench_measures_a_tiered_owner_and_compares_the_trees_answers(tmp_path: Path) -> None:
    with Memory(log=str(tmp_path / "log"), store=str(tmp_path / "store")) as m:
        for i in range(24):
            m.add("alice", f"Day {i}: I went hiking with my sister near Lisbon and we saw {i} birds.")
    out = tmp_path / "long_owner.json"
    args = ["--store", str(tmp_path / "store"), "--owner", "default:alice", "--hot", "8", "--warm", "5"]
    args += ["--rounds", "2", "--trees", str(REPO), str(REPO), "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.long_owner", *args], cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    tree = result["trees"][str(REPO)]
    assert tree["held"]["messages"] == 8  # the newest 8 of 24: the rest is read through the store
    assert len(tree["runs"]) == 4 and all(len(r["cold_ms"]) == 3 and r["warm_ms"]["n"] == 5 for r in tree["runs"])
    assert result["answers_identical_to_first_run"] == {str(REPO): [5, 5, 5, 5]}  # four processes answer alike
