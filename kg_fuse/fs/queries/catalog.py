"""What the server knows: its ontologies and their documents, cached until the epoch
changes. Document contents are cached by id: ids are content hashes, so never stale.

Every server name appears under a valid, unique file name that it keeps for the life of
the mount (an ontology named ``a/b`` is listed as ``a∕b``); the catalog maps file names
back to the server's names for every call that needs them.

A change of the server's content drops what is held, but keeps it as a fallback: while
the server is down or failing, the ontologies and documents last listed are served, as
query listings are (``results.py``)."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.errors import RETRIED
from kg_fuse.client.models import CatalogNode
from kg_fuse.fs.kernel.names import NameRegistry, valid_file_name

log = logging.getLogger(__name__)

CONTENT_CONCURRENCY = 8
CONTENT_CACHE_BYTES = 64 * 1024 * 1024


def ontology_file_name(name: str, disambiguator: str = "") -> str:
    """An ontology's name as a valid directory name; a twin gets ``name ~id``."""
    return valid_file_name(f"{name} ~{disambiguator}" if disambiguator else name)


def document_file_name(name: str, disambiguator: str = "") -> str:
    """A document's own name as a valid file name; a twin gets ``stem ~id.ext``."""
    stem, ext = os.path.splitext(name.replace("/", "∕"))
    if disambiguator:
        return valid_file_name(f"{stem} ~{disambiguator}", ext)
    return valid_file_name(stem, ext)


@dataclass(frozen=True)
class DocumentEntry:
    file_name: str
    document_id: str
    mtime_ns: int  # when the server stored it, or (if it does not say) when we first saw it
    warnings: tuple[str, ...] = ()  # its status: near-duplicate sections, say


class Catalog:
    def __init__(self, client: KgApiClient) -> None:
        self._client = client
        self._ontologies: dict[str, CatalogNode] | None = None  # by file name
        self._ontology_names = NameRegistry(ontology_file_name)
        self._documents: dict[str, dict[str, DocumentEntry]] = {}
        # what was held when the content changed: served while the server cannot answer
        self._last_ontologies: dict[str, CatalogNode] | None = None
        self._last_documents: dict[str, dict[str, DocumentEntry]] = {}
        self._serving_stale = False  # the last look at the catalog fell back to these
        self._names: dict[str, NameRegistry] = {}
        self._content: dict[str, bytes] = {}
        self._content_bytes = 0
        self._first_seen: dict[str, int] = {}
        self._lock = trio.Lock()

    def invalidate(self) -> None:
        """The server's content changed: what is held becomes the fallback."""
        if self._ontologies is not None:
            self._last_ontologies = self._ontologies
        self._last_documents |= self._documents
        self._ontologies = None
        self._documents = {}

    async def ontologies(self) -> dict[str, CatalogNode]:
        """Every ontology by file name (all pages of the catalog); the last ones listed
        while the server is down or failing."""
        if self._ontologies is None:
            async with self._lock:
                if self._ontologies is None:
                    try:
                        nodes = await self._client.catalog_all()
                    except RETRIED as exc:
                        if self._last_ontologies is None:
                            raise
                        self._serving_last(exc)
                        return self._last_ontologies
                    self._ontologies = {self._ontology_names.name_for(n.id, n.name): n
                                        for n in nodes}
                    self._last_ontologies = None
                    self._serving_stale = False
        return self._ontologies

    async def ontology(self, file_name: str) -> CatalogNode | None:
        return (await self.ontologies()).get(file_name)

    def server_name(self, file_name: str) -> str:
        """The server's name of the ontology listed as ``file_name`` (itself when the
        name needed no change, or before the ontology was listed)."""
        node = (self._ontologies or {}).get(file_name)
        return node.name if node is not None else file_name

    def _forget(self) -> None:
        """This mount changed the catalog: what was held is wrong, also as a fallback."""
        self.invalidate()
        self._last_ontologies = None
        self._last_documents.clear()

    async def create_ontology(self, name: str) -> None:
        await self._client.create_ontology(name)
        self._forget()

    async def delete_ontology(self, file_name: str) -> None:
        node = await self.ontology(file_name)
        await self._client.delete_ontology(node.name if node is not None else file_name)
        self._forget()

    async def delete_document(self, document_id: str) -> None:
        await self._client.delete_document(document_id)
        self._forget()

    async def documents(self, ontology: str) -> dict[str, DocumentEntry]:
        """An ontology's documents by unique file name. Their contents are fetched
        here too, in parallel: a listing reports each file's exact size, which only the
        bytes give (the catalog has no sizes), and ``ls -l`` would otherwise fetch them
        one by one."""
        cached = self._documents.get(ontology)
        if cached is not None:
            return cached
        try:
            return await self._fetch_documents(ontology)
        except RETRIED as exc:
            last = self._last_documents.get(ontology)
            if last is None:
                raise
            self._serving_last(exc)
            return last

    def _serving_last(self, exc: errors.KgError) -> None:
        """Said once an outage (and again after the server answered in between)."""
        if not self._serving_stale:
            log.warning("serving the catalog last listed: %s", exc)
        self._serving_stale = True

    async def _fetch_documents(self, ontology: str) -> dict[str, DocumentEntry]:
        node = await self.ontology(ontology)
        if node is None:
            return {}
        docs = await self._client.catalog_all(parent=node.id)

        async def load(doc_id: str, limiter: trio.CapacityLimiter) -> None:
            async with limiter:
                await self.content(doc_id)

        limiter = trio.CapacityLimiter(CONTENT_CONCURRENCY)
        with errors.one_failure():
            async with trio.open_nursery() as nursery:
                for doc in docs:
                    nursery.start_soon(load, doc.id, limiter)
        names = self._names.setdefault(ontology, NameRegistry(document_file_name))
        entries = {}
        for doc in docs:
            file_name = names.name_for(doc.id, doc.name)
            seen = self._first_seen.setdefault(doc.id, time.time_ns())
            entries[file_name] = DocumentEntry(file_name, doc.id, doc.created_ns or seen,
                                               doc.warnings)
        self._documents[ontology] = entries
        self._last_documents.pop(ontology, None)
        return entries

    async def document(self, ontology: str, document_id: str) -> DocumentEntry | None:
        """The entry of one document (None once it is gone)."""
        docs = await self.documents(ontology)
        return next((d for d in docs.values() if d.document_id == document_id), None)

    async def content(self, document_id: str) -> bytes:
        data = self._content.get(document_id)
        if data is None:
            data = await self._client.document_content(document_id)
            if self._content_bytes + len(data) > CONTENT_CACHE_BYTES:
                self._content.clear()
                self._content_bytes = 0
            self._content[document_id] = data
            self._content_bytes += len(data)
        return data
