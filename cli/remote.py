"""What the commands with ``--url`` share: the key they send to a running query service; ``memory --url``."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

from adamem.settings import Settings

__all__ = ["print_memory_at", "service_key"]

LAYERS = ("working", "episodic", "persona", "graph", "archive")
"""The layers ``GET /v1/users/{user}/memory`` serves."""
MAX_ROWS = 10_000  # the most rows the service sends for one layer (its ``limit``)


def service_key(settings: Settings, tenant: str) -> str | None:
    """The key to send for ``tenant``: ``--api-key``/``ADAMEM_API_KEY``, else that tenant's in ``ADAMEM_API_KEYS``.

    The second lets a command run beside the service it configures (the same environment) without
    repeating the key; ``None`` for an open service.
    """
    if settings.api_key:
        return settings.api_key
    pairs = [part.strip().partition(":") for part in settings.api_keys.split(",")]
    return next((key for name, _, key in pairs if name == tenant and key), None)


def print_memory_at(url: str, settings: Settings, user: str, *, tenant: str, layer: str | None, as_json: bool) -> int:
    """``adamem memory --url``: one layer's rows from a running service, or how many rows each layer holds."""
    from adamem.api.client import MemoryClient
    from adamem.cli.rows import row_line

    with MemoryClient(url, service_key(settings, tenant), tenant=tenant) as client:
        if layer is None:
            counts = {name: client.memory(user, name, limit=1)["count"] for name in LAYERS}
            if as_json:
                print(json.dumps({"user_id": user, "tenant": tenant, "rows": counts}, indent=1))
            else:
                shown = ", ".join(f"{name} {count}" for name, count in counts.items())
                print(f"{user} (tenant {tenant}) at {url}: rows per layer: {shown}")
                print(f"  one layer's rows: adamem memory {user} --layer persona --url {url}")
            return 0
        answer = client.memory(user, layer, limit=MAX_ROWS)
    rows = answer["rows"]
    if answer["count"] > len(rows):
        print(f"adamem memory: showing {len(rows)} of {answer['count']} rows (the service sends at most {MAX_ROWS})",
              file=sys.stderr)  # fmt: skip
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
    else:
        for row in rows:
            print(row_line(SimpleNamespace(TABLE=row["table"], **row)))
    return 0
