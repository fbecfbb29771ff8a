"""``adamem memory --url``: a layer of a running query service, printed as the in-process command prints it.

The key the commands with ``--url`` send, and how they find the ``adamem serve`` that writes an
embedded log folder, are the service layer's (``api/notice.py``); they are re-exported here.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

from adamem.api.notice import ServiceNotice, service_key, serving_url
from adamem.settings import Settings

__all__ = ["ServiceNotice", "print_memory_at", "service_key", "serving_url"]

LAYERS = ("working", "episodic", "persona", "graph", "archive")
"""The layers ``GET /v1/users/{user}/memory`` serves."""
MAX_ROWS = 10_000  # the most rows the service sends for one layer (its ``limit``)


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
