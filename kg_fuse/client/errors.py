"""Domain errors of the API client, each carrying the errno the filesystem answers with.

One hierarchy, so the FUSE layer maps every failure with a single ``except KgError``.
"""

from __future__ import annotations

import errno


class KgError(Exception):
    """Any failure talking to the knowledge-graph API."""

    errno: int = errno.EIO


class ServerUnreachable(KgError):
    """Connection refused, reset or DNS failure: the server is down or not there."""

    errno = errno.ECONNREFUSED


class ServerTimeout(KgError):
    """The server did not answer within the call's deadline."""

    errno = errno.ETIMEDOUT


class ServerFault(KgError):
    """A 5xx answer, or a body that is not the JSON shape the contract promises."""

    errno = errno.EIO


class AuthenticationFailed(KgError):
    """Credentials rejected (401), even after fetching a fresh token."""

    errno = errno.EACCES


class PermissionDenied(KgError):
    """The client is authenticated but lacks the permission (403)."""

    errno = errno.EACCES


class NotFound(KgError):
    """The server has no such object (404)."""

    errno = errno.ENOENT


class Conflict(KgError):
    """The object already exists (409)."""

    errno = errno.EEXIST


class InvalidRequest(KgError):
    """The server rejected our request as invalid (400/422)."""

    errno = errno.EINVAL


class MissingCredentials(KgError):
    """No client credentials were found anywhere we look."""

    errno = errno.EACCES
