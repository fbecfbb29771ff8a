"""``adamem bench research`` on a small LoCoMo-format conversation: recall per depth and per conversation."""

from __future__ import annotations

import json
from pathlib import Path

from bench.research import run

SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "9:00 am on 4 March, 2024",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey kitten called Pixel last week."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Pixel is a great name! How is she settling in?"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "She sleeps on my keyboard while I paint watercolours."},
        ],
        "session_2_date_time": "6:00 pm on 18 March, 2024",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "I sold my first watercolour at the Saturday market!"},
            {"speaker": "Ben", "dia_id": "D2:2", "text": "Congratulations, what did it show?"},
            {"speaker": "Ana", "dia_id": "D2:3", "text": "Pixel asleep on the windowsill."},
        ],
    },
    "qa": [
        {"question": "What is the name of Ana's kitten?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
        {"question": "When did Ana sell a painting?", "answer": "16 March", "evidence": ["D2:1"], "category": 2},
        {"question": "What did Ana's painting show?", "answer": "Pixel", "evidence": ["D2:3", "D1:1"], "category": 1},
        {"question": "Who is Ben?", "answer": "x", "evidence": [], "category": 4},
    ],
}


def test_recall_per_depth_and_conversation(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    result = run(data, [1, 2], work=str(tmp_path / "work"), k=5)
    assert result["depths"] == [1, 2] and result["conversations"] == ["tiny"]
    one, two = result["by_depth"]["1"], result["by_depth"]["2"]
    assert one["mean_rounds"] == 1.0 and 1.0 <= two["mean_rounds"] <= 2.0
    for d in (one, two):
        assert d["latency_ms"]["n"] == 3  # the question without evidence is not asked
        pooled = d["pooled"]["1-4"]
        assert pooled is not None and 0.0 <= pooled <= 100.0
        assert d["per_conversation"]["tiny"]["1-4"] == pooled
    assert one["per_conversation"]["tiny"]["4"] == 100.0  # the kitten's name is found at any depth
    assert set(two["folds_helped_over_depth_1"]) == {"1", "2", "1-4"}
