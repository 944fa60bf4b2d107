"""``/admin/config/search-threshold``: the default search threshold (ADR-508), read with
where it came from and its presets, and set by an administrator."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from kg_fuse.server.api.deps import AuthFirstRoute, ConfigReader, ConfigWriter, Threshold
from kg_fuse.server.api.schemas import (
    ThresholdResponse,
    ThresholdUpdate,
    ThresholdUpdateResponse,
)
from kg_fuse.server.threshold.keys import THRESHOLD_KEY

router = APIRouter(route_class=AuthFirstRoute)


@router.get("/admin/config/search-threshold", response_model=ThresholdResponse)
def get_threshold(threshold: Threshold, _admin: ConfigReader) -> ThresholdResponse:
    return ThresholdResponse(**asdict(threshold.report()))


@router.put("/admin/config/search-threshold", response_model=ThresholdUpdateResponse)
def put_threshold(body: ThresholdUpdate, threshold: Threshold,
                  admin: ConfigWriter) -> ThresholdUpdateResponse:
    threshold.set_by_administrator(body.threshold, admin.client_id)
    return ThresholdUpdateResponse(key=THRESHOLD_KEY, threshold=body.threshold)
