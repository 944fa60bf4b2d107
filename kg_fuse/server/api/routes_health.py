"""``GET /health``: whether the server has concepts to search, its model, its epoch, and
what it lacks that makes its searches worse. No sign-in."""

from __future__ import annotations

from fastapi import APIRouter

from kg_fuse.server.api.deps import AuthFirstRoute, Search, Storage
from kg_fuse.server.api.schemas import HealthResponse

router = APIRouter(route_class=AuthFirstRoute)


@router.get("/health", response_model=HealthResponse)
def health(search: Search, store: Storage) -> HealthResponse:
    status = search.status()
    return HealthResponse(status="healthy" if status.concepts else "degraded",
                          concepts=status.concepts, embedding_model=status.model,
                          model_grade=status.model_grade, epoch=store.epoch(),
                          warnings=status.warnings)
