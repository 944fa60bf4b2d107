"""``POST /auth/oauth/token``: client credentials for a bearer token, failed sign-ins
limited (:mod:`.throttle`)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool

from kg_fuse.limits import shown
from kg_fuse.server.api import auth
from kg_fuse.server.api.deps import AuthFirstRoute, SignIns, Storage, TokenTtl
from kg_fuse.server.api.schemas import TokenResponse

log = logging.getLogger(__name__)

router = APIRouter(route_class=AuthFirstRoute)

_TOKEN_FIELDS = ("grant_type", "client_id", "client_secret")


async def _refuse_what_is_no_form(request: Request) -> None:
    """A body that is no form (JSON, text) is a 422 naming the fields, as on the
    platform; no body at all is read as an empty form."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    is_form = content_type in ("application/x-www-form-urlencoded", "multipart/form-data")
    if not is_form and (content_type or await request.body()):
        raise RequestValidationError([
            {"type": "missing", "loc": ("body", name), "msg": "Field required", "input": None}
            for name in _TOKEN_FIELDS
        ])


async def _form_fields(request: Request) -> dict[str, str]:
    """The form's three fields: a field missing or empty is a 400, another grant type a
    400."""
    await _refuse_what_is_no_form(request)
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
    return {name: str(value) for name, value in values.items()}


@router.post("/auth/oauth/token", response_model=TokenResponse)
async def token(request: Request, store: Storage, sign_ins: SignIns,
                ttl: TokenTtl) -> TokenResponse:
    """Form-encoded client credentials; a JSON body is a 422 as on the platform."""
    fields = await _form_fields(request)
    client_id = fields["client_id"]
    # checked first, always: a right secret succeeds whoever failed in this id's name
    principal = await run_in_threadpool(auth.verify_client, store, client_id,
                                        fields["client_secret"])
    if principal is None:
        address = request.client.host if request.client else "unknown"
        wait = sign_ins.failed(client_id, address)
        if wait is not None:
            log.info("refused a sign-in for %s from %s: too many failed",
                     shown(client_id, 60), address)
            raise HTTPException(status_code=429, headers={"Retry-After": str(wait)}, detail=(
                f"Too many failed sign-ins for this client id or address; retry in {wait} s"))
        raise HTTPException(status_code=401, detail="Invalid client credentials")
    issued = await run_in_threadpool(auth.issue_token, store, principal, ttl)
    log.info("issued a token to %s (expires in %d s)", principal.client_id, issued.expires_in)
    return TokenResponse(access_token=issued.access_token, expires_in=issued.expires_in,
                         scope=issued.scope)
