"""How a client finds the ``adamem serve`` that writes an embedded log, and the key it sends to a service.

An ``adamem serve`` in embedded mode is its log folder's one writer. While it runs it leaves
``ServiceNotice.NAME`` in the folder, naming where it listens, so that what is refused the
folder's writer lock — ``adamem add``, ``Memory.remember`` (the MCP ``remember`` tool, the
LangChain chat history) — can publish through the service instead. A notice counts only while
the folder's writer lock is held: a service that crashed leaves its notice behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adamem.settings import Settings

__all__ = ["ServiceNotice", "service_key", "serving_url"]


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

    def around(self, app: ASGIApp, host: str, port: int) -> ASGIApp:
        """``app`` (ASGI), which writes the notice once it has started and removes it when it shuts down.

        In the app's lifespan rather than around ``uvicorn.run``: on SIGTERM uvicorn shuts the app
        down and then raises the signal again, which ends the process before a ``finally`` runs.
        """
        notice = self

        async def announced(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "lifespan":
                await app(scope, receive, send)
                return

            async def receiving() -> Message:
                message = await receive()
                if message["type"] == "lifespan.shutdown":
                    notice.remove()
                return message

            async def sending(message: Message) -> None:
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
    from adamem.errors import LogError
    from adamem.streams.embedded_log import writer_lock

    folder = settings.log.folder
    if folder is None:
        return None  # Kafka, in-memory: no folder and no single writer
    if not folder.is_dir():
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
