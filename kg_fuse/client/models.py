"""Typed views of the API's JSON bodies, parsed strictly: a wrong shape is a ServerFault."""

from __future__ import annotations

import base64
import datetime as dt
import math
from dataclasses import dataclass
from typing import Any, TypeVar

from kg_fuse.client.errors import ServerFault
from kg_fuse.client.why import ServerWhy, parse_why


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in body:
        raise ServerFault(f"{where}: missing field {name!r}")
    value = body[name]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ServerFault(f"{where}: field {name!r} has the wrong type")
    return value


def _optional(body: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if body.get(name) is None:
        return None
    return _field(body, name, kind, where)


def clean_text(value: str) -> str:
    """Replace lone surrogates (legal in JSON, not in UTF-8) with U+FFFD."""
    return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


T = TypeVar("T")


def _text(value: Any, default: T) -> str | T:
    """An optional text field: the string (lone surrogates replaced), or ``default`` when
    it is absent or not a string (not worth refusing the whole answer for)."""
    return clean_text(value) if isinstance(value, str) else default


def _texts(value: Any) -> tuple[str, ...]:
    """An optional list of texts: its strings (others skipped), or () when not a list."""
    return tuple(clean_text(v) for v in value if isinstance(v, str)) \
        if isinstance(value, list) else ()


def timestamp_ns(value: Any) -> int | None:
    """Epoch seconds (a number) or an ISO 8601 string, as nanoseconds; None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value) and value > 0:
        return int(value * 1_000_000_000)
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return int(moment.timestamp() * 1_000_000_000)
    return None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ServerFault(f"{where}: expected a JSON object")
    return value


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    """An optional JSON object: anything else reads as absent."""
    return value if isinstance(value, dict) else None


def finite_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ServerFault(f"{where}: not a finite number")
    return float(value)


PRESET_NAMES = ("exact", "standard", "comprehensive")  # standard: the default itself


def threshold_presets(value: Any) -> dict[str, float] | None:
    """The preset values a server publishes beside its default (ours; None: not sent)."""
    if not isinstance(value, dict):
        return None
    out = {name: float(v) for name in PRESET_NAMES if isinstance(v := value.get(name),
                                                                 int | float)
           and not isinstance(v, bool) and math.isfinite(v) and 0.0 <= v <= 1.0}
    return out or None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ServerFault(f"{where}: expected a list of strings")
    return tuple(value)


def _concept_heading(body: dict[str, Any], where: str) -> dict[str, Any]:
    """The fields a search result and a concept's details share, parsed the same way."""
    return {
        "concept_id": _field(body, "concept_id", str, where),
        "label": clean_text(_field(body, "label", str, where)),
        "description": clean_text(_optional(body, "description", str, where) or ""),
        "ontologies": _strings(body.get("documents"), where),
    }


#: The contract's near-miss hint looks at this many times the page's limit (down to 0.3):
#: a ``below_threshold_count`` that fills the look may be short of the true count.
HINT_LOOK = 2


@dataclass(frozen=True)
class ConceptHit:
    """One search result."""

    concept_id: str
    label: str
    description: str
    score: float
    ontologies: tuple[str, ...]
    why: ServerWhy | None = None  # ours: the score's parts, the words matched there

    @classmethod
    def parse(cls, raw: Any) -> ConceptHit:
        where = "search result"
        body = _object(raw, where)
        return cls(
            **_concept_heading(body, where),
            score=finite_number(body.get("score"), where),
            why=parse_why(body.get("why")),
        )


@dataclass(frozen=True)
class SearchResponse:
    query: str
    results: tuple[ConceptHit, ...]
    threshold_used: float
    below_threshold_count: int | None
    suggested_threshold: float | None
    top_match: ConceptHit | None
    threshold_presets: dict[str, float] | None = None
    unknown_words: tuple[str, ...] = ()  # ours: query words the corpus never uses
    # ours: query words read as other corpus words (forms, WordNet meanings, typos)
    expanded_words: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # ours: the words of a query read as noise because it only repeats them
    repeated_words: tuple[str, ...] = ()
    # ours: the closest concepts below the threshold (label, score) when few came back,
    # and a threshold that lists the best of them
    near_misses: tuple[tuple[str, float], ...] = ()
    near_miss_threshold: float | None = None
    # ours: how the server applied the request's ``ontology`` ("sources": by the
    # concepts' sources, before paging, hints within it); None: it does not say (the
    # platform, whose filter finds nothing: the listing filters by itself)
    ontology_filter: str | None = None
    #: ``below_threshold_count`` reached the end of the hint's look (``HINT_LOOK`` times
    #: the limit asked): more may lie below the threshold, the count is a floor
    below_threshold_floor: bool = False

    @property
    def suggestion(self) -> float | None:
        """The threshold to suggest when few results came back: the least lowering that
        lists something. Just below the best near miss: as our server names it, else the
        ``top_match`` score rounded down to two places; the contract's
        ``suggested_threshold`` (just below the *worst* near miss above 0.3, which may
        list much more) only from a server that sends no ``top_match``."""
        if self.near_miss_threshold is not None:
            return self.near_miss_threshold
        if self.top_match is not None:
            return math.floor(self.top_match.score * 100) / 100
        return self.suggested_threshold

    @classmethod
    def parse(cls, raw: Any, limit: int | None = None) -> SearchResponse:
        """The answer to a search that asked for ``limit`` results (None: not known)."""
        where = "search response"
        body = _object(raw, where)
        results = _field(body, "results", list, where)
        suggested = body.get("suggested_threshold")
        top = body.get("top_match")
        unknown = body.get("unknown_words")  # an extra field: ignored when malformed
        below = _optional(body, "below_threshold_count", int, where)
        return cls(
            query=_field(body, "query", str, where),
            results=tuple(ConceptHit.parse(r) for r in results),
            threshold_used=finite_number(body.get("threshold_used"), where),
            below_threshold_count=below,
            below_threshold_floor=(below is not None and limit is not None
                                   and below + len(results) >= HINT_LOOK * limit),
            suggested_threshold=None if suggested is None else finite_number(suggested, where),
            top_match=None if top is None else ConceptHit.parse(top),
            threshold_presets=threshold_presets(body.get("threshold_presets")),
            unknown_words=_texts(unknown),
            **_reading_extras(body),
        )


def _reading_extras(body: dict) -> dict[str, Any]:
    """Our server's extra fields on how it read the query and what came close; each is
    ignored when absent or malformed (a platform server never sends them)."""
    expanded = body.get("expanded_words")
    near = body.get("near_misses")
    threshold = body.get("near_miss_threshold")
    repeated = body.get("repeated_words")
    extras: dict[str, Any] = {}
    if isinstance(repeated, list):
        extras["repeated_words"] = _texts(repeated)
    if isinstance(expanded, dict):
        extras["expanded_words"] = tuple(
            (clean_text(word), _texts(terms))
            for word, terms in expanded.items() if isinstance(word, str)
            and isinstance(terms, list))
    if isinstance(near, list):
        extras["near_misses"] = tuple(
            (clean_text(hit["label"]), float(hit["score"])) for hit in near if _near_miss(hit))
    if _score(threshold):
        extras["near_miss_threshold"] = float(threshold)
    if isinstance(body.get("ontology_filter"), str):
        extras["ontology_filter"] = body["ontology_filter"]
    return extras


def _near_miss(hit: Any) -> bool:
    """A near miss as our server sends one: a label and a finite score."""
    return (isinstance(hit, dict) and isinstance(hit.get("label"), str)
            and isinstance(hit.get("score"), int | float) and math.isfinite(hit["score"]))


def _score(value: Any) -> bool:
    """A finite number in [0, 1]."""
    return isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0


@dataclass(frozen=True)
class Evidence:
    quote: str
    document: str  # on the platform: the ontology the source belongs to
    paragraph: int | None  # the number of the source chunk the quote comes from
    filename: str | None = None  # the document the quote comes from
    full_text: str = ""  # the whole chunk, which may hold several paragraphs

    @classmethod
    def parse(cls, raw: Any, provenance: dict[str, str] | None = None) -> Evidence:
        """``provenance``: the concept's documents, file name by document id."""
        inst = _object(raw, "concept instance")
        paragraph = inst.get("paragraph")
        return cls(
            quote=_text(inst.get("quote"), ""),
            document=_text(inst.get("document"), ""),
            paragraph=paragraph if isinstance(paragraph, int) else None,
            filename=_source_document(inst, provenance or {}),
            full_text=_text(inst.get("full_text"), ""),
        )


def _provenance(body: dict[str, Any]) -> dict[str, str]:
    """A concept's ``provenance.documents``: file name by document id (ignored when
    malformed: it only names the evidence's files)."""
    prov = body.get("provenance")
    docs = prov.get("documents") if isinstance(prov, dict) else None
    return {doc["document_id"]: doc["filename"] for doc in docs or []
            if isinstance(doc, dict) and isinstance(doc.get("document_id"), str)
            and isinstance(doc.get("filename"), str) and doc["filename"]}


def _hex(document_id: str) -> str:
    return document_id.split(":", 1)[-1]


def _source_document(inst: dict[str, Any], provenance: dict[str, str]) -> str | None:
    """The file an instance's quote comes from. The platform's ``filename`` is any
    document of the instance's ontology, not its own (its OPTIONAL MATCH workaround), so
    the concept's provenance is asked first: a source id starts with its document's
    content hash (``sha256:16ad4_chunk1`` on the platform, ``16ad499a…_chunk1`` on the
    embedded server); a concept from one document has all its evidence from it."""
    source = inst.get("source_id")
    stem = _hex(source.rsplit("_chunk", 1)[0]) if isinstance(source, str) else ""
    if len(stem) >= 5:
        owners = [name for doc_id, name in provenance.items()
                  if _hex(doc_id).startswith(stem)]
        if len(owners) == 1:
            return owners[0]
    if len(set(provenance.values())) == 1:
        return next(iter(provenance.values()))
    return _text(inst.get("filename"), None)


@dataclass(frozen=True)
class Relationship:
    rel_type: str
    to_id: str
    to_label: str
    confidence: float | None

    @classmethod
    def parse(cls, raw: Any, where: str) -> Relationship:
        rel = _object(raw, "relationship")
        confidence = rel.get("confidence")
        return cls(
            rel_type=str(rel.get("rel_type") or "RELATED_TO"),
            to_id=str(rel.get("to_id") or ""),
            to_label=clean_text(str(rel.get("to_label") or rel.get("to_id") or "")),
            confidence=finite_number(confidence, where) if confidence is not None else None,
        )


@dataclass(frozen=True)
class ConceptDetail:
    concept_id: str
    label: str
    description: str
    ontologies: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    relationships: tuple[Relationship, ...]
    signature: str = ""  # extension field; empty when the server does not send it

    @classmethod
    def parse(cls, raw: Any) -> ConceptDetail:
        where = "concept"
        body = _object(raw, where)
        provenance = _provenance(body)
        return cls(
            **_concept_heading(body, where),
            signature=_text(body.get("signature"), ""),
            evidence=tuple(Evidence.parse(item, provenance)
                           for item in body.get("instances") or []),
            relationships=tuple(Relationship.parse(item, where)
                                for item in body.get("relationships") or []),
        )


@dataclass(frozen=True)
class CatalogNode:
    """An ontology or a document, as the catalog lists it."""

    id: str
    name: str
    kind: str
    child_count: int
    created_ns: int | None = None  # from properties.created_at, when the server sends it
    warnings: tuple[str, ...] = ()  # properties.warnings: a document's status (ours)

    @classmethod
    def parse(cls, raw: Any) -> CatalogNode:
        where = "catalog node"
        body = _object(raw, where)
        count = body.get("child_count")
        properties = _dict_or_none(body.get("properties")) or {}
        return cls(
            id=_field(body, "id", str, where),
            name=clean_text(_field(body, "name", str, where)),
            kind=str(body.get("kind") or ""),
            child_count=count if isinstance(count, int) and not isinstance(count, bool) else 0,
            created_ns=timestamp_ns(properties.get("created_at")),
            warnings=_texts(properties.get("warnings")),
        )


@dataclass(frozen=True)
class CatalogPage:
    nodes: tuple[CatalogNode, ...]
    total: int

    @classmethod
    def parse(cls, raw: Any) -> CatalogPage:
        where = "catalog page"
        body = _object(raw, where)
        return cls(
            nodes=tuple(CatalogNode.parse(n) for n in _field(body, "nodes", list, where)),
            total=_field(body, "total", int, where),
        )


class DocumentContent:
    """``content.document`` (text) or ``content.image`` (base64) of a document."""

    @staticmethod
    def parse(raw: Any) -> bytes:
        where = "document content"
        content = _object(_object(raw, where).get("content"), where)
        if isinstance(content.get("document"), str):
            return clean_text(content["document"]).encode("utf-8")
        if isinstance(content.get("image"), str):
            try:
                return base64.b64decode(content["image"], validate=True)
            except ValueError:
                raise ServerFault(f"{where}: image is not base64") from None
        raise ServerFault(f"{where}: neither 'document' nor 'image'")


@dataclass(frozen=True)
class IngestReceipt:
    """A queued ingestion job, or (``job_id`` None) a duplicate of an existing one."""

    job_id: str | None
    duplicate_of: str | None
    status: str

    @classmethod
    def parse(cls, raw: Any) -> IngestReceipt:
        body = _object(raw, "ingest response")
        job_id = _text(body.get("job_id"), None)
        if job_id is None and not body.get("duplicate"):
            raise ServerFault("ingest response has neither job_id nor duplicate")
        return cls(job_id, _text(body.get("existing_job_id"), None),
                   str(body.get("status") or ""))


TERMINAL_JOB_STATUSES = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    status: str
    progress: dict[str, Any] | None
    error: str | None
    warnings: tuple[str, ...] = ()  # e.g. near-duplicate sections (not errors)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_JOB_STATUSES

    @classmethod
    def parse(cls, raw: Any) -> JobStatus:
        where = "job"
        body = _object(raw, where)
        result = _dict_or_none(body.get("result")) or {}
        return cls(
            job_id=_field(body, "job_id", str, where),
            status=_field(body, "status", str, where),
            progress=_dict_or_none(body.get("progress")),
            error=_text(body.get("error"), None),
            warnings=_texts(result.get("warnings")),
        )
