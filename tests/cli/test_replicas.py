"""The listening socket of ``adamem serve --workers N``: its accepted connections get TCP_NODELAY."""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from adamem.cli.replicas import TcpConfig


async def _nodelay_of_accepted(listener: socket.socket) -> int:
    """TCP_NODELAY of a connection asyncio accepts on ``listener`` (as uvicorn's workers serve it)."""
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Report(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Report, sock=listener)
    port = listener.getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await asyncio.wait_for(seen, 30)
    finally:
        writer.close()
        server.close()
        await server.wait_closed()


def _bound(config: uvicorn.Config) -> socket.socket:
    sock = config.bind_socket()
    sock.listen()
    return sock


def test_the_listening_socket_is_tcp_and_its_connections_get_nodelay() -> None:
    sock = _bound(TcpConfig("adamem.cli.commands:service_app", factory=True, host="127.0.0.1", port=0, workers=2))
    assert sock.proto == socket.IPPROTO_TCP
    assert sock.get_inheritable()  # the worker processes receive it
    assert asyncio.run(_nodelay_of_accepted(sock)) == 1


def test_uvicorns_own_socket_leaves_nagle_on_before_0_55() -> None:
    """Why ``TcpConfig`` exists (uvicorn issue #3149): uvicorn before 0.55 leaves Nagle on; 0.55.0 (the newest
    on 2026-12-02) no longer does. When the oldest allowed uvicorn is 0.55, ``TcpConfig`` can go."""
    fixed = tuple(int(p) for p in uvicorn.__version__.split(".")[:2]) >= (0, 55)
    sock = _bound(uvicorn.Config("adamem.cli.commands:service_app", factory=True, host="127.0.0.1", port=0))
    assert asyncio.run(_nodelay_of_accepted(sock)) == (1 if fixed else 0), uvicorn.__version__
