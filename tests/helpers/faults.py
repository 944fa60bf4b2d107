"""A fault-injecting HTTP proxy on loopback, between a kg-fuse mount and a real server.

Fault injection only: the real embedded server sits behind it and answers every request
that is passed through. The mode can be changed at any time from the test:

    proxy = FaultProxy(kg_server.api_url).start()
    mount = mount_factory(extra_args=["--api-url", proxy.url], env=proxy_env(kg_server))
    proxy.set_mode("stall")            # accept, read the request, never answer
    proxy.set_mode("reset")            # read the request, then reset the connection
    proxy.set_mode("error500")         # 500 {"detail": "injected fault"}
    proxy.set_mode("malformed")        # 200 with a body that is not JSON
    proxy.set_mode("wrong_shape")      # 200 {}
    proxy.set_mode("slow", delay=0.5)  # answer like the server, but late
    proxy.set_mode("pass")             # back to normal (releases stalled connections)
    proxy.revoke_tokens(1)             # the next non-token request gets a 401
    proxy.set_mode("error500", paths=["/query/search"])   # fault only these prefixes
    proxy.requests                     # [Request(method, path, action)], in order
    proxy.count("/auth/oauth/token")   # how many requests started with this path
    proxy.stop()

Each client connection has its own thread; HTTP/1.1 keep-alive is supported (httpx
reuses connections). Requests are forwarded with ``http.client`` on a per-connection
upstream connection; when the upstream refuses (the real server was stopped), the client
connection is reset, as a dead server's would be.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

MODES = ("pass", "stall", "reset", "error500", "malformed", "wrong_shape", "slow")
TOKEN_PATH = "/auth/oauth/token"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length",
              "proxy-connection", "upgrade", "te", "trailer"}
MAX_LINE = 65536


def close_listener(server: socketserver.BaseServer | None,
                   thread: threading.Thread | None, lock: threading.Lock,
                   connections: set[socket.socket]) -> None:
    """Stop a loopback proxy: no more connections accepted, and every open one dropped,
    so that its clients see what a dead server does (shared with ``recorder.py``)."""
    if server is not None:
        server.shutdown()
        server.server_close()
    with lock:
        open_now = list(connections)
    for conn in open_now:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
    if thread is not None:
        thread.join(timeout=5)


@dataclass(frozen=True)
class Request:
    """One request the proxy saw, and what it did with it."""

    at: float  # time.monotonic()
    method: str
    path: str
    action: str  # a mode name, "revoked", or "refused" (upstream down)


class _Reset(Exception):
    """Close the client connection with a TCP reset."""


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.proxy._track(self.connection, add=True)
        self._upstream: http.client.HTTPConnection | None = None

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        if self._upstream is not None:
            self._upstream.close()
        self.server.proxy._track(self.connection, add=False)

    def handle(self) -> None:
        proxy = self.server.proxy
        try:
            while not proxy._stopping.is_set():
                request = _read_request(self.rfile)
                if request is None:
                    return
                method, target, headers, body = request
                path = urlsplit(target).path
                action, delay = proxy._decide(method, path)
                proxy._record(method, path, action)
                if action == "stall":
                    # Never answer; hang up only when the stall ends or the proxy stops.
                    proxy._stall_released.wait()
                    return
                if action == "reset":
                    raise _Reset
                if action == "revoked":
                    self._reply(401, {"detail": "Could not validate credentials"},
                                extra=[("WWW-Authenticate", "Bearer")])
                elif action == "error500":
                    self._reply(500, {"detail": "injected fault"})
                elif action == "malformed":
                    self._reply_raw(200, b'{"results": [{"concept_id": "x", "lab',
                                    "application/json")
                elif action == "wrong_shape":
                    self._reply(200, {})
                else:  # pass, slow
                    if delay:
                        time.sleep(delay)
                    try:
                        status, reason, out_headers, out_body = self._forward(
                            method, target, headers, body)
                    except OSError:
                        proxy._record(method, path, "refused")
                        raise _Reset from None
                    self._send(status, reason, out_headers, out_body)
                if _wants_close(headers):
                    return
        except _Reset:
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
        except (OSError, ValueError):
            return

    # -- upstream -------------------------------------------------------------------------

    def _forward(self, method: str, target: str, headers: list[tuple[str, str]],
                 body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        proxy = self.server.proxy
        for attempt in (1, 2):
            if self._upstream is None:
                self._upstream = http.client.HTTPConnection(
                    proxy.upstream_host, proxy.upstream_port, timeout=120)
            try:
                self._upstream.putrequest(method, target, skip_host=True,
                                          skip_accept_encoding=True)
                for name, value in headers:
                    if name.lower() not in HOP_BY_HOP:
                        self._upstream.putheader(name, value)
                self._upstream.putheader("Content-Length", str(len(body)))
                self._upstream.endheaders(body)
                response = self._upstream.getresponse()
                data = response.read()
                out = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
                return response.status, response.reason, out, data
            except (http.client.HTTPException, OSError):
                # A kept-alive upstream connection may have been closed by a restarted
                # server: reconnect once before giving up.
                self._upstream.close()
                self._upstream = None
                if attempt == 2:
                    raise OSError("upstream unavailable") from None
        raise AssertionError("unreachable")

    # -- replies ---------------------------------------------------------------------------

    def _reply(self, status: int, payload: object,
               extra: Iterable[tuple[str, str]] = ()) -> None:
        self._reply_raw(status, json.dumps(payload).encode(), "application/json", extra)

    def _reply_raw(self, status: int, body: bytes, content_type: str,
                   extra: Iterable[tuple[str, str]] = ()) -> None:
        reason = http.client.responses.get(status, "")
        self._send(status, reason, [("Content-Type", content_type), *extra], body)

    def _send(self, status: int, reason: str, headers: list[tuple[str, str]],
              body: bytes) -> None:
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines += [f"Content-Length: {len(body)}", "", ""]
        self.wfile.write("\r\n".join(lines).encode("latin-1") + body)
        self.wfile.flush()


def _read_request(rfile) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    line = rfile.readline(MAX_LINE)
    if not line:
        return None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3:
        raise ValueError(f"bad request line {line!r}")
    method, target, _version = parts
    headers: list[tuple[str, str]] = []
    while True:
        raw = rfile.readline(MAX_LINE)
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    lookup = {k.lower(): v for k, v in headers}
    if lookup.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(rfile.readline(MAX_LINE).split(b";")[0].strip(), 16)
            if size == 0:
                while rfile.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunks.append(rfile.read(size))
            rfile.readline(MAX_LINE)
        body = b"".join(chunks)
    else:
        body = rfile.read(int(lookup.get("content-length", "0") or 0))
    return method, target, headers, body


def _wants_close(headers: list[tuple[str, str]]) -> bool:
    return any(k.lower() == "connection" and v.lower() == "close" for k, v in headers)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: FaultProxy


class FaultProxy:
    """See the module docstring."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname and parts.port, upstream
        self.upstream_host: str = parts.hostname
        self.upstream_port: int = parts.port
        self._lock = threading.Lock()
        self._mode = "pass"
        self._delay = 0.0
        self._paths: tuple[str, ...] | None = None
        self._revoke = 0
        self._requests: list[Request] = []
        self._connections: set[socket.socket] = set()
        self._stall_released = threading.Event()
        self._stall_released.set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._stall_released.set()
        close_listener(self._server, self._thread, self._lock, self._connections)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- faults -------------------------------------------------------------------------

    def set_mode(self, mode: str, *, paths: Iterable[str] | None = None,
                 delay: float = 0.0) -> None:
        """Apply ``mode`` to every later request whose path starts with one of ``paths``
        (all requests when None). Leaving ``stall`` hangs up the stalled connections."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
        with self._lock:
            self._mode = mode
            self._delay = delay
            self._paths = tuple(paths) if paths is not None else None
            if mode == "stall":
                self._stall_released.clear()
            else:
                self._stall_released.set()

    @property
    def mode(self) -> str:
        return self._mode

    @contextlib.contextmanager
    def fault(self, mode: str, **kwargs: object) -> Iterator[FaultProxy]:
        """``with proxy.fault("stall"): ...`` then back to pass-through."""
        self.set_mode(mode, **kwargs)  # type: ignore[arg-type]
        try:
            yield self
        finally:
            self.set_mode("pass")

    def revoke_tokens(self, n: int = 1) -> None:
        """The next ``n`` requests other than token requests are answered 401, as a
        server that revoked or forgot the client's token would."""
        with self._lock:
            self._revoke = n

    # -- what was seen --------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def count(self, path_prefix: str = "", action: str | None = None,
              since: int = 0) -> int:
        """Requests (from index ``since``) whose path starts with ``path_prefix``."""
        return sum(1 for r in self.requests[since:]
                   if r.path.startswith(path_prefix) and (action is None or r.action == action))

    def mark(self) -> int:
        """An index into ``requests`` for ``count(since=...)``."""
        with self._lock:
            return len(self._requests)

    # -- internals ------------------------------------------------------------------------

    def _decide(self, method: str, path: str) -> tuple[str, float]:
        with self._lock:
            if self._revoke > 0 and path != TOKEN_PATH and path != "/health":
                self._revoke -= 1
                return "revoked", 0.0
            applies = self._paths is None or any(path.startswith(p) for p in self._paths)
            if not applies or path == "/health":
                return "pass", 0.0
            return self._mode, self._delay

    def _record(self, method: str, path: str, action: str) -> None:
        with self._lock:
            self._requests.append(Request(time.monotonic(), method, path, action))

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


def proxy_env(server: object) -> dict[str, str]:
    """Environment for a mount that reaches ``server`` through a proxy: the proxy's URL
    is not the one in the server's credentials file, so credentials come from the
    environment, as for any other deployment."""
    user = server.user  # type: ignore[attr-defined]
    return {"KG_CLIENT_ID": user["client_id"], "KG_CLIENT_SECRET": user["client_secret"]}
