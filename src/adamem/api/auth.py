"""API keys per tenant, from configuration (``ADAMEM_API_KEYS``), never from code.

Format: ``tenant:key,tenant:key`` (a tenant may have several keys). Each key has at least
``MIN_KEY_LENGTH`` characters — a shorter one, a malformed entry or a key given to two tenants
stops the service at start-up with a ``ConfigError`` that names the entry's tenant (never the key).
With no keys configured the service runs open — every request acts for every tenant — which suits
a laptop, and says so at start-up and in ``/health``.

A presented key is compared with every configured key, in constant time: both sides are first
hashed (SHA-256) to the same length, each digest pair is compared with ``hmac.compare_digest``, and
the loop never stops early, so the time taken says nothing about which key, or how much of one,
matched.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from adamem.errors import ConfigError

__all__ = ["MIN_KEY_LENGTH", "KeyRing", "Principal"]

MIN_KEY_LENGTH = 16


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: one tenant, or everyone when the service runs open."""

    tenant: str | None  # None: open mode, all tenants

    def may_see(self, tenant: str) -> bool:
        """Whether this principal may read or write memory of ``tenant``."""
        return self.tenant is None or self.tenant == tenant


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).digest()


class KeyRing:
    """The configured keys; looks a presented key up in constant time."""

    def __init__(self, spec: str) -> None:
        self._keys: list[tuple[str, bytes]] = []
        owner: dict[bytes, str] = {}
        for number, part in enumerate(filter(None, (p.strip() for p in spec.split(","))), start=1):
            tenant, sep, key = part.partition(":")
            tenant, key = tenant.strip(), key.strip()
            name = f"entry {number} (tenant {tenant!r})" if sep and tenant else f"entry {number}"
            if not sep or not tenant or not key:
                raise ConfigError(f"ADAMEM_API_KEYS {name} is not 'tenant:key'; the format is tenant:key,tenant:key")
            if len(key) < MIN_KEY_LENGTH:
                raise ConfigError(
                    f"ADAMEM_API_KEYS {name} has a key of {len(key)} characters; a key needs at least "
                    f"{MIN_KEY_LENGTH} (make one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
                )
            digest = _digest(key)
            if owner.get(digest, tenant) != tenant:
                raise ConfigError(
                    f"ADAMEM_API_KEYS {name} repeats the key of tenant {owner[digest]!r}; a key belongs to one tenant"
                )
            owner[digest] = tenant
            self._keys.append((tenant, digest))

    @property
    def open(self) -> bool:
        """True when no key is configured (every request is allowed)."""
        return not self._keys

    def principal(self, presented: str | None) -> Principal | None:
        """The tenant of a presented key; None when it matches no key (open mode: everyone)."""
        if self.open:
            return Principal(None)
        if not presented:
            return None
        digest = _digest(presented)
        found = None
        for tenant, key in self._keys:  # every key, every time: no early exit
            if hmac.compare_digest(digest, key):
                found = tenant
        return Principal(found) if found is not None else None
