"""Mapping every failure inside a handler to an errno, so no exception kills the mount."""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import pyfuse3
import trio

from kg_fuse.client.errors import KgError
from kg_fuse.fs.control import ContentTooLarge
from kg_fuse.fs.names import InvalidName, NameTooLong
from kg_fuse.fs.service import QueryExists, QueryNotEmpty, QueryNotFound
from kg_fuse.fs.threshold import InvalidThreshold

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def fuse_error(exc: BaseException) -> pyfuse3.FUSEError | None:
    """The errno reply for a known domain error, or None for an unexpected one."""
    if isinstance(exc, pyfuse3.FUSEError):
        return exc
    if isinstance(exc, KgError):
        log.warning("server request failed: %s", exc)
        return pyfuse3.FUSEError(exc.errno)
    if isinstance(exc, NameTooLong):
        log.info("rejected: %s", exc)
        return pyfuse3.FUSEError(errno.ENAMETOOLONG)
    if isinstance(exc, ContentTooLarge):
        log.info("rejected: %s", exc)
        return pyfuse3.FUSEError(errno.EFBIG)
    if isinstance(exc, InvalidName | InvalidThreshold):
        log.info("rejected: %s", exc)
        return pyfuse3.FUSEError(errno.EINVAL)
    if isinstance(exc, QueryExists):
        return pyfuse3.FUSEError(errno.EEXIST)
    if isinstance(exc, QueryNotEmpty):
        return pyfuse3.FUSEError(errno.ENOTEMPTY)
    if isinstance(exc, QueryNotFound):
        return pyfuse3.FUSEError(errno.ENOENT)
    if isinstance(exc, trio.TooSlowError):
        log.warning("operation timed out")
        return pyfuse3.FUSEError(errno.ETIMEDOUT)
    return None


def handler(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap a FUSE handler: domain errors become errnos, anything unexpected is logged
    with its traceback and answered with EIO. Cancellation passes through."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except (trio.Cancelled, KeyboardInterrupt):
            raise
        except Exception as exc:
            mapped = fuse_error(exc)
            if mapped is None:
                log.exception("unexpected error in %s", fn.__name__)
                raise pyfuse3.FUSEError(errno.EIO) from None
            raise mapped from None

    return wrapper
