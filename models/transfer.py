"""The lines of a strataflow export file (`strataflow export`, `strataflow import`): one JSON object per line.

Line 1 is the header (format, version, source, counts); every other line has a `type` and belongs to one
subject (`subject_id`), except assets, which belong to the namespace. Ids (message_id, item_id, report_id,
insight_id, document_id) are the source database's: an import renumbers them and maps the lineage arrays
(source_message_ids, evidence ids, key_events[].message_ids) onto the new ids. Times carry their offset.
An embedding is {model, dim, f32}: the float32 vector, little-endian, base64 (exact and compact).

Each line is validated by its model here (the canonical message fields of a `message` line by
models.messages.MessageRecord, through the ingest path, with the online write window), so a bad line is
quarantined naming its field. A file is trusted no more than an online write: subject and agent ids follow
the online id rule (SAFE_ID), an internal kind (hot_summary, which the target's own hot-memory stage writes)
is refused, and no time may lie in the future (future_field, checked by the import against its clock).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import date, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from models.common import MemoryKind
from models.messages import ID_MAX_CHARS, NO_NUL, SAFE_ID

FORMAT = "strataflow-export"
FORMAT_VERSION = 1
# The canonical message fields a `message` line carries (what the ingest path validates).
MESSAGE_FIELDS = (
    "conversation_id",
    "subject_id",
    "source_message_id",
    "role",
    "content",
    "created_at",
    "source",
    "agent_id",
    "lang",
    "metadata",
)
# The layers with a line of their own (entries and versions ride inside item lines, chunks and revisions
# inside theirs): the header's counts of these are the file's lines after the header.
LINE_LAYERS = ("message_keys", "messages", "items", "insights", "reports", "profiles", "watermarks", "assets")
# Subject-scoped stages whose watermark (an ingest position) the export carries. The hot summary is internal:
# neither its item nor its watermark travels (the target's own hot-memory stage rebuilds it).
WATERMARK_STAGES = ("extract",)
# Kinds only the pipeline writes: an export leaves them out and an import refuses them.
INTERNAL_KINDS = frozenset({MemoryKind.hot_summary})


def _json_storable(value: Any) -> Any:
    if "\\u0000" in json.dumps(value, default=str):
        raise ValueError("contains a NUL character, which PostgreSQL jsonb cannot store")
    return value


def _public_kind(value: MemoryKind) -> MemoryKind:
    if value in INTERNAL_KINDS:
        raise ValueError(
            f"{value.value} is an internal kind that only the pipeline writes; it is not imported"
        )
    return value


Id = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, pattern=NO_NUL)]
# A subject or agent id: the online id rule (no '/', no control character, no line separator).
SafeId = Annotated[str, Field(min_length=1, max_length=ID_MAX_CHARS, pattern=SAFE_ID)]
PublicKind = Annotated[MemoryKind, AfterValidator(_public_kind)]
Text = Annotated[str, Field(pattern=NO_NUL)]
Json = Annotated[Any, AfterValidator(_json_storable)]
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_storable)]
Ids = list[Annotated[int, Field(ge=1)]]


class Line(BaseModel):
    """What every line shares: unknown keys are ignored (a newer exporter may add some)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Embedding(Line):
    """A stored vector: the model that made it, its size and the float32 values (little-endian, base64)."""

    model: Text
    dim: int = Field(ge=1, le=16_000)
    f32: str

    @field_validator("f32")
    @classmethod
    def _size(cls, value: str, info: Any) -> str:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("is not base64") from None
        dim = info.data.get("dim")
        if dim is not None and len(raw) != 4 * dim:
            raise ValueError(f"holds {len(raw) // 4} floats, not dim={dim}")
        return value


class Header(Line):
    type: Literal["header"]
    format: Literal["strataflow-export"]
    version: int = Field(ge=1, le=FORMAT_VERSION)
    exported_at: AwareDatetime
    source: dict[str, Any]
    counts: dict[str, int]


class MessageKeyLine(Line):
    """The key of a message whose L1 row has expired: the lineage anchor that outlives L1."""

    type: Literal["message_key"]
    message_id: int = Field(ge=1)
    subject_id: SafeId
    source: Id
    source_message_id: Id
    conversation_id: Id
    event_at: AwareDatetime
    content_hash: Text
    first_ingested_at: AwareDatetime
    expired_at: AwareDatetime


class MessageLine(Line):
    """An L1 message: the canonical fields (validated by the ingest path) plus its old id, ingest position
    and embedding."""

    type: Literal["message"]
    message_id: int = Field(ge=1)
    ingest_seq: int = Field(ge=1)
    subject_id: SafeId
    embedding: Embedding | None = None


class ItemVersionLine(Line):
    version: int = Field(ge=1)
    action: Literal["new", "content_modified", "modified", "deleted"]
    kind: PublicKind
    key: Text
    value: Json = None
    statement: Text | None = None
    category: Text | None = None
    importance: int | None = Field(None, ge=0, le=100)
    confidence: float | None = Field(None, ge=0, le=1)
    status: Literal["active", "deleted"]
    source: Literal["extracted", "manual"]
    valid_from: AwareDatetime
    valid_to: AwareDatetime | None = None
    recorded_at: AwareDatetime
    superseded_at: AwareDatetime | None = None
    source_message_ids: Ids = []
    run_id: UUID | None = None
    prompt_version: Text | None = None
    model: Text | None = None
    note: Text | None = None
    agent_id: SafeId | None = None
    name: Text | None = None
    description: Text | None = None
    entry_type: Literal["user", "project", "feedback", "reference"] | None = None
    is_shared: bool | None = None


class ItemLine(Line):
    """An L2 memory item (an extracted item or a seed 003 entry) with every version of its history."""

    type: Literal["item"]
    item_id: int = Field(ge=1)
    subject_id: SafeId
    agent_id: SafeId | None = None
    kind: PublicKind
    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    value: Json = None
    statement: Text | None = None
    category: Text | None = None
    importance: int = Field(ge=0, le=100)
    confidence: float = Field(ge=0, le=1)
    status: Literal["active", "deleted"]
    source: Literal["extracted", "manual"]
    version: int = Field(ge=1)
    valid_from: AwareDatetime
    recorded_at: AwareDatetime
    updated_at: AwareDatetime
    created_at: AwareDatetime
    reflected_version: int | None = None
    source_message_ids: Ids = []
    metadata: JsonObject = {}
    run_id: UUID | None = None
    prompt_version: Text | None = None
    model: Text | None = None
    name: Text | None = None
    description: Text | None = None
    entry_type: Literal["user", "project", "feedback", "reference"] | None = None
    is_shared: bool = False
    confirmed_model: Text | None = None
    confirmed_prompt_version: Text | None = None
    confirmed_run_id: UUID | None = None
    confirmed_at: AwareDatetime | None = None
    embedding: Embedding | None = None
    versions: list[ItemVersionLine] = Field(min_length=1)


class InsightLine(Line):
    type: Literal["insight"]
    insight_id: int = Field(ge=1)
    subject_id: SafeId
    key: Text
    question: Text
    statement: Text
    confidence: float = Field(ge=0, le=1)
    evidence_item_ids: Ids = []
    evidence_message_ids: Ids = []
    valid_from: AwareDatetime
    valid_to: AwareDatetime | None = None
    recorded_at: AwareDatetime
    superseded_at: AwareDatetime | None = None
    run_id: UUID | None = None
    prompt_version: Text | None = None
    model: Text | None = None
    embedding: Embedding | None = None


class ReportRevisionLine(Line):
    revision: int = Field(ge=1)
    summary: Text
    key_events: Json
    metrics: JsonObject
    input_hash: Text
    source_message_ids: Ids = []
    run_id: UUID | None = None
    prompt_version: Text | None = None
    model: Text | None = None
    written_at: AwareDatetime
    superseded_at: AwareDatetime


class ReportLine(Line):
    """An L3 weekly report with its earlier revisions. `current`: its input hash matched its week's messages
    when exported (the import then stores the target's hash of the same week, so rollup rewrites nothing)."""

    type: Literal["report"]
    report_id: int = Field(ge=1)
    subject_id: SafeId
    week_start: date
    week_end: date
    summary: Text
    key_events: list[JsonObject] = []
    metrics: JsonObject = {}
    input_hash: Text
    current: bool = False
    source_message_ids: Ids = []
    run_id: UUID | None = None
    prompt_version: Text | None = None
    model: Text | None = None
    created_at: AwareDatetime
    updated_at: AwareDatetime
    revision: int = Field(1, ge=1)
    embedding: Embedding | None = None
    revisions: list[ReportRevisionLine] = []


class ProfileLine(Line):
    """A seed 002 profile document as stored: content, manual overlay, status and meta."""

    type: Literal["profile"]
    subject_id: SafeId
    doc_type: Literal["user", "work"]
    document: JsonObject
    manual: JsonObject = {}
    status: Literal["ACTIVE", "DISABLED"]
    version: int = Field(1, ge=0)
    created_at: AwareDatetime
    updated_at: AwareDatetime

    @field_validator("status", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class WatermarkLine(Line):
    """How far a subject-scoped stage (extract, hot_summary) had read, as a source ingest position."""

    type: Literal["watermark"]
    subject_id: SafeId
    stage: Literal["extract", "hot_summary"]  # hot_summary: in files of earlier versions; not applied
    position: int = Field(ge=0)


class AssetChunkLine(Line):
    chunk_index: int = Field(ge=0)
    content: Text
    content_hash: Text
    token_count: int = Field(ge=0)
    lang: Text | None = None
    metadata: JsonObject = {}
    embedding: Embedding | None = None


class AssetLine(Line):
    """A data asset of the namespace (long-term layer) with its chunks."""

    type: Literal["asset"]
    document_id: int = Field(ge=1)
    uri: Text = Field(min_length=1)
    kind: Text
    title: Text | None = None
    checksum: Text
    version: int = Field(1, ge=1)
    metadata: JsonObject = {}
    ingested_at: AwareDatetime
    updated_at: AwareDatetime
    chunks: list[AssetChunkLine] = []


def future_field(value: Any, latest: datetime, path: str = "") -> str | None:
    """The dotted name of the first time (or date) in a validated line later than `latest` (e.g.
    `versions[0].recorded_at`), or None: a file cannot date anything in the future."""
    if isinstance(value, datetime):
        return path if value > latest else None
    if isinstance(value, date):
        return path if value > latest.date() else None
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            found = future_field(getattr(value, name), latest, f"{path}.{name}" if path else name)
            if found:
                return found
    if isinstance(value, list):
        for index, element in enumerate(value):
            found = future_field(element, latest, f"{path}[{index}]")
            if found:
                return found
    return None


LINE_MODELS: dict[str, type[Line]] = {
    "message_key": MessageKeyLine,
    "message": MessageLine,
    "item": ItemLine,
    "insight": InsightLine,
    "report": ReportLine,
    "profile": ProfileLine,
    "watermark": WatermarkLine,
    "asset": AssetLine,
}


# What export and import report (the CLI prints them as a table; pipeline_runs.counts keeps them).
LAYERS = (
    "message_keys",
    "messages",
    "items",
    "item_versions",
    "insights",
    "reports",
    "report_revisions",
    "profiles",
    "watermarks",
    "assets",
    "asset_chunks",
)


class LayerCounts(BaseModel):
    """One layer of an import: lines read, rows written new, replaced by the file's content as a new version
    (updated, only with --replace), already there as the file has them (unchanged), left as the target has
    them because it holds them differently (kept: a conflict, reported), and lines quarantined."""

    read: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    kept: int = 0
    quarantined: int = 0


class ImportResult(BaseModel):
    """What `strataflow import` did, per layer, plus what it could not carry over."""

    namespace: str
    source: dict[str, Any] = Field(default_factory=dict, description="the export header's source")
    lines: int = Field(0, description="lines read, the header included")
    subjects: int = 0
    layers: dict[str, LayerCounts] = Field(default_factory=lambda: {name: LayerCounts() for name in LAYERS})
    quarantined: int = Field(0, description="bad lines, written to quarantine (source import:<file>)")
    lineage_dropped: int = Field(0, description="lineage ids naming a message or item not in the file")
    embeddings_dropped: int = Field(0, description="vectors of another size than the target's; left null")
    problems: list[str] = Field(default_factory=list, description="the first quarantined lines' errors")
    conflicts: list[str] = Field(
        default_factory=list, description="the first rows the target holds differently (kept, or replaced)"
    )

    def layer(self, name: str) -> LayerCounts:
        return self.layers[name]

    def written(self) -> int:
        """Rows added or changed in the target namespace."""
        return sum(c.new + c.updated for c in self.layers.values())


class ExportResult(BaseModel):
    """What `strataflow export` wrote: the header's counts (lines per layer) and the file."""

    namespace: str
    subject_id: str | None = None
    path: str
    counts: dict[str, int]
    bytes: int = 0
