"""The server's connections send small responses at once (TCP_NODELAY): without it a
kept-alive connection waits ~40 ms per response (Nagle's algorithm vs delayed ACKs)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kg_fuse.server.server_commands import _bind


@pytest.mark.parametrize("loop_factory", ["asyncio", "uvloop"])
def test_accepted_connections_have_nodelay(loop_factory: str) -> None:
    if loop_factory == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    listener = _bind("127.0.0.1", 0)
    seen: list[int] = []

    async def main() -> None:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listener)
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
        listener.close()
    assert seen and seen[0] != 0
