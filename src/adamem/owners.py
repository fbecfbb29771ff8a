"""Who a memory belongs to: an owner is a tenant's user, ``(tenant, user_id)``, never a bare user id.

Two tenants may use the same user id and never see each other: every row, cache entry, id and
query names its owner by the **owner key** ``"<tenant>:<user_id>"``. The tenant part has ``%`` and
``:`` percent-escaped, so any tenant string and any user id give one key and the key gives them
back (``split_owner``). The log's partition key stays the bare ``user_id``, so an owner's events
keep their partition (and their order) whatever the tenant; two tenants' owners of the same user
id share a partition, and with it a store shard, where their keys keep them apart.
"""

from __future__ import annotations

import functools

__all__ = ["owner_key", "partition_key", "split_owner"]


def _escape(tenant: str) -> str:
    return tenant.replace("%", "%25").replace(":", "%3A")


def _unescape(tenant: str) -> str:
    return tenant.replace("%3A", ":").replace("%25", "%")


@functools.lru_cache(maxsize=1 << 16)
def owner_key(tenant: str, user_id: str) -> str:
    """The key of ``tenant``'s memory owner ``user_id`` (``"acme:alice"``)."""
    return f"{_escape(tenant)}:{user_id}"


@functools.lru_cache(maxsize=1 << 16)
def split_owner(owner: str) -> tuple[str, str]:
    """``(tenant, user_id)`` of an owner key; a key without a tenant part is refused."""
    tenant, sep, user_id = owner.partition(":")
    if not sep:
        raise ValueError(f"{owner!r} is not an owner key 'tenant:user_id'")
    return _unescape(tenant), user_id


def partition_key(owner: str) -> str:
    """The log's partition key of an owner: its bare user id (what producers key records by)."""
    return split_owner(owner)[1]
