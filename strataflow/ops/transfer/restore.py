"""`strataflow import FILE --namespace NS`: an export file into a namespace, one transaction per subject,
idempotently, trusting nothing in the file.

The target namespace is the caller's, always given (`--namespace`): the header's namespace is only reported.
Line 1 must be an export header of a format version this strataflow reads (otherwise nothing is imported).
Every other line is validated as it is read, as an online write of its kind would be (models/transfer.py; a
message's canonical fields by the ingest path with the online write window, so no partition is made for a
far date; subject and agent ids by the online id rule; internal kinds such as hot_summary refused; no time
in the future, models.transfer.future_field): a bad line goes to quarantine (source `import:<file name>`,
position = its line number, the field and the error naming both) and the rest imports. Lines are taken in
file order, grouped by subject as the export writes them; each subject's group is written and committed in
one transaction, the namespace's assets in one more. An import never overwrites: a row the target already
holds as the file has it is left alone (a second import writes no row), one the target holds differently
is a conflict, kept and reported, unless `replace` (`--replace`) writes the file's content as a new
version; see strataflow.ops.transfer.layers for the writers, the id map and the watermark merge.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError
from sqlalchemy import Connection, RootTransaction
from sqlalchemy.exc import DBAPIError

from models.messages import describe_errors
from models.transfer import (
    FORMAT,
    FORMAT_VERSION,
    LINE_LAYERS,
    LINE_MODELS,
    AssetLine,
    Header,
    ImportResult,
    InsightLine,
    ItemLine,
    Line,
    MessageKeyLine,
    MessageLine,
    ProfileLine,
    ReportLine,
    WatermarkLine,
    future_field,
)
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.errors import UserError
from strataflow.ops.transfer import layers, memory_rows
from strataflow.ops.transfer.jsonl import numbered_lines
from strataflow.pipeline.progress import progress_bar

MESSAGE_BATCH = 2_000
KEY_BATCH = 5_000
SHOWN_PROBLEMS = 20


class TransferError(UserError):
    """The file cannot be imported at all (no export header, a newer format, unreadable); names the line."""


class Group:
    """The lines of one subject (or of the namespace's assets) being written in one transaction."""

    def __init__(self, conn: Connection, state: layers.SubjectState) -> None:
        self.conn, self.state = conn, state
        self.transaction: RootTransaction = conn.begin()
        self.keys: list[MessageKeyLine] = []
        self.messages: list[tuple[int, bytes, dict[str, Any], MessageLine]] = []
        self.cover: tuple[bool, ...] | None = None

    def add(self, number: int, raw: bytes, value: dict[str, Any], line: Line) -> None:
        conn, state = self.conn, self.state
        if isinstance(line, MessageLine):
            cover = layers.coverage(state, line)
            if self.messages and (cover != self.cover or len(self.messages) >= MESSAGE_BATCH):
                self.flush()
            self.cover = cover
            self.messages.append((number, raw, value, line))
            return
        if isinstance(line, MessageKeyLine):  # keys batch up like messages
            if self.messages or len(self.keys) >= KEY_BATCH:
                self.flush()
            self.keys.append(line)
            return
        self.flush()
        if isinstance(line, WatermarkLine):
            if line.stage == "extract":  # a hot_summary mark (older files) would stop the target's refresh
                state.marks[line.stage] = line.position
            state.result.layer("watermarks").read += 1
        elif isinstance(line, ItemLine):
            memory_rows.restore_item_line(conn, state, line)
        elif isinstance(line, InsightLine):
            memory_rows.restore_insight_line(conn, state, line)
        elif isinstance(line, ReportLine):
            memory_rows.restore_report_line(conn, state, line)
        elif isinstance(line, ProfileLine):
            memory_rows.restore_profile_line(conn, state, line)
        elif isinstance(line, AssetLine):
            layers.restore_asset_line(conn, state, line)
        if not isinstance(line, WatermarkLine):
            state.count(LAYER_OF[type(line)], "read")

    def flush(self) -> None:
        """Write the pending keys and messages (keys first: a message never shares a key with them)."""
        if self.keys:
            layers.restore_keys(self.conn, self.state, self.keys)
            self.keys = []
        if self.messages:
            for problem in layers.restore_messages(self.conn, self.state, self.messages):
                _note(self.state.result, problem)
            self.messages = []

    def close(self, problems: list[dict[str, Any]]) -> None:
        """Write what is pending, the watermarks and the quarantined lines, and commit."""
        self.flush()
        layers.restore_watermarks(self.conn, self.state)
        layers.quarantine(self.conn, self.state.settings, self.state.run_id, problems)
        self.transaction.commit()


LAYER_OF: dict[type[Line], str] = {
    ItemLine: "items",
    InsightLine: "insights",
    ReportLine: "reports",
    ProfileLine: "profiles",
    AssetLine: "assets",
}
LAYER_OF_TYPE = {
    "message_key": "message_keys",
    "message": "messages",
    "item": "items",
    "insight": "insights",
    "report": "reports",
    "profile": "profiles",
    "watermark": "watermarks",
    "asset": "assets",
}


def import_file(
    settings: Settings,
    path: Path,
    namespace: str,
    run_id: uuid.UUID | None = None,
    progress: bool = True,
    replace: bool = False,
) -> ImportResult:
    """Import an export file into namespace (the caller's choice, never the file's). replace: a row the
    target holds differently gets the file's content as a new version (otherwise: a conflict, kept)."""
    if not namespace:
        raise TransferError(
            f"{path}: give the namespace to import into (--namespace NS); the file's header never chooses it"
        )
    lines = numbered_lines(path)
    header = read_header(path, next(lines, None))
    target = namespace
    result = ImportResult(namespace=target, source=header.source, lines=1)
    latest = datetime.now(UTC) + timedelta(days=settings.api_write_future_days)
    label = f"import:{path.name}"
    total = sum(header.counts.get(name, 0) for name in LINE_LAYERS)
    group: Group | None = None
    problems: list[dict[str, Any]] = []
    with engine_for(settings).connect() as conn, progress_bar("importing", total, progress) as advance:
        number = 1
        try:
            for number, raw in lines:
                result.lines += 1
                advance(1)
                value, line, problem = parse_line(number, raw, label, target, latest)
                if problem is not None:
                    problems.append(problem)
                    _note(result, problem, value)
                    continue
                assert line is not None and value is not None
                subject = getattr(line, "subject_id", None)
                if group is None or subject != group.state.subject_id:
                    if group is not None:
                        group.close(problems)
                        problems = []
                    state = layers.SubjectState(settings, target, subject, run_id, label, result, replace)
                    group = Group(conn, state)
                    result.subjects += subject is not None
                group.add(number, raw, value, line)
            if group is not None:
                group.close(problems)
            elif problems:
                with conn.begin():
                    layers.quarantine(conn, settings, run_id, problems)
        except DBAPIError as exc:
            where = f"subject {group.state.subject_id!r}" if group and group.state.subject_id else "assets"
            raise TransferError(
                f"{path} line {number} ({where}): the database refused a write (SQLSTATE "
                f"{getattr(exc.orig, 'sqlstate', None)}); the subjects before it are imported, and importing "
                "the file again completes the rest"
            ) from None
    return result


def read_header(path: Path, first: tuple[int, bytes] | None) -> Header:
    """The export header of line 1, or TransferError naming the line and field."""
    if first is None:
        raise TransferError(f"{path}: the file is empty: not a strataflow export")
    number, raw = first
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TransferError(f"{path} line {number}: not a strataflow export header ({exc})") from None
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise TransferError(f"{path} line {number}: field 'format': not a strataflow export ({FORMAT!r})")
    if isinstance(value.get("version"), int) and value["version"] > FORMAT_VERSION:
        raise TransferError(
            f"{path} line {number}: field 'version': format version {value['version']} is newer than this "
            f"strataflow reads ({FORMAT_VERSION}); upgrade strataflow to import it"
        )
    try:
        return Header.model_validate(value)
    except ValidationError as exc:
        raise TransferError(f"{path} line {number}: {describe_errors(exc).error}") from None


def parse_line(
    number: int, raw: bytes, label: str, namespace: str, latest: datetime
) -> tuple[dict[str, Any] | None, Line | None, dict[str, Any] | None]:
    """(value, validated line, None), or (value or None, None, quarantine row) for a bad line (one that its
    model refuses, or that dates anything after `latest`)."""
    value: Any = None

    def bad(field: str | None, reason: str, error: str) -> tuple[Any, None, dict[str, Any]]:
        return value, None, _problem(number, raw, value, namespace, label, field, reason, error)

    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return bad(None, "bad_json", f"not JSON ({exc})")
    if not isinstance(value, dict):
        return bad(None, "bad_json", "not a JSON object")
    model = LINE_MODELS.get(str(value.get("type")))
    if model is None:
        known = ", ".join(LINE_MODELS)
        return bad("type", "unknown_type", f"field 'type': {value.get('type')!r} is not one of {known}")
    try:
        line = model.model_validate(value)
    except ValidationError as exc:
        found = describe_errors(exc)
        return bad(found.field, found.reason, found.error)
    future = future_field(line, latest)
    if future is not None:
        when = latest.isoformat(timespec="seconds")
        return bad(future, "in_future", f"field {future!r}: lies in the future (after {when}); not imported")
    return value, line, None


def _problem(
    number: int,
    raw: bytes,
    value: Any,
    namespace: str,
    label: str,
    field: str | None,
    reason: str,
    error: str,
) -> dict[str, Any]:
    subject = value.get("subject_id") if isinstance(value, dict) else None
    text = raw.decode("utf-8", errors="backslashreplace")
    where = f"{label} line {number}: {error}"
    return layers.problem_row(label, namespace, number, subject, field, reason, where, text)


def _note(result: ImportResult, problem: dict[str, Any], value: dict[str, Any] | None = None) -> None:
    """Count a quarantined line (in its layer when its type is known) and keep the first errors to show."""
    result.quarantined += 1
    layer = LAYER_OF_TYPE.get(str((value or {}).get("type")))
    if layer is not None:
        result.layer(layer).read += 1
        result.layer(layer).quarantined += 1
    if len(result.problems) < SHOWN_PROBLEMS:
        result.problems.append(problem["error"])
