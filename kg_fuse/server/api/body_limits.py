"""Request size caps: a body over its route's cap is refused with 413 before it is read
into memory, and validation errors echo at most a prefix of the hostile input."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kg_fuse.limits import (
    LOG_PREFIX_CHARS,
    MAX_BODY_BYTES,
    MAX_INGEST_BYTES,
    MULTIPART_OVERHEAD,
    shown,
)

log = logging.getLogger(__name__)

_UPLOAD_PATHS = ("/ingest", "/ingest/image")


def body_cap(path: str) -> int:
    if path in _UPLOAD_PATHS:
        return MAX_INGEST_BYTES + MULTIPART_OVERHEAD
    return MAX_BODY_BYTES


class _TooLarge(Exception):
    pass


def _too_large(cap: int) -> JSONResponse:
    return JSONResponse({"detail": f"Request body too large (limit {cap} bytes)"},
                        status_code=413)


def _declared_over(scope: Scope, cap: int) -> bool:
    """Whether the request's Content-Length says more than ``cap`` (one that is not a
    number counts as more: the body cannot be trusted to stop)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = cap + 1
            if declared > cap:
                log.info("refused a %s-byte body to %s", shown(value, 20),
                         shown(scope["path"], 100))
                return True
    return False


class BodySizeLimit:
    """ASGI middleware: 413 when Content-Length or the streamed body exceeds the cap."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = body_cap(scope["path"])
        if _declared_over(scope, cap):
            await _too_large(cap)(scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _too_large(cap)(scope, receive, send)


def _short_input(value: Any) -> Any:
    """The input echoed in a 422: a prefix of a long one, a number JSON cannot carry
    (1e309 reads as infinity; NaN) as its text, a body that is not JSON (a form, plain
    text: FastAPI echoes its bytes) as text."""
    if isinstance(value, bytes):
        value = value[:LOG_PREFIX_CHARS].decode("utf-8", "replace")
    if isinstance(value, str) and len(value) > LOG_PREFIX_CHARS:
        return value[:LOG_PREFIX_CHARS]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _short_input(v) for k, v in list(value.items())[:20]}
    if isinstance(value, list):
        return [_short_input(v) for v in value[:20]]
    return value


async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """The platform's 422 shape, with each echoed ``input`` cut to a prefix."""
    errors = []
    for error in exc.errors()[:20]:
        error = dict(error)
        if "input" in error:
            error["input"] = _short_input(error["input"])
        if "ctx" in error:
            error["ctx"] = {k: _short_input(v) for k, v in json.loads(
                json.dumps(error["ctx"], default=str)).items()}
        errors.append(error)
    return JSONResponse({"detail": errors}, status_code=422)


class ShortAccessLog(logging.Filter):
    """uvicorn's access log line holds the request's path and query string: cut it."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) \
                and len(args[2]) > LOG_PREFIX_CHARS:
            path = args[2]
            record.args = (args[0], args[1], f"{path[:LOG_PREFIX_CHARS]}... "
                           f"({len(path)} characters)", args[3], args[4])
        return True


_access_filter = ShortAccessLog()


def install(app: FastAPI) -> None:
    logging.getLogger("uvicorn.access").addFilter(_access_filter)  # once: same object
    app.add_middleware(BodySizeLimit)
    app.add_exception_handler(RequestValidationError, validation_error)
