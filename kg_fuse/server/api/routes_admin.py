"""Health, the OAuth token endpoint, and the admin threshold setting (ADR-508)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool

from kg_fuse.limits import shown
from kg_fuse.server.api import auth
from kg_fuse.server.api.deps import AuthFirstRoute, ConfigReader, ConfigWriter, Ctx, Storage
from kg_fuse.server.api.schemas import (
    HealthResponse,
    ThresholdResponse,
    ThresholdUpdate,
    ThresholdUpdateResponse,
    TokenResponse,
)
from kg_fuse.server.search import lexicon
from kg_fuse.server.threshold import presets
from kg_fuse.server.threshold.calibrate import FALLBACK_THRESHOLD, RECALIBRATE_FRACTION
from kg_fuse.server.threshold.keys import THRESHOLD_KEY

log = logging.getLogger(__name__)

router = APIRouter(route_class=AuthFirstRoute)

_TOKEN_FIELDS = ("grant_type", "client_id", "client_secret")


@router.get("/health", response_model=HealthResponse)
def health(ctx: Ctx, store: Storage) -> HealthResponse:
    graph = ctx.graph
    return HealthResponse(status="healthy" if len(graph.index) else "degraded",
                          concepts=len(graph.index), embedding_model=graph.embedder.name,
                          epoch=store.epoch(),
                          warnings=[] if lexicon.wordnet().available else [lexicon.MISSING])


@router.post("/auth/oauth/token", response_model=TokenResponse)
async def token(request: Request, ctx: Ctx, store: Storage) -> TokenResponse:
    """Form-encoded client credentials; a JSON body is a 422 as on the platform."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    is_form = content_type in ("application/x-www-form-urlencoded", "multipart/form-data")
    if not is_form and (content_type or await request.body()):
        raise RequestValidationError([
            {"type": "missing", "loc": ("body", name), "msg": "Field required", "input": None}
            for name in _TOKEN_FIELDS
        ])
    form = await request.form()
    values = {name: form.get(name) for name in _TOKEN_FIELDS}
    missing = [name for name, value in values.items() if not isinstance(value, str) or
               not value]
    if missing:
        raise HTTPException(status_code=400,
                            detail=f"Missing required form fields: {', '.join(missing)}")
    if values["grant_type"] != "client_credentials":
        raise HTTPException(status_code=400,
                            detail="Unsupported grant_type: only client_credentials")
    client_id = str(values["client_id"])
    # checked first, always: a right secret succeeds whoever failed in this id's name
    principal = await run_in_threadpool(auth.verify_client, store, client_id,
                                        str(values["client_secret"]))
    if principal is None:
        address = request.client.host if request.client else "unknown"
        wait = ctx.sign_ins.failed(client_id, address)
        if wait is not None:
            log.info("refused a sign-in for %s from %s: too many failed",
                     shown(client_id, 60), address)
            raise HTTPException(status_code=429, headers={"Retry-After": str(wait)}, detail=(
                f"Too many failed sign-ins for this client id or address; retry in {wait} s"))
        raise HTTPException(status_code=401, detail="Invalid client credentials")
    issued = await run_in_threadpool(auth.issue_token, store, principal, ctx.token_ttl)
    log.info("issued a token to %s (expires in %d s)", principal.client_id, issued.expires_in)
    return TokenResponse(access_token=issued.access_token, expires_in=issued.expires_in,
                         scope=issued.scope)


@router.get("/admin/config/search-threshold", response_model=ThresholdResponse)
def get_threshold(
    ctx: Ctx, _admin: ConfigReader
) -> ThresholdResponse:
    graph = ctx.graph
    prov = graph.threshold.provenance()
    source = prov.get("source", "fallback")
    return ThresholdResponse(
        key=THRESHOLD_KEY, threshold=graph.threshold.stored(), fallback=FALLBACK_THRESHOLD,
        source=source, concept_count=prov.get("concept_count"),
        calibrated_at=prov.get("calibrated_at"), noise_floor=prov.get("noise_floor"),
        set_by=prov.get("set_by"), set_at=prov.get("set_at"),
        recalibrates_after_change=RECALIBRATE_FRACTION if source == "calibrated" else None,
        presets=graph.threshold.presets(), preset_rule=presets.RULE)


@router.put("/admin/config/search-threshold", response_model=ThresholdUpdateResponse)
def put_threshold(
    body: ThresholdUpdate, ctx: Ctx,
    admin: ConfigWriter,
) -> ThresholdUpdateResponse:
    ctx.graph.threshold.set(body.threshold, provenance={
        "source": "administrator", "set_by": admin.client_id,
        "set_at": datetime.now(UTC).isoformat(timespec="seconds")})
    log.info("%s set %s to %s", admin.client_id, THRESHOLD_KEY, body.threshold)
    return ThresholdUpdateResponse(key=THRESHOLD_KEY, threshold=body.threshold)
