"""``adamem serve --workers N``: uvicorn's process supervisor over a listening socket bound as TCP.

uvicorn binds the shared socket of its worker processes with ``proto`` 0; accepted connections
inherit it, and asyncio turns on ``TCP_NODELAY`` only for sockets that say ``IPPROTO_TCP``. So
with ``--workers`` > 1 Nagle's algorithm stayed on and every keep-alive request after a
connection's first waited for the client's delayed ACK: about 40 ms added to each answer
(uvicorn issue #3149; one process is not affected: asyncio binds that socket itself). Here the
listening socket is the same one, declared TCP, so every worker's connections get ``TCP_NODELAY``.
uvicorn 0.55 binds it as TCP itself (``tests/cli/test_replicas.py``); this stays for the older ones
``pyproject.toml`` allows.
"""

from __future__ import annotations

import contextlib
import copy
import socket
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG
from uvicorn.supervisors import Multiprocess

__all__ = ["TcpConfig", "log_config", "run_replicas"]


def log_config() -> dict[str, Any]:
    """uvicorn's logging, with the access log on stderr beside its other lines (uvicorn's own puts it on stdout).

    stdout is what scripts parse; every line of the service's own log goes to stderr.
    """
    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config


class TcpConfig(uvicorn.Config):
    """uvicorn's configuration, whose listening socket is declared ``IPPROTO_TCP`` (see the module)."""

    def bind_socket(self) -> socket.socket:
        """uvicorn's socket, bound as before, re-wrapped as a TCP socket (the same file descriptor)."""
        sock = super().bind_socket()
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.proto == socket.IPPROTO_TCP:
            return sock
        tcp = socket.socket(sock.family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=sock.detach())
        tcp.set_inheritable(True)
        return tcp


def run_replicas(app: str, *, host: str, port: int, workers: int, access_log: bool) -> None:
    """Serve the app factory ``app`` (``module:function``) from ``workers`` processes on one port until stopped."""
    config = TcpConfig(
        app,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="info",
        access_log=access_log,
        log_config=log_config(),
    )
    with contextlib.suppress(KeyboardInterrupt):  # the supervisor handles SIGINT itself; as uvicorn.run
        Multiprocess(config, sockets=[config.bind_socket()]).run()
