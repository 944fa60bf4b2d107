"""The FastAPI application factory of the embedded server."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI

from kg_fuse.server import (
    limits,
    routes_admin,
    routes_catalog,
    routes_documents,
    routes_ingest,
    routes_query,
)
from kg_fuse.server.deps import AppContext
from kg_fuse.server.jobs import JobRunner
from kg_fuse.server.service import KnowledgeGraph

log = logging.getLogger(__name__)


def _version() -> str:
    try:
        return version("kg-fuse")
    except PackageNotFoundError:
        return "0+unknown"


def create_app(graph: KnowledgeGraph, token_ttl: int) -> FastAPI:
    """An app serving ``graph``; exact paths only (the contract forbids redirects)."""
    app = FastAPI(title="kg-fuse embedded knowledge-graph server", version=_version(),
                  redirect_slashes=False)
    ctx = AppContext(graph=graph, token_ttl=token_ttl)
    ctx.jobs = JobRunner(graph)
    ctx.jobs.fail_interrupted()
    app.state.ctx = ctx
    limits.install(app)
    for module in (routes_admin, routes_catalog, routes_documents, routes_ingest,
                   routes_query):
        app.include_router(module.router)
    return app
