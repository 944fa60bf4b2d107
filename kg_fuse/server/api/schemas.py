"""Request and response bodies of the wire contract, as pydantic models.

Field names and optionality follow the platform's own models, so every declared field
is always present and unset optionals serialise as null.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from kg_fuse.limits import MAX_NAME_CHARS, MAX_QUERY_CHARS

# -- auth / health / epoch ------------------------------------------------------------------


class TokenResponse(BaseModel):
    access_token: str
    token_type: str = "Bearer"
    expires_in: int
    refresh_token: str | None = None
    scope: str


class HealthResponse(BaseModel):
    status: Literal["healthy", "degraded"]
    concepts: int
    embedding_model: str
    epoch: int
    # ours: the model's grade (how far it separates related from unrelated text), and
    # what makes this server's searches worse (no WordNet, a model that separates poorly)
    model_grade: str | None = None
    warnings: list[str] = []


class EpochResponse(BaseModel):
    epoch: int
    # ours (extra fields other clients ignore): the search default and its presets, so
    # a client polling the epoch follows a changed default without searching
    default_threshold: float | None = None
    threshold_presets: dict[str, float] | None = None
    # ours: who this server is, so a mount keeps each server's saved queries apart
    server_id: str | None = None


# -- search -----------------------------------------------------------------------------


class SearchRequest(BaseModel):
    """``min_similarity`` omitted (or null) means: inherit the server default."""

    query: str = Field(..., min_length=1, max_length=MAX_QUERY_CHARS)
    limit: int = Field(10, ge=1, le=100)
    min_similarity: float | None = Field(None, ge=0.0, le=1.0)
    offset: int = Field(0, ge=0)
    ontology: str | None = Field(None, max_length=MAX_NAME_CHARS)
    include_evidence: bool = False
    include_grounding: bool = True
    include_diversity: bool = False
    diversity_max_hops: int = Field(2, ge=1, le=3)


class ConceptInstance(BaseModel):
    quote: str
    document: str
    paragraph: int
    source_id: str
    full_text: str | None = None
    content_type: str | None = None
    has_image: bool | None = None
    image_uri: str | None = None
    storage_key: str | None = None
    filename: str | None = None
    source_type: str | None = None
    source_path: str | None = None
    source_hostname: str | None = None


class MatchedWord(BaseModel):
    """A query word the keyword search matched at a result (ours)."""

    word: str  # the query's word, folded
    term: str  # the corpus word that counted there (the word, a form, a reading)
    reading: str  # how the word was read: corpus, form, typo, meaning, name, number
    via: str  # how ``term`` relates to ``word``: corpus, form, typo, synonym, broader...
    part: float  # its share of ``ScoreWhy.words``


class ScoreWhy(BaseModel):
    """Why a result matched (ours): ``meaning + words`` is its score."""

    meaning: float  # the vector part: the model's similarity, familiarity applied
    words: float  # what the keyword match added
    keyword: float  # the keyword score in [0, 1] behind ``words``
    familiarity: float  # the factor the similarity was scaled by (1: every word known)
    matched: list[MatchedWord]


class ConceptSearchResult(BaseModel):
    concept_id: str
    label: str
    description: str = ""
    score: float
    documents: list[str]
    evidence_count: int
    grounding_strength: float | None = None
    confidence_level: str | None = None
    confidence_score: float | None = None
    grounding_display: str | None = None
    diversity_score: float | None = None
    diversity_related_count: int | None = None
    authenticated_diversity: float | None = None
    sample_evidence: list[ConceptInstance] | None = None
    # ours: why it matched (its score's parts, the words that counted); null in top_match
    why: ScoreWhy | None = None


class NearMissHit(BaseModel):
    concept_id: str
    label: str
    score: float


class SearchResponse(BaseModel):
    query: str
    count: int
    results: list[ConceptSearchResult]
    below_threshold_count: int | None = None
    suggested_threshold: float | None = None
    top_match: ConceptSearchResult | None = None
    threshold_used: float
    offset: int
    # ours: the intensity presets for the default in force ({"exact", "comprehensive"})
    threshold_presets: dict[str, float] | None = None
    # ours: the query's words the corpus never uses (they lower its scores; a query of
    # only such words matches nothing: docs/server.md, "Familiarity")
    unknown_words: list[str] | None = None
    # ours: the query's words the corpus does not use, with the corpus words they were
    # read as (other forms, WordNet's synonyms and broader terms, typo corrections)
    expanded_words: dict[str, list[str]] | None = None
    # ours: a query that only says its words over and over ("blah blah blah") is read as
    # noise and lists nothing; these are its words (each written once searches them)
    repeated_words: list[str] | None = None
    # ours: when fewer than 3 results came back, the closest concepts below the
    # threshold, best first, and a threshold that lists the best of them
    near_misses: list[NearMissHit] | None = None
    near_miss_threshold: float | None = None
    # ours: how a request's ``ontology`` was applied: "sources" (a concept is in the
    # ontologies its evidence comes from; filtered before paging, hints within it);
    # null without one. A client that sees no value filters the results by itself.
    ontology_filter: str | None = None


# -- concept details --------------------------------------------------------------------


class ConceptRelationship(BaseModel):
    to_id: str
    to_label: str
    rel_type: str
    confidence: float | None = None
    created_by: str | None = None
    source: str | None = None
    job_id: str | None = None
    document_id: str | None = None
    created_at: str | None = None
    category: str | None = None
    avg_grounding: float | None = None
    epistemic_status: str | None = None


class ProvenanceDocument(BaseModel):
    document_id: str
    filename: str
    source_type: str | None = None
    source_path: str | None = None
    hostname: str | None = None
    ingested_by: str | None = None
    ingested_at: str | None = None
    job_id: str | None = None
    source_count: int | None = None


class ConceptProvenance(BaseModel):
    documents: list[ProvenanceDocument] | None = None


class ConceptDetailsResponse(BaseModel):
    concept_id: str
    label: str
    description: str = ""
    search_terms: list[str]
    embedding: list[float] | None = None
    documents: list[str]
    instances: list[ConceptInstance]
    relationships: list[ConceptRelationship]
    grounding_strength: float | None = None
    confidence_level: str | None = None
    confidence_score: float | None = None
    grounding_display: str | None = None
    diversity_score: float | None = None
    diversity_related_count: int | None = None
    authenticated_diversity: float | None = None
    provenance: ConceptProvenance | None = None
    #: Extension (not in the platform contract): how the concept is called, e.g.
    #: ``sqrt(x, /)`` for a built-in corpus API; null for prose concepts.
    signature: str | None = None


# -- catalog / ontology / documents -----------------------------------------------------------


class CatalogNode(BaseModel):
    kind: Literal["ontology", "document", "concept"]
    id: str
    name: str
    parent_id: str | None = None
    child_count: int
    content_type: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict)


class CatalogResponse(BaseModel):
    parent_id: str | None = None
    parent_kind: str | None = None
    child_kind: Literal["ontology", "document", "concept"]
    nodes: list[CatalogNode]
    total: int
    limit: int
    offset: int
    query: str | None = None
    stale: bool = False


class OntologyStatistics(BaseModel):
    source_count: int
    file_count: int
    concept_count: int
    instance_count: int
    relationship_count: int


class OntologyNode(BaseModel):
    ontology_id: str
    name: str
    description: str
    lifecycle_state: str = "active"
    creation_epoch: int
    has_embedding: bool = False
    search_terms: list[str] = Field(default_factory=list)
    created_by: str | None = None


class OntologyInfoResponse(BaseModel):
    ontology: str
    statistics: OntologyStatistics
    files: list[str]
    node: OntologyNode | None = None


class OntologyCreateRequest(BaseModel):
    name: str = Field(..., min_length=1, max_length=MAX_NAME_CHARS)
    description: str = Field("", max_length=MAX_QUERY_CHARS)


class OntologyDeleteResponse(BaseModel):
    ontology: str
    deleted: bool
    sources_deleted: int
    orphaned_concepts_deleted: int
    documents_deleted: int


class DocumentChunk(BaseModel):
    source_id: str
    paragraph: int
    full_text: str
    char_offset_start: int
    char_offset_end: int


class DocumentContentResponse(BaseModel):
    document_id: str
    content_type: Literal["document", "image"]
    content: dict[str, str]
    chunks: list[DocumentChunk]


# -- ingest / jobs ----------------------------------------------------------------------------


class IngestResponse(BaseModel):
    job_id: str
    status: str
    content_hash: str
    position: int | None = None
    message: str


class DuplicateResponse(BaseModel):
    duplicate: bool = True
    existing_job_id: str | None = None
    status: str
    message: str
    content_hash: str
    use_force: bool = True


class JobResponse(BaseModel):
    job_id: str
    job_type: str
    status: str
    progress: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    created_at: str
    started_at: str | None = None
    completed_at: str | None = None
    ontology: str
    filename: str | None = None
    content_hash: str


# -- admin ---------------------------------------------------------------------------------


class ThresholdResponse(BaseModel):
    """The contract's three fields, then where the default comes from (ours only)."""

    key: str
    threshold: float | None = None
    fallback: float
    source: Literal["calibrated", "administrator", "fallback"] = "fallback"
    concept_count: int | None = None  # calibrated on this many concepts
    calibrated_at: str | None = None
    noise_floor: float | None = None
    set_by: str | None = None  # administrator's client id
    set_at: str | None = None
    recalibrates_after_change: float | None = None  # fraction of the calibrated count
    presets: dict[str, float] | None = None  # exact / comprehensive for this default
    preset_rule: str | None = None


class ThresholdUpdate(BaseModel):
    threshold: float = Field(..., ge=0.0, le=1.0)


class ThresholdUpdateResponse(BaseModel):
    key: str
    threshold: float


# -- documents (the platform client's endpoints) ------------------------------------------


class DocumentConcept(BaseModel):
    concept_id: str
    name: str
    source_id: str
    instance_count: int


class DocumentConceptsResponse(BaseModel):
    document_id: str
    filename: str
    concepts: list[DocumentConcept]
    total: int
    warnings: list[str] = []  # ours: near-duplicate sections found at ingestion


class DocumentDeleteResponse(BaseModel):
    document_id: str
    deleted: bool
    sources_deleted: int
    orphaned_concepts_deleted: int
