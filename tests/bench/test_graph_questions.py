from bench.graph_questions import Asked, tally


def test_tally_counts_gains_and_losses_per_category_and_kind() -> None:
    rows = tally(
        [
            Asked("multi-hop", True, 0.5, 1.0),
            Asked("multi-hop", True, 1.0, 1.0),
            Asked("multi-hop", False, 1.0, 0.0),
            Asked("single-hop", True, 1.0, 0.5),
        ]
    )
    assert rows == [
        {"category": "multi-hop", "question": "a set", "asked": 2, "better": 0, "worse": 1, "r10_diff": -25.0},
        {"category": "multi-hop", "question": "one thing", "asked": 1, "better": 1, "worse": 0, "r10_diff": 100.0},
        {"category": "single-hop", "question": "a set", "asked": 1, "better": 1, "worse": 0, "r10_diff": 50.0},
    ]
