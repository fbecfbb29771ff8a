"""Our partitioner equals Kafka's default (murmur2), so every client agrees where an owner lives."""

from __future__ import annotations

from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from adamem.streams.log import murmur2, partition_for


def test_murmur2_matches_the_kafka_client_implementation() -> None:
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"alice", "小明".encode(), bytes(range(256))]
    for key in keys:
        ours = murmur2(key)
        theirs = aiokafka_murmur2(key)
        assert ours & 0xFFFFFFFF == theirs & 0xFFFFFFFF, key


def test_known_java_values() -> None:
    # Values from Kafka's Java UtilsTest.testMurmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_partitions_spread_and_are_stable() -> None:
    parts = {partition_for(f"user-{i}", 4) for i in range(100)}
    assert parts == {0, 1, 2, 3}
    assert partition_for("alice", 4) == partition_for("alice", 4)
