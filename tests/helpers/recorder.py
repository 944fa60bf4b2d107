"""A recording reverse proxy on loopback, between live mounts and the real platform.

Every request a mount (or the test's own control client) sends through it is forwarded
with httpx to the platform, and kept with its answer, so that the kernel-free replay tier
(``tests/replay``, ``tests.helpers.replay``) can answer the same requests the same way:

    recorder = Recorder(platform_url).start()
    recorder.name_client(admin.client_id, "admin")   # who a token or a sign-in belongs to
    recorder.begin("scoped", names={...})             # a new recording
    recorder.phase("after ingest")                    # the platform's state changed
    recorder.stop(); recorder.start()                 # an outage: connection refused
    recorder.save(RECORDINGS / "scoped.json")

One exchange is kept as JSON: its phase, who sent it (a name given to an OAuth client, so
no client id is kept), method, path, query parameters, request body (JSON, form fields,
or for multipart the field names and each file's name, size and sha256), status,
content type and response body. Secrets are scrubbed: no Authorization header is kept,
client secrets and passwords become ``<secret>``, tokens ``<token>`` (wherever they
appear), client ids ``<who>``. An answer that repeats the one kept before it for the same
request is dropped, and so is a phase's only answer to a request when it equals the
answer the replay would find in an earlier phase anyway; files are written
pretty-printed with sorted keys, so that their diffs are readable.

``canonical_request`` is how a request is matched: the replay computes it the same way.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx

from tests.helpers.faults import close_listener

SECRET = "<secret>"
TOKEN = "<token>"
TOKEN_PATH = "/auth/oauth/token"
SECRET_FIELDS = ("client_secret", "password")
TOKEN_FIELDS = ("access_token", "refresh_token")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
              "proxy-connection", "upgrade", "te", "trailer", "accept-encoding",
              "content-encoding"}
FORMAT = 1  # the recording files' format
# A machine's own paths in the platform's answers (its model's folder in a job's cost)
LOCAL_PATH = re.compile(r"(?<![\w.])/(?:tmp|home|root|work|var|opt|srv|usr|mnt)/[^\s\"']*")
# A long text (a document, the chunk every evidence quote of it carries) is kept once,
# in the file's ``texts``, and named where it occurs: the files stay small.
LONG_TEXT = 512
TEXT_REF = "@text:"


def who_placeholder(who: str) -> str:
    return f"<{who}>"


# -- what a request is, canonically ---------------------------------------------------------

def _multipart(body: bytes, content_type: str) -> dict[str, Any]:
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    fields: dict[str, str] = {}
    files: dict[str, dict[str, Any]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition") or ""
        data = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = {"filename": filename, "size": len(data),
                           "sha256": hashlib.sha256(data).hexdigest()}
        else:
            fields[name] = data.decode("utf-8", "replace")
    return {"fields": fields, "files": files}


def request_body(body: bytes, content_type: str | None) -> dict[str, Any] | None:
    """A request body as recorded: JSON, form fields, multipart, or a digest."""
    if not body:
        return None
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind == "application/json":
        with contextlib.suppress(ValueError):
            return {"json": json.loads(body)}
    if kind == "application/x-www-form-urlencoded":
        return {"form": dict(parse_qsl(body.decode("latin-1"), keep_blank_values=True))}
    if kind == "multipart/form-data":
        return {"multipart": _multipart(body, content_type or "")}
    return {"bytes": {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}}


def scrub_request(recorded: dict[str, Any] | None, who: str) -> dict[str, Any] | None:
    """No secret, token or client id in a recorded request body."""
    if recorded is None or "form" not in recorded:
        return recorded
    form = dict(recorded["form"])
    for name in SECRET_FIELDS:
        if name in form:
            form[name] = SECRET
    for name in TOKEN_FIELDS:
        if name in form:
            form[name] = TOKEN
    if "client_id" in form:
        form["client_id"] = who_placeholder(who)
    return {"form": form}


def split_target(target: str) -> tuple[str, list[list[str]]]:
    """A request target's path (percent-decoded) and its query parameters, sorted."""
    parts = urlsplit(target)
    params = sorted([k, v] for k, v in parse_qsl(parts.query, keep_blank_values=True))
    return unquote(parts.path), params


def canonical_request(method: str, path: str, params: Iterable[Iterable[str]],
                      body: dict[str, Any] | None) -> str:
    """The key a request is matched on (tokens are never part of it)."""
    return json.dumps([method.upper(), path, sorted(list(p) for p in params), body],
                      sort_keys=True, ensure_ascii=False)


def exchange_key(exchange: Mapping[str, Any]) -> str:
    return canonical_request(exchange["method"], exchange["path"], exchange["params"],
                             exchange["request"])


# -- what an answer is -------------------------------------------------------------------------

def response_body(body: bytes, content_type: str | None) -> dict[str, Any]:
    if "json" in (content_type or ""):
        with contextlib.suppress(ValueError):
            return {"json": json.loads(body)}
    try:
        return {"text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}


def response_bytes(recorded: Mapping[str, Any]) -> bytes:
    if "json" in recorded:
        return json.dumps(recorded["json"], ensure_ascii=False).encode("utf-8")
    if "text" in recorded:
        return str(recorded["text"]).encode("utf-8")
    return base64.b64decode(recorded["base64"])


def _scrub_json(value: Any, replacements: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in TOKEN_FIELDS and item is not None:
                out[key] = TOKEN
            elif key in SECRET_FIELDS and item is not None:
                out[key] = SECRET
            else:
                out[key] = _scrub_json(item, replacements)
        return out
    if isinstance(value, list):
        return [_scrub_json(item, replacements) for item in value]
    if isinstance(value, str):
        for secret, placeholder in replacements.items():
            if secret in value:
                value = value.replace(secret, placeholder)
        return LOCAL_PATH.sub("<local path>", value)
    return value


def shelve_texts(value: Any, texts: dict[str, str]) -> Any:
    """``value`` with each long string replaced by ``@text:<digest>``, kept in ``texts``."""
    if isinstance(value, dict):
        return {key: shelve_texts(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [shelve_texts(item, texts) for item in value]
    if isinstance(value, str) and len(value) >= LONG_TEXT:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        texts[digest] = value
        return f"{TEXT_REF}{digest}"
    return value


def unshelve_texts(value: Any, texts: Mapping[str, str]) -> Any:
    """The inverse of ``shelve_texts``."""
    if isinstance(value, dict):
        return {key: unshelve_texts(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [unshelve_texts(item, texts) for item in value]
    if isinstance(value, str) and value.startswith(TEXT_REF):
        return texts[value[len(TEXT_REF):]]
    return value


# -- the recording ---------------------------------------------------------------------------

@dataclass
class Recording:
    """One scenario's exchanges, in the order their requests arrived."""

    name: str
    names: dict[str, Any] = field(default_factory=dict)
    phases: list[str] = field(default_factory=lambda: ["start"])
    exchanges: list[dict[str, Any]] = field(default_factory=list)

    def compacted(self) -> list[dict[str, Any]]:
        """Without the answers the replay would give anyway (see the module docstring)."""
        kept: list[dict[str, Any]] = []
        last: dict[tuple[str, str, str], dict[str, Any]] = {}
        for exchange in filter(None, self.exchanges):  # none for a request never answered
            slot = (exchange["phase"], exchange["who"], exchange_key(exchange))
            previous = last.get(slot)
            if previous is not None and _same_answer(previous, exchange):
                continue
            last[slot] = exchange
            kept.append(exchange)
        # a phase's only answer that the earlier phases' last one repeats
        order = {phase: i for i, phase in enumerate(self.phases)}
        by_slot: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for exchange in kept:
            by_slot.setdefault((exchange["phase"], exchange["who"], exchange_key(exchange)),
                               []).append(exchange)
        dropped: set[int] = set()
        for (phase, who, key), answers in by_slot.items():
            if len(answers) != 1:
                continue
            earlier = [by_slot[(p, who, key)][-1] for p in self.phases[:order[phase]]
                       if (p, who, key) in by_slot]
            earlier = [e for e in earlier if id(e) not in dropped]
            if earlier and _same_answer(earlier[-1], answers[0]):
                dropped.add(id(answers[0]))
        return [e for e in kept if id(e) not in dropped]

    def to_json(self) -> dict[str, Any]:
        texts: dict[str, str] = {}
        exchanges = [shelve_texts(exchange, texts) for exchange in self.compacted()]
        return {"format": FORMAT, "scenario": self.name, "names": self.names,
                "phases": self.phases, "exchanges": exchanges, "texts": texts,
                "how_to_record": "pytest -m platform against a platform (docs/platform.md)"}

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.tmp")
        scratch.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True,
                                      ensure_ascii=False) + "\n")
        scratch.replace(path)  # a replay reading it meanwhile sees one or the other
        return path


def _same_answer(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (a["status"], a["content_type"], a["response"]) == \
        (b["status"], b["content_type"], b["response"])


# -- the proxy ---------------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx uses it
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.recorder._track(self.connection, add=True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.recorder._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def _proxy(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP]
        try:
            status, out_headers, data = self.server.recorder._forward(
                self.command, self.path, headers, body)
        except httpx.HTTPError:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            self.send_response(status)
            for name, value in out_headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:  # the client hung up (a mount unmounting, the outage)
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _proxy


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    recorder: Recorder


class Recorder:
    """See the module docstring."""

    def __init__(self, upstream: str, port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.port = port
        self._http = httpx.Client(timeout=300, follow_redirects=False,
                                  limits=httpx.Limits(max_connections=32))
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._who_of_client: dict[str, str] = {}
        self._who_of_token: dict[str, str] = {}
        self._replacements: dict[str, str] = {}  # secret text -> placeholder
        self.recording: Recording | None = None
        self._phase = "start"

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> Recorder:
        """Listen (again, on the same port after ``stop``)."""
        assert self._server is None, "already running"
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.recorder = self
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="recorder", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every connection: clients get connection refused, as
        from a server that died."""
        server, self._server = self._server, None
        if server is None:
            return
        close_listener(server, self._thread, self._lock, self._connections)

    def close(self) -> None:
        self.stop()
        self._http.close()

    # -- what is recorded ------------------------------------------------------------------

    def name_client(self, client_id: str, who: str, secret: str | None = None) -> None:
        """Requests signed in with ``client_id`` are ``who``'s."""
        with self._lock:
            self._who_of_client[client_id] = who
            self._replacements[client_id] = who_placeholder(who)
            if secret:
                self._replacements[secret] = SECRET

    def begin(self, name: str, names: Mapping[str, Any] | None = None) -> Recording:
        with self._lock:
            self.recording = Recording(name, dict(names or {}))
            self._phase = "start"
            return self.recording

    def phase(self, name: str) -> None:
        with self._lock:
            assert self.recording is not None, "begin a recording first"
            assert name not in self.recording.phases, f"phase {name!r} again"
            self.recording.phases.append(name)
            self._phase = name

    def save(self, path: Path) -> Path:
        with self._lock:
            assert self.recording is not None
            recording, self.recording = self.recording, None
        return recording.save(path)

    # -- internals -----------------------------------------------------------------------

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _who(self, headers: list[tuple[str, str]], form: dict[str, Any] | None) -> str:
        if form is not None and "client_id" in form:
            return self._who_of_client.get(str(form["client_id"]), "unknown")
        for name, value in headers:
            if name.lower() == "authorization" and value.startswith("Bearer "):
                return self._who_of_token.get(value.removeprefix("Bearer "), "unknown")
        return "anonymous"

    def _forward(self, method: str, target: str, headers: list[tuple[str, str]],
                 body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        content_type = next((v for k, v in headers if k.lower() == "content-type"), None)
        recorded = request_body(body, content_type)
        path, params = split_target(target)
        with self._lock:
            form = recorded.get("form") if recorded else None
            who = self._who(headers, form)
            phase = self._phase
            recording = self.recording
            index = len(recording.exchanges) if recording is not None else -1
            if recording is not None:
                recording.exchanges.append({})  # its place in arrival order
        response = self._http.request(method, f"{self.upstream}{target}",
                                      headers=headers, content=body)
        data = response.content
        out_type = response.headers.get("content-type")
        answer = response_body(data, out_type)
        with self._lock:
            if path == TOKEN_PATH and response.status_code == 200 and "json" in answer:
                token = answer["json"].get("access_token")
                if isinstance(token, str):
                    self._who_of_token[token] = who
                    self._replacements[token] = TOKEN
            if recording is not None:
                recording.exchanges[index] = {
                    "phase": phase, "who": who, "method": method, "path": path,
                    "params": params, "request": _scrub_json(scrub_request(recorded, who),
                                                             self._replacements),
                    "status": response.status_code, "content_type": out_type,
                    "response": _scrub_json(answer, self._replacements)}
        out = [(k, v) for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP]
        return response.status_code, out, data
