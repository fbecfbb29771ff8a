"""What the commands with ``--url`` share: the key they send to a running query service; ``memory --url``.

And how they find one: an ``adamem serve`` in embedded mode is its log folder's one writer, and
leaves ``ServiceNotice.NAME`` in the folder while it runs, naming where it listens, so that a
command refused the folder's writer lock (``adamem add``) can go through the service instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from adamem.settings import Settings

__all__ = ["ServiceNotice", "print_memory_at", "service_key", "serving_url"]

LAYERS = ("working", "episodic", "persona", "graph", "archive")
"""The layers ``GET /v1/users/{user}/memory`` serves."""
MAX_ROWS = 10_000  # the most rows the service sends for one layer (its ``limit``)


class ServiceNotice:
    """The file in an embedded log's folder that names the ``adamem serve`` writing it: ``{"url", "pid"}``."""

    NAME = ".serve.json"

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / self.NAME

    def write(self, host: str, port: int) -> None:
        """Say where this process serves (a wildcard address is reached on the loopback)."""
        reach = "127.0.0.1" if host in ("", "0.0.0.0") else ("[::1]" if host == "::" else host)
        reach = f"[{reach}]" if ":" in reach and not reach.startswith("[") else reach
        tmp = self.path.with_name(f"{self.NAME}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"url": f"http://{reach}:{port}", "pid": os.getpid()}), encoding="utf-8")
        os.replace(tmp, self.path)

    def around(self, app: Any, host: str, port: int) -> Any:
        """``app`` (ASGI), which writes the notice once it has started and removes it when it shuts down.

        In the app's lifespan rather than around ``uvicorn.run``: on SIGTERM uvicorn shuts the app
        down and then raises the signal again, which ends the process before a ``finally`` runs.
        """
        notice = self

        async def announced(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "lifespan":
                await app(scope, receive, send)
                return

            async def receiving() -> Any:
                message = await receive()
                if message["type"] == "lifespan.shutdown":
                    notice.remove()
                return message

            async def sending(message: Any) -> None:
                if message["type"] == "lifespan.startup.complete":
                    notice.write(host, port)
                await send(message)

            await app(scope, receiving, sending)

        return announced

    def remove(self) -> None:
        """The service stops: the folder no longer names it (a notice of another process is left alone)."""
        if self.url_of(os.getpid()) is not None:
            self.path.unlink(missing_ok=True)

    def url(self) -> str | None:
        """The URL of the service that wrote the notice, if there is one (a crashed one's may be left over)."""
        return self.url_of(None)

    def url_of(self, pid: int | None) -> str | None:
        """The notice's URL, if it was written by ``pid`` (any process: None)."""
        try:
            notice = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(notice, dict) or not isinstance(notice.get("url"), str):
            return None
        return notice["url"] if pid is None or notice.get("pid") == pid else None


def serving_url(settings: Settings) -> str | None:
    """The URL of the ``adamem serve`` that writes the configured embedded log now, if one does.

    The notice alone is not enough (a service that crashed leaves it): the folder's writer lock
    must be held too.
    """
    from adamem.cli.errors import embedded_log_folder
    from adamem.errors import LogError
    from adamem.streams.embedded_log import writer_lock

    folder = embedded_log_folder(settings)
    if folder is None or not folder.is_dir():
        return None
    url = ServiceNotice(folder).url()
    if url is None:
        return None
    try:
        writer_lock(folder).close()  # free: nobody writes the folder; the notice is a crashed service's
    except LogError:
        return url
    return None


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
