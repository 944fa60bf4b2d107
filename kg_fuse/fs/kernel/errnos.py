"""The filesystem's one error convention: typed domain errors, and the only place that
knows their errnos.

Domain modules raise the errors below (or the client's ``KgError`` family); ``handler``
wraps every FUSE handler and answers each with its errno from ``ERRNOS``, so nothing
else needs to know an errno and no exception kills the mount.
"""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import pyfuse3
import trio

from kg_fuse.client import errors as client
from kg_fuse.listing.thresholds import InvalidThreshold

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


class FsError(Exception):
    """A request the filesystem refuses, for a reason the user can act on."""


class NoEntry(FsError):
    """No such file, directory, query, handle target or ingest file."""


class Exists(FsError):
    """The name is taken."""


class NotPermitted(FsError):
    """The operation has no meaning here (``mkdir`` in ``documents/``, ``mkfifo``...)."""


class ReadOnly(FsError):
    """A generated file cannot be written."""


class Invalid(FsError, ValueError):
    """Content or a name that is not valid here; the old value stays."""


class InvalidName(Invalid):
    """A name the filesystem cannot accept."""


class NameTooLong(InvalidName):
    """A name over 255 bytes in UTF-8: other tools could not copy it."""


class TooLarge(FsError, ValueError):
    """More bytes than the file may hold, refused before any parsing."""


class NoSpace(FsError):
    """The in-memory room for scratch or pending files is used up."""


class Busy(FsError):
    """The object is in use (an ingestion job still running)."""


class IsDirectory(FsError):
    pass


class NotDirectory(FsError):
    pass


class NotEmpty(FsError):
    """A directory that holds something: a query with nested queries (``rmdir``), any
    query or directory a query would be renamed onto."""


class TryAgain(FsError):
    """Not now: what the request needs is not known yet (which server's queries these
    are, while no server has answered)."""


class BadHandle(FsError):
    """A file handle that is not open (or not open for this)."""


class Empty(FsError):
    """Nothing was written where the content is the point: an empty file in ``ingest/``
    has nothing to ingest."""


class NoAttribute(FsError):
    """No such extended attribute."""


class NotSupported(FsError):
    """An extended-attribute namespace this filesystem does not serve."""


# The most specific class in an error's MRO decides its errno.
ERRNOS: dict[type[BaseException], int] = {
    NoEntry: errno.ENOENT,
    Exists: errno.EEXIST,
    NotPermitted: errno.EPERM,
    ReadOnly: errno.EACCES,
    Invalid: errno.EINVAL,
    InvalidThreshold: errno.EINVAL,
    NameTooLong: errno.ENAMETOOLONG,
    TooLarge: errno.EFBIG,
    NoSpace: errno.ENOSPC,
    Busy: errno.EBUSY,
    IsDirectory: errno.EISDIR,
    NotDirectory: errno.ENOTDIR,
    NotEmpty: errno.ENOTEMPTY,
    TryAgain: errno.EAGAIN,
    BadHandle: errno.EBADF,
    Empty: errno.ENODATA,
    NoAttribute: errno.ENODATA,
    NotSupported: errno.EOPNOTSUPP,
    client.KgError: errno.EIO,
    client.ServerUnreachable: errno.ECONNREFUSED,
    client.ServerTimeout: errno.ETIMEDOUT,
    client.ServerFault: errno.EIO,
    client.AuthenticationFailed: errno.EACCES,
    client.PermissionDenied: errno.EACCES,
    client.NotFound: errno.ENOENT,
    client.Conflict: errno.EEXIST,
    client.InvalidRequest: errno.EINVAL,
    client.TooManyRequests: errno.EAGAIN,
    client.MissingCredentials: errno.EACCES,
    trio.TooSlowError: errno.ETIMEDOUT,
}


def errno_of(exc: BaseException) -> int | None:
    """The errno a known error is answered with; None for an unexpected one."""
    if isinstance(exc, pyfuse3.FUSEError):
        return exc.errno
    for cls in type(exc).__mro__:
        code = ERRNOS.get(cls)
        if code is not None:
            return code
    return None


def fuse_error(exc: BaseException) -> pyfuse3.FUSEError | None:
    """The errno reply for a known error (logged as the user would want it), or None."""
    code = errno_of(exc)
    if code is None:
        return None
    if isinstance(exc, client.KgError):
        log.warning("server request failed: %s", exc)
    elif isinstance(exc, trio.TooSlowError):
        log.warning("operation timed out")
    elif isinstance(exc, Invalid | InvalidThreshold | TooLarge):
        log.info("rejected: %s", exc)
    return exc if isinstance(exc, pyfuse3.FUSEError) else pyfuse3.FUSEError(code)


def handler(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap a FUSE handler: known errors become errnos, anything unexpected is logged
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
