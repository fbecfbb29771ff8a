"""The metrics registry: bounded dead-letter reasons from the runners' own error texts, capped tenants."""

from __future__ import annotations

from adamem import metrics
from adamem.ingest import load_messages
from adamem.partitioning import partition_for
from adamem.schemas.serde import encode_event
from adamem.settings import Settings
from adamem.streams.log import LogRecord
from adamem.streams.step import classify

LINE = b'{"user_id": "alice", "speaker": "Alice", "text": "I love hiking", "occurred_at": "2024-03-01T09:30:00Z"}'


def test_every_dead_letter_error_of_the_classifier_has_a_bounded_reason() -> None:
    message = load_messages(LINE, Settings(), "t.jsonl")[0]
    value = encode_event(message)
    home = partition_for("alice", 4)
    cases = {
        "key_mismatch": LogRecord("adamem.messages", home, 0, "bob", value, 0),
        "misplaced": LogRecord("adamem.messages", (home + 1) % 4, 0, "alice", value, 0),
        "undecodable": LogRecord("adamem.messages", home, 0, "alice", b"\xc3\x01garbage", 0),
    }
    for reason, record in cases.items():
        error = classify(record, 4)
        assert isinstance(error, str), reason
        assert metrics.dead_letter_reason(error) == reason, error
    assert metrics.dead_letter_reason("StoreError: the shard is gone") == "StoreError"
    assert metrics.dead_letter_reason("something with no class: at all") == "other"


def test_tenants_past_the_cap_share_one_label_value() -> None:
    labels = metrics._TenantLabels(2)
    assert [labels(t) for t in ("a", "b", "c", "a", "d")] == ["a", "b", metrics.OTHER_TENANT, "a", metrics.OTHER_TENANT]
