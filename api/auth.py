"""API keys per tenant, from configuration (``ADAMEM_API_KEYS``), never from code.

Format: ``tenant:key,tenant:key`` (a tenant may have several keys). With no keys configured the
service runs open — every request acts for every tenant — which suits a laptop, and says so at
start-up and in ``/health``.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from adamem.errors import ConfigError

__all__ = ["KeyRing", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: one tenant, or everyone when the service runs open."""

    tenant: str | None  # None: open mode, all tenants

    def may_see(self, tenant: str) -> bool:
        """Whether this principal may read or write memory of ``tenant``."""
        return self.tenant is None or self.tenant == tenant


class KeyRing:
    """The configured keys; looks a presented key up in constant time per key."""

    def __init__(self, spec: str) -> None:
        self._keys: list[tuple[str, str]] = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            tenant, sep, key = part.partition(":")
            if not sep or not tenant or len(key) < 8:
                raise ConfigError(
                    f"ADAMEM_API_KEYS entry {part.split(':')[0]!r}… is not 'tenant:key' with a key of 8+ characters"
                )
            self._keys.append((tenant, key))

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
        found = None
        for tenant, key in self._keys:
            if hmac.compare_digest(presented.encode(), key.encode()):
                found = tenant
        return Principal(found) if found is not None else None
