"""Request dependencies, declared once: each part of the server a route works with, and
bearer-token auth.

Route modules import the ``Annotated`` aliases at the bottom rather than spelling out
``Depends`` themselves. Each part is its own dependency, and the only way a route
reaches it: ``Storage`` (the store's rows: reads, clients and tokens), ``Search``
(search requests answered, the index's status), ``Threshold`` (the default, its
provenance and presets), ``Changes`` (content added and removed), ``Jobs`` (the ingest
queue), ``SignIns`` and ``TokenTtl`` (the token endpoint's limit and lifetime). The
knowledge graph that made them is no route's business (``create_app`` hands its parts
to the :class:`AppContext`).

The contract orders checks 401, then 403, then 422. FastAPI parses a JSON body before
it solves dependencies, so a malformed body would answer 422 before auth ran;
:class:`AuthFirstRoute` therefore runs the route's :class:`Require` guards before the
body is touched. The guards stay declared as ordinary dependencies too, so handlers
receive the :class:`~kg_fuse.server.api.auth.Principal` and the OpenAPI schema shows them.

Dependencies that do no I/O are ``async def``: FastAPI runs a plain ``def`` one in a
worker thread, and those hops (four per search) cost a search more than the work. Only
the token's lookup in the store, once per request, runs in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, File, Form, HTTPException, Request, Response, UploadFile
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from kg_fuse.limits import MAX_NAME_CHARS
from kg_fuse.server.api import auth
from kg_fuse.server.api.auth import Principal
from kg_fuse.server.api.throttle import SignInLimit
from kg_fuse.server.knowledge.changes import ContentChanges
from kg_fuse.server.knowledge.jobs import JobRunner
from kg_fuse.server.knowledge.search_service import SearchService
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold.default import DefaultThreshold

log = logging.getLogger(__name__)


@dataclass
class AppContext:
    """The parts the routes' dependencies hand out; lives on ``app.state.ctx``."""

    store: Store
    search: SearchService
    threshold: DefaultThreshold
    changes: ContentChanges
    jobs: JobRunner
    token_ttl: int
    sign_ins: SignInLimit = field(default_factory=SignInLimit)


def _context(request: Request) -> AppContext:
    return request.app.state.ctx


def _part(name: str) -> Callable[[Request], Coroutine[Any, Any, Any]]:
    """The dependency that hands a route the context's part ``name``."""
    async def part(request: Request) -> Any:
        return getattr(_context(request), name)

    part.__name__ = f"get_{name}"
    return part


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail,
                         headers={"WWW-Authenticate": "Bearer"})


def authenticate(request: Request) -> Principal:
    """The caller's principal, or 401 (cached on the request). Blocking: it reads the
    store."""
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("Not authenticated")
    principal = auth.principal_for_token(_context(request).store, token.strip())
    if principal is None:
        raise _unauthorized("Could not validate credentials")
    request.state.principal = principal
    return principal


class Require:
    """Dependency: an authenticated caller, optionally with an admin permission."""

    def __init__(self, action: str | None = None, resource: str | None = None) -> None:
        self.action = action
        self.resource = resource

    async def __call__(self, request: Request) -> Principal:
        """The principal cached on the request (the guard's second run, as a dependency,
        costs no thread); else the token looked up in a worker thread."""
        principal = getattr(request.state, "principal", None)
        if principal is None:
            principal = await run_in_threadpool(authenticate, request)
        if self.resource is not None and not principal.is_admin:
            raise HTTPException(status_code=403,
                                detail=f"Permission denied: {self.action} on {self.resource}")
        return principal


class AuthFirstRoute(APIRoute):
    """Runs the route's :class:`Require` guards before the request body is parsed."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        guards = [d.call for d in self.dependant.dependencies if isinstance(d.call, Require)]
        if not guards:
            return handler

        async def guarded(request: Request) -> Response:
            for guard in guards:
                await guard(request)
            return await handler(request)

        return guarded


require_user = Require()


@dataclass
class UploadForm:
    """The multipart form of an upload, text or image, as the platform declares it."""

    file: Annotated[UploadFile, File()]
    ontology: Annotated[str, Form(min_length=1, max_length=MAX_NAME_CHARS)]
    filename: Annotated[str | None, Form(max_length=MAX_NAME_CHARS)] = None
    force: Annotated[bool, Form()] = False
    auto_approve: Annotated[bool, Form()] = False


Storage = Annotated[Store, Depends(_part("store"))]
Search = Annotated[SearchService, Depends(_part("search"))]
Threshold = Annotated[DefaultThreshold, Depends(_part("threshold"))]
Changes = Annotated[ContentChanges, Depends(_part("changes"))]
Jobs = Annotated[JobRunner, Depends(_part("jobs"))]
SignIns = Annotated[SignInLimit, Depends(_part("sign_ins"))]
TokenTtl = Annotated[int, Depends(_part("token_ttl"))]
User = Annotated[Principal, Depends(require_user)]
ConfigReader = Annotated[Principal, Depends(Require("read", "search_config"))]
ConfigWriter = Annotated[Principal, Depends(Require("write", "search_config"))]
Upload = Annotated[UploadForm, Depends()]
