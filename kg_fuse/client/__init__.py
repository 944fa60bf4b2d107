"""HTTP client of the knowledge-graph platform API (the subset kg-fuse uses)."""

from kg_fuse.client.api import KgApiClient, SearchRequest, SearchResponse
from kg_fuse.client.credentials import Credentials, resolve_connection
from kg_fuse.client.errors import KgError

__all__ = [
    "Credentials",
    "KgApiClient",
    "KgError",
    "SearchRequest",
    "SearchResponse",
    "resolve_connection",
]
