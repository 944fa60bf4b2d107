"""The FastAPI application factory of the embedded server."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from kg_fuse import version
from kg_fuse.server.api import (
    body_limits,
    routes_admin,
    routes_auth,
    routes_catalog,
    routes_documents,
    routes_health,
    routes_ingest,
    routes_ontology,
    routes_query,
)
from kg_fuse.server.api.deps import AppContext
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.knowledge.jobs import JobRunner
from kg_fuse.server.storage.reads import NotFound

log = logging.getLogger(__name__)


async def _not_found(_request: Request, exc: Exception) -> JSONResponse:
    """A storage read that found nothing: 404 with the contract's detail."""
    return JSONResponse(status_code=404, content={"detail": str(exc)})


def create_app(graph: KnowledgeGraph, token_ttl: int) -> FastAPI:
    """An app serving ``graph``; exact paths only (the contract forbids redirects).

    Its lifespan owns the ingestion worker: run the app under a server that runs the
    lifespan (uvicorn does; in-process, enter ``app.router.lifespan_context(app)``).
    """
    # the composition root: the one place the graph's parts meet the routes
    jobs = JobRunner(graph.changes, graph.store)
    jobs.settle_interrupted()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with jobs.running():
            yield

    app = FastAPI(title="kg-fuse embedded knowledge-graph server", version=version(),
                  redirect_slashes=False, lifespan=lifespan)
    app.state.ctx = AppContext(store=graph.store, search=graph.search,
                               threshold=graph.threshold, changes=graph.changes, jobs=jobs,
                               token_ttl=token_ttl)
    body_limits.install(app)
    app.add_exception_handler(NotFound, _not_found)
    for module in (routes_health, routes_auth, routes_admin, routes_catalog,
                   routes_ontology, routes_documents, routes_ingest, routes_query):
        app.include_router(module.router)
    return app
