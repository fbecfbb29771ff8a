"""What the commands with ``--url`` share: the key they send to a running query service."""

from __future__ import annotations

from adamem.settings import Settings

__all__ = ["service_key"]


def service_key(settings: Settings, tenant: str) -> str | None:
    """The key to send for ``tenant``: ``--api-key``/``ADAMEM_API_KEY``, else that tenant's in ``ADAMEM_API_KEYS``.

    The second lets a command run beside the service it configures (the same environment) without
    repeating the key; ``None`` for an open service.
    """
    if settings.api_key:
        return settings.api_key
    pairs = [part.strip().partition(":") for part in settings.api_keys.split(",")]
    return next((key for name, _, key in pairs if name == tenant and key), None)
