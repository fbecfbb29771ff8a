"""Which partition an owner lives in: Kafka's default partitioner, so every client agrees."""

from __future__ import annotations

from adamem.owners import partition_key

__all__ = ["misplaced", "murmur2", "owner_partition", "partition_for"]


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (the Java client's default partitioner), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (
            (data[i4] & 0xFF)
            | ((data[i4 + 1] & 0xFF) << 8)
            | ((data[i4 + 2] & 0xFF) << 16)
            | ((data[i4 + 3] & 0xFF) << 24)
        )
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    index = length & ~3
    if extra >= 3:
        h ^= (data[index + 2] & 0xFF) << 16
    if extra >= 2:
        h ^= (data[index + 1] & 0xFF) << 8
    if extra >= 1:
        h ^= data[index] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """Partition of a record key (a user id), the same as Kafka's default partitioner picks."""
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


def misplaced(key: str, topic: str, partition: int, partitions: int) -> str | None:
    """Why a record keyed ``key`` does not belong on ``partition`` of ``topic``, or None when it does.

    Every record must be where Kafka's Java client puts its key (murmur2): the owner's events are
    one ordered stream on one partition, and each partition's offsets are its own. librdkafka
    (confluent-kafka, kcat) hashes keys with CRC32 unless configured otherwise.
    """
    owner = partition_for(key, partitions)
    if owner == partition:
        return None
    return (
        f"record keyed {key!r} is on {topic} partition {partition}, but its owner lives on partition {owner} "
        "(Kafka's murmur2 partitioner, as the Java client picks it): set partitioner=murmur2_random in "
        "librdkafka producers (confluent-kafka, kcat -X partitioner=murmur2_random), or use a murmur2 "
        "partitioner in other clients, then publish it again"
    )


def owner_partition(owner: str, partitions: int) -> int:
    """Partition of a memory owner (an owner key ``tenant:user_id``): that of its bare user id."""
    return partition_for(partition_key(owner), partitions)
