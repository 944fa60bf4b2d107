"""Async client of the knowledge-graph API, with deadlines and a token auth flow.

Every call runs under its own deadline (``trio.fail_after``) so a stalled server turns
into ``ServerTimeout`` instead of a hung shell. Failures are raised as ``KgError``
subclasses; nothing else escapes.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import trio

from kg_fuse.client import errors
from kg_fuse.client.credentials import Credentials
from kg_fuse.client.models import (
    CatalogNode,
    CatalogPage,
    ConceptDetail,
    DocumentContent,
    IngestReceipt,
    JobStatus,
    SearchResponse,
    finite_number,
    threshold_presets,
)

log = logging.getLogger(__name__)

PAGE_SIZE_MAX = 100
# A deletion the server works on for minutes (a large ontology) is waited for as long as
# the server answers a look every deadline, up to this; it fails once this many looks in
# a row went unanswered (a stalled or stopped server), in bounded time.
LONG_CALL_LIMIT = 600.0
UNANSWERED_LOOKS = 2
NOT_ANSWERING = (errors.ServerTimeout, errors.ServerUnreachable)
TOKEN_REFRESH_MARGIN = 60.0
TOKEN_PATH = "/auth/oauth/token"
SERVER_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")  # what a reported identity may be
POOL_SIZE = 16  # connections to the server at most, all kept alive


@dataclass(frozen=True)
class SearchRequest:
    """A search; ``min_similarity=None`` omits the field so the server default applies."""

    query: str
    limit: int = 50
    min_similarity: float | None = None
    offset: int = 0
    ontology: str | None = None
    lean: bool = False  # skip the optional enrichments (grounding, evidence, diversity)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"query": self.query, "limit": self.limit, "offset": self.offset}
        if self.lean:
            body |= {"include_evidence": False, "include_grounding": False,
                     "include_diversity": False}
        if self.min_similarity is not None:
            body["min_similarity"] = self.min_similarity
        if self.ontology is not None:
            body["ontology"] = self.ontology
        return body


@dataclass(frozen=True)
class Epoch:
    """The server's content epoch, and the search default with its presets where the
    server publishes them beside it (ours does; the platform does not: None), and the
    server's identity where it reports one (ours does; the platform does not: None)."""

    epoch: int
    default_threshold: float | None = None
    threshold_presets: dict[str, float] | None = None
    server_id: str | None = None


def path_segment(value: str) -> str:
    """Percent-encode one path segment built from user data (``/``, ``?``, ``#``, ``%``...)."""
    return quote(value, safe="")


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text[:200]
    return detail if isinstance(detail, str) else json.dumps(detail)[:300]


_STATUS_ERRORS: dict[int, type[errors.KgError]] = {
    400: errors.InvalidRequest,
    401: errors.AuthenticationFailed,
    403: errors.PermissionDenied,
    404: errors.NotFound,
    409: errors.Conflict,
    422: errors.InvalidRequest,
    429: errors.TooManyRequests,
}


class KgApiClient:
    """One authenticated HTTP session with the API."""

    def __init__(
        self,
        api_url: str,
        credentials: Credentials,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        reread_credentials: Callable[[], Credentials | None] | None = None,
    ) -> None:
        """``transport`` replaces the network: ``httpx.ASGITransport(app)`` runs the real
        server in-process (the kernel-free tests); None opens real connections.
        ``reread_credentials`` looks for newer credentials when the server refuses ours
        (``Connection.reread``)."""
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        # Whether the server applies a search's ``ontology`` as the contract means it,
        # learned from its first scoped answer (``kg_fuse.listing.execute``); None: not
        # asked yet.
        self.scopes: bool | None = None
        self._http = httpx.AsyncClient(
            auth=TokenAuth(f"{self.api_url}{TOKEN_PATH}", credentials, reread_credentials),
            base_url=self.api_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 2.0)),
            # a bounded pool of kept-alive connections: concept details go in parallel
            limits=httpx.Limits(max_connections=POOL_SIZE,
                                max_keepalive_connections=POOL_SIZE),
            follow_redirects=False,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- public calls ------------------------------------------------------------------

    async def search(self, request: SearchRequest, timeout: float | None = None) -> SearchResponse:
        raw = await self._call("POST", "/query/search", json=request.body(), timeout=timeout)
        return SearchResponse.parse(raw, request.limit)

    async def concept(self, concept_id: str, timeout: float | None = None) -> ConceptDetail:
        raw = await self._call(
            "GET", f"/query/concept/{path_segment(concept_id)}", timeout=timeout
        )
        return ConceptDetail.parse(raw)

    async def epoch(self, timeout: float | None = None) -> Epoch:
        raw = await self._call("GET", "/database/epoch", timeout=timeout)
        if not isinstance(raw, dict) or not isinstance(raw.get("epoch"), int):
            raise errors.ServerFault("epoch response has no integer 'epoch'", method="GET",
                                     path="/database/epoch", status=200)
        default = raw.get("default_threshold")  # extra fields: ignored when malformed
        usable = isinstance(default, int | float) and not isinstance(default, bool) \
            and 0.0 <= default <= 1.0
        return Epoch(raw["epoch"], float(default) if usable else None,
                     threshold_presets(raw.get("threshold_presets")),
                     _server_id(raw.get("server_id")))

    async def admin_default_threshold(
        self, timeout: float | None = None
    ) -> tuple[float | None, dict[str, float] | None]:
        """The configured default (None when never set) and the presets the server
        publishes with it (None when it does not). Raises PermissionDenied for users."""
        raw = await self._call("GET", "/admin/config/search-threshold", timeout=timeout)
        body = raw if isinstance(raw, dict) else {}
        presets = threshold_presets(body.get("presets"))
        value = body.get("threshold")
        if value is None:
            fallback = body.get("fallback")
            return (float(fallback) if isinstance(fallback, int | float) else None), presets
        return finite_number(value, "admin threshold"), presets

    async def catalog_page(
        self, parent: str | None = None, limit: int = 1000, offset: int = 0
    ) -> CatalogPage:
        """One page of ontologies (``parent`` None) or of one ontology's documents."""
        params: dict[str, Any] = {"limit": limit, "offset": offset, "sort": "name"}
        if parent is not None:
            params |= {"parent": parent, "parent_kind": "ontology"}
        return CatalogPage.parse(await self._call("GET", "/catalog/children", params=params))

    async def catalog_all(self, parent: str | None = None) -> list[CatalogNode]:
        """Every child, paging with ``offset`` until ``total`` is reached."""
        nodes: list[CatalogNode] = []
        while True:
            page = await self.catalog_page(parent, offset=len(nodes))
            nodes.extend(page.nodes)
            if not page.nodes or len(nodes) >= page.total:
                return nodes

    async def create_ontology(self, name: str) -> None:
        await self._call("POST", "/ontology/", json={"name": name, "description": ""})

    async def delete_ontology(self, name: str) -> None:
        """Deleting a large ontology takes the server a while: a long call."""
        await self._long_call("DELETE", f"/ontology/{path_segment(name)}")

    async def document_content(self, document_id: str) -> bytes:
        """The original document: its text, or the image's bytes."""
        raw = await self._call("GET", f"/documents/{path_segment(document_id)}/content")
        return DocumentContent.parse(raw)

    async def delete_document(self, document_id: str) -> None:
        await self._long_call("DELETE", f"/documents/{path_segment(document_id)}")

    async def ingest(self, ontology: str, filename: str, data: bytes,
                     image: bool = False) -> IngestReceipt:
        """Upload a document (``image``: to ``/ingest/image``, which describes it with a
        vision model on the platform)."""
        raw = await self._call(
            "POST", "/ingest/image" if image else "/ingest",
            data={"ontology": ontology, "filename": filename, "auto_approve": "true"},
            files={"file": (filename, data, "application/octet-stream")},
        )
        return IngestReceipt.parse(raw)

    async def job(self, job_id: str) -> JobStatus:
        return JobStatus.parse(await self._call("GET", f"/jobs/{path_segment(job_id)}"))

    # -- plumbing ------------------------------------------------------------------------

    async def _call(
        self, method: str, path: str, *, timeout: float | None = None, **request: Any
    ) -> Any:
        """One API call under one deadline; ``request`` goes to httpx (json, params, ...)."""
        deadline = timeout if timeout is not None else self.timeout
        try:
            if deadline > self.timeout:  # httpx's own timeouts must not cut it short
                request["timeout"] = httpx.Timeout(deadline, connect=min(self.timeout, 2.0))
            with trio.fail_after(deadline):
                response = await self._send(method, path, request)
        except trio.TooSlowError:
            raise errors.ServerTimeout(f"{method} {path}: no answer within {deadline:g}s",
                                       method=method, path=path) from None
        return _decode(method, path, response)

    async def _long_call(self, method: str, path: str, **request: Any) -> Any:
        """A call the server may work on for longer than a deadline: it is waited for
        as long as the server answers a cheap look (``GET /database/epoch``) every
        deadline, so a slow deletion returns when it is done, never as a timeout; it
        times out once ``UNANSWERED_LOOKS`` looks in a row go unanswered (the server
        stalled), or after ``LONG_CALL_LIMIT``."""
        answer: list[Any] = []

        async def call(scope: trio.CancelScope) -> None:
            answer.append(await self._call(method, path, timeout=LONG_CALL_LIMIT,
                                           **request))
            scope.cancel()  # done: the looks stop

        with errors.one_failure():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, nursery.cancel_scope)
                await self._while_answering(method, path)
        return answer[0]

    async def _while_answering(self, method: str, path: str) -> None:
        """Look at the server every deadline; raise ``ServerTimeout`` (for the call
        ``method path``) when it leaves ``UNANSWERED_LOOKS`` looks in a row unanswered.
        Any answer, an error status too, says it is there and working."""
        unanswered = 0
        while True:
            await trio.sleep(self.timeout)
            try:
                await self.epoch()
            except NOT_ANSWERING as exc:
                unanswered += 1
                log.info("%s %s still running; the server did not answer a look: %s",
                         method, path, exc)
                if unanswered >= UNANSWERED_LOOKS:
                    raise errors.ServerTimeout(
                        f"{method} {path}: no answer, and the server stopped answering "
                        f"{unanswered} looks in a row", method=method, path=path) from None
                continue
            except errors.KgError:
                pass  # an answer, an error status too
            unanswered = 0

    async def _send(self, method: str, path: str, request: dict[str, Any]) -> httpx.Response:
        try:
            return await self._http.request(method, path, **request)
        except httpx.TimeoutException as exc:
            raise errors.ServerTimeout(f"{method} {path}: {type(exc).__name__}",
                                       method=method, path=path) from None
        except httpx.HTTPError as exc:
            raise errors.ServerUnreachable(f"{method} {path}: {exc!r}",
                                           method=method, path=path) from None


def _server_id(value: Any) -> str | None:
    """A reported identity, if it is one (a short token); anything else is ignored."""
    if isinstance(value, str) and SERVER_ID.fullmatch(value):
        return value
    return None


def _decode(method: str, path: str, response: httpx.Response) -> Any:
    status = response.status_code
    where = {"method": method, "path": path, "status": status}
    if status >= 400:
        kind = errors.ServerFault if status >= 500 else _STATUS_ERRORS.get(status,
                                                                           errors.ServerFault)
        raise kind(f"{method} {path}: HTTP {status}: {_detail(response)}", **where)
    if status != 200 and status != 201:
        raise errors.ServerFault(f"{method} {path}: unexpected HTTP {status}", **where)
    try:
        return response.json()
    except ValueError:
        raise errors.ServerFault(f"{method} {path}: body is not JSON", **where) from None


class TokenAuth(httpx.Auth):
    """OAuth client credentials as an httpx auth flow: a cached bearer token, fetched when
    missing or about to expire, and fetched again once when the server rejects it (401).
    When the server refuses the client itself (its credentials were rotated or revoked),
    ``reread`` is asked for newer ones, such as a rewritten credentials file: a mount
    carries on with them instead of failing until it is restarted."""

    def __init__(self, token_url: str, credentials: Credentials,
                 reread: Callable[[], Credentials | None] | None = None) -> None:
        self._token_url = token_url
        self._credentials = credentials
        self._reread = reread
        self._token: str | None = None
        self._expires = 0.0
        self._lock = trio.Lock()

    def _fresh(self) -> bool:
        return self._token is not None and trio.current_time() < self._expires

    def _token_request(self) -> httpx.Request:
        return httpx.Request("POST", self._token_url, data={
            "grant_type": "client_credentials",
            "client_id": self._credentials.client_id,
            "client_secret": self._credentials.client_secret,
        })

    async def _newer_credentials(self) -> bool:
        """Whether ``reread`` found other credentials than the refused ones (now used)."""
        if self._reread is None:
            return False
        found = await trio.to_thread.run_sync(self._reread)
        if found is None or found == self._credentials:
            return False
        log.info("client %s was refused; using client %s from %s",
                 self._credentials.client_id, found.client_id, found.source)
        self._credentials = found
        return True

    def _store(self, response: httpx.Response) -> str:
        if response.status_code in (400, 401, 422):
            held = self._credentials
            why = "" if self._reread is None else (
                f" (revoked or replaced, and {held.source} holds no newer credentials)")
            raise errors.AuthenticationFailed(
                f"client {held.client_id!r} rejected: {_detail(response)}{why}",
                method="POST", path=TOKEN_PATH, status=response.status_code)
        body = _decode("POST", TOKEN_PATH, response)
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise errors.ServerFault("token response has no access_token", method="POST",
                                     path=TOKEN_PATH, status=response.status_code)
        expires_in = body.get("expires_in")
        lifetime = float(expires_in) if isinstance(expires_in, int | float) else 300.0
        self._token = token
        self._expires = trio.current_time() + lifetime - min(TOKEN_REFRESH_MARGIN,
                                                             lifetime / 10)
        return token

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await request.aread()  # a rejected upload is sent again
        refused: str | None = None  # the token the server rejected, if it did
        while True:
            async with self._lock:  # one token request at a time; the others wait for it
                if not self._fresh() or (refused is not None and self._token == refused):
                    answer = yield self._token_request()
                    await answer.aread()
                    if answer.status_code == 401 and await self._newer_credentials():
                        answer = yield self._token_request()
                        await answer.aread()
                    self._store(answer)
                token = self._token
            request.headers["Authorization"] = f"Bearer {token}"
            response = yield request
            if response.status_code != 401 or refused is not None:
                return
            log.info("token rejected on %s %s; authenticating again", request.method,
                     request.url.path)
            refused = token
