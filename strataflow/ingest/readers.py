"""Streaming readers for conversation logs: JSONL, JSON arrays, CSV, Parquet, LoCoMo JSON and SQL queries.

Every reader yields chunks (lists) of `(position, raw, value)` items. JSONL, CSV, Parquet and SQL stream
with bounded memory; a JSON array or a LoCoMo file is parsed whole (use JSONL for big exports). Items:
- position: the line number (JSONL, CSV), row number (Parquet, SQL, JSON arrays) or turn id (LoCoMo);
- raw: the record's original bytes/text when the reader has it (JSONL lines), else None (the ingest then
  stores the parsed record as JSON in quarantine);
- value: the record as a dict with canonical keys (after the column mapping), or its `RecordProblem` when the
  record cannot even be parsed (malformed JSON, invalid UTF-8, a CSV row with the wrong number of cells).

A JSONL file's last line without a newline that is not JSON yet is a line still being written (an inbox file
a writer is appending to): it is left out with a warning, not quarantined, and read whole by the next run
(the file's checksum has changed by then, so the ingest reads it again; its other lines are unchanged).

LoCoMo (snap-research/LoCoMo) speaker rule: both speakers are real people talking to each other, so every
turn is role "user"; subject_id and conversation_id are the sample_id (e.g. "conv-26"), so one scope holds
the whole dialog and questions about either speaker search the same place; the speaker's name is in
metadata.speaker (and metadata.speakers lists both). Turn k of a session is placed k seconds after the
session's date_time ("1:56 pm on 8 May, 2023", read in the configured time zone) so turns keep their order.
An image turn's caption (LoCoMo's blip_caption) becomes metadata.caption, the canonical record's field for
an attachment's caption or alt text (docs/ingest.md), which search reads as text of the message; its
img_url and query stay in metadata as they are. The dia_id (D3:7) is the source_message_id.
"""

from __future__ import annotations

import csv
import glob
import io
import logging
import re
import tomllib
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson

from models.messages import RecordProblem

logger = logging.getLogger(__name__)

LOG_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".csv", ".parquet")
FORMATS = ("auto", "jsonl", "json", "csv", "parquet", "locomo", "sql")
LOCOMO_TIME_FORMAT = "%I:%M %p on %d %B, %Y"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# A record that could not be parsed at all stands as its RecordProblem.
ReadItem = tuple[int | str, bytes | str | None, "dict[str, Any] | RecordProblem"]


class ReaderError(ValueError):
    """An input that cannot be read at all (missing file, unknown format); the message says which."""


def expand_paths(paths: list[str]) -> list[Path]:
    """Files to read: a file as given, a directory's top-level log files, a glob's matches (sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files.extend(
                sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in LOG_EXTENSIONS)
            )
        elif path.is_file():
            files.append(path)
        elif any(ch in raw for ch in "*?["):
            files.extend(sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file()))
        else:
            raise ReaderError(f"{raw}: no such file or directory")
    return list(dict.fromkeys(p.resolve() for p in files))


def detect_format(path: Path) -> str:
    """jsonl, csv, parquet, or for .json files locomo (LoCoMo's keys near the start) or json (a list)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".parquet"):
        return suffix[1:]
    if suffix == ".json":
        with path.open("rb") as handle:
            head = handle.read(4096)
        markers = (b'"conversation"', b'"sample_id"', b'"qa"')
        return "locomo" if any(marker in head for marker in markers) else "json"
    raise ReaderError(f"{path}: cannot tell the format from the extension {suffix!r}; pass --format")


def load_mapping(pairs: list[str] | None = None, mapping_file: str | Path | None = None) -> dict[str, str]:
    """Source column -> canonical field, from a YAML/TOML file ({src: dst} or under 'columns') and pairs."""
    mapping: dict[str, str] = {}
    if mapping_file:
        path = Path(mapping_file)
        try:
            if path.suffix.lower() == ".toml":
                loaded = tomllib.loads(path.read_text(encoding="utf-8"))
            else:
                import yaml

                loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ReaderError(f"mapping file {path}: {exc}") from None
        if isinstance(loaded, dict) and isinstance(loaded.get("columns"), dict):
            loaded = loaded["columns"]
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise ReaderError(f"mapping file {path}: expected source_column: canonical_field pairs")
        mapping.update({str(k): v for k, v in loaded.items()})
    for pair in pairs or []:
        src, sep, dst = pair.partition("=")
        if not sep or not src.strip() or not dst.strip():
            raise ReaderError(f"--map {pair!r}: expected source_column=canonical_field")
        mapping[src.strip()] = dst.strip()
    return mapping


def _rename(record: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    return {mapping.get(key, key): value for key, value in record.items()} if mapping else record


def read_chunks(
    path: Path, fmt: str, chunk_rows: int, tz: ZoneInfo, mapping: dict[str, str] | None = None
) -> Iterator[list[ReadItem]]:
    """Chunks of items from one file in the given format (not 'auto' or 'sql')."""
    mapping = mapping or {}
    if fmt == "jsonl":
        return _chunked(_jsonl_items(path, mapping), chunk_rows)
    if fmt == "json":
        return _chunked(_json_array_items(path, mapping), chunk_rows)
    if fmt == "csv":
        return _chunked(_csv_items(path, mapping), chunk_rows)
    if fmt == "parquet":
        return _parquet_chunks(path, chunk_rows, mapping)
    if fmt == "locomo":
        return _chunked(_locomo_items(path, tz), chunk_rows)
    raise ReaderError(f"{path}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def _chunked(items: Iterator[ReadItem], size: int) -> Iterator[list[ReadItem]]:
    chunk: list[ReadItem] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _jsonl_items(path: Path, mapping: dict[str, str]) -> Iterator[ReadItem]:
    loads = orjson.loads
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = loads(line)
            except orjson.JSONDecodeError as exc:
                if not line.endswith(b"\n"):  # the last line, still being written: read again next run
                    logger.warning(
                        "%s line %d: no newline yet and not JSON: left for the next run (a writer may still "
                        "be appending to the file)",
                        path.name,
                        number,
                    )
                    continue
                yield number, line, _line_error(line, exc)
                continue
            if type(value) is not dict:
                yield (
                    number,
                    line,
                    RecordProblem(
                        field=None, reason="not_an_object", error=f"line {number} is JSON but not an object"
                    ),
                )
                continue
            yield number, line, (_rename(value, mapping) if mapping else value)


def _line_error(line: bytes, exc: orjson.JSONDecodeError) -> RecordProblem:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        error = f"the line is not valid UTF-8 (byte {bad.start}: {bad.reason})"
        return RecordProblem(field=None, reason="invalid_utf8", error=error)
    return RecordProblem(field=None, reason="malformed_json", error=f"the line is not valid JSON: {exc}")


def _json_array_items(path: Path, mapping: dict[str, str]) -> Iterator[ReadItem]:
    try:
        records = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        yield (
            0,
            None,
            RecordProblem(field=None, reason="malformed_json", error=f"the file is not valid JSON: {exc}"),
        )
        return
    if isinstance(records, dict):
        records = records.get("messages", [records])
    for number, record in enumerate(records, start=1):
        if isinstance(record, dict):
            yield number, None, _rename(record, mapping)
        else:
            yield (
                number,
                orjson.dumps(record),
                RecordProblem(field=None, reason="not_an_object", error=f"item {number} is not an object"),
            )


def _csv_items(path: Path, mapping: dict[str, str]) -> Iterator[ReadItem]:
    with path.open("rb") as binary:
        text = io.TextIOWrapper(binary, encoding="utf-8", errors="surrogateescape", newline="")
        reader = csv.reader(text)
        header = next(reader, None)
        if header is None:
            return
        header = [mapping.get(name.strip(), name.strip()) for name in header]
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:  # e.g. a field over the csv module's size limit; the reader goes on
                yield (
                    reader.line_num,
                    None,
                    RecordProblem(
                        field=None, reason="malformed_row", error=f"the row is not valid CSV: {exc}"
                    ),
                )
                continue
            number = reader.line_num
            if not row:
                continue
            raw = ",".join(row).encode("utf-8", errors="surrogateescape")
            if len(row) != len(header):
                error = f"row has {len(row)} cells, the header has {len(header)}"
                yield number, raw, RecordProblem(field=None, reason="malformed_row", error=error)
                continue
            try:
                "".join(row).encode("utf-8")
            except UnicodeEncodeError:
                yield (
                    number,
                    raw,
                    RecordProblem(field=None, reason="invalid_utf8", error="the row is not valid UTF-8"),
                )
                continue
            record: dict[str, Any] = {
                key: value for key, value in zip(header, row, strict=True) if value != ""
            }
            if "metadata" in record:
                try:
                    record["metadata"] = orjson.loads(record["metadata"])
                except orjson.JSONDecodeError:
                    pass  # left a string: validation names the field
            yield number, raw, record


def _parquet_chunks(path: Path, chunk_rows: int, mapping: dict[str, str]) -> Iterator[list[ReadItem]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise ReaderError(f"{path}: not a readable Parquet file ({exc})") from None
    row = 0
    for batch in parquet.iter_batches(batch_size=chunk_rows):
        chunk: list[ReadItem] = []
        for record in batch.to_pylist():
            row += 1
            record = {key: value for key, value in record.items() if value is not None}
            if isinstance(record.get("metadata"), str):
                try:
                    record["metadata"] = orjson.loads(record["metadata"])
                except orjson.JSONDecodeError:
                    pass
            chunk.append((row, None, _rename(record, mapping)))
        yield chunk


def _locomo_items(path: Path, tz: ZoneInfo) -> Iterator[ReadItem]:
    try:
        samples = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        yield (
            0,
            None,
            RecordProblem(field=None, reason="malformed_json", error=f"the file is not valid JSON: {exc}"),
        )
        return
    for sample in samples if isinstance(samples, list) else [samples]:
        yield from _locomo_sample(sample, tz)


def _locomo_sample(sample: dict[str, Any], tz: ZoneInfo) -> Iterator[ReadItem]:
    sample_id = str(sample.get("sample_id") or "")
    conversation = sample.get("conversation") or {}
    speakers = [conversation.get("speaker_a"), conversation.get("speaker_b")]
    sessions = sorted(
        (int(key.split("_")[1]), key)
        for key, value in conversation.items()
        if key.startswith("session_") and isinstance(value, list) and key.split("_")[1].isdigit()
    )
    for number, key in sessions:
        raw_time = conversation.get(f"{key}_date_time")
        try:
            started: datetime | None = datetime.strptime(str(raw_time).strip(), LOCOMO_TIME_FORMAT).replace(
                tzinfo=tz
            )
        except ValueError:
            started = None
        for index, turn in enumerate(conversation[key]):
            position = f"{sample_id}:{turn.get('dia_id', f'{key}#{index}')}"
            if started is None:
                error = f"field '{key}_date_time': cannot read {raw_time!r} as a LoCoMo session time"
                yield (
                    position,
                    orjson.dumps(turn),
                    RecordProblem(field="created_at", reason="bad_timestamp", error=error),
                )
                continue
            metadata: dict[str, Any] = {
                "speaker": turn.get("speaker"),
                "speakers": speakers,
                "session": number,
                "session_date_time": raw_time,
            }
            if turn.get("blip_caption"):
                metadata["caption"] = turn["blip_caption"]
            for extra in ("img_url", "query"):
                if extra in turn:
                    metadata[extra] = turn[extra]
            record = {
                "conversation_id": sample_id,
                "subject_id": sample_id,
                "source_message_id": turn.get("dia_id"),
                "role": "user",
                "content": turn.get("text"),
                "created_at": started + timedelta(seconds=index),
                "source": f"locomo:{sample_id}",
                "lang": "en",
                "metadata": metadata,
            }
            yield position, None, record


def read_sql_chunks(
    url: str,
    query: str,
    chunk_rows: int,
    mapping: dict[str, str] | None = None,
    since: str | None = None,
    watermark_column: str = "updated_at",
) -> Iterator[list[ReadItem]]:
    """Rows of a query against any SQLAlchemy URL, streamed; with `since`, only rows whose watermark column
    (after mapping) is later than it. The caller tracks the largest watermark value it saw."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    mapping = mapping or {}
    source_column = next((src for src, dst in mapping.items() if dst == watermark_column), watermark_column)
    if not IDENTIFIER.fullmatch(source_column):
        raise ReaderError(f"the watermark column {source_column!r} is not a plain SQL column name")
    statement = query
    params: dict[str, Any] = {}
    if since is not None:
        statement = f"select * from ({query.rstrip().rstrip(';')}) as src where src.{source_column} > :since"
        params = {"since": datetime.fromisoformat(since)}
    try:
        engine = create_engine(url)
    except (SQLAlchemyError, ValueError) as exc:
        raise ReaderError(f"--url: not a usable SQLAlchemy URL: {exc}") from None
    try:
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=chunk_rows).execute(
                text(statement), params
            )
            row_number = 0
            for partition in result.mappings().partitions(chunk_rows):
                chunk: list[ReadItem] = []
                for row in partition:
                    row_number += 1
                    record = {key: value for key, value in row.items() if value is not None}
                    chunk.append((row_number, None, _rename(record, mapping)))
                yield chunk
    except SQLAlchemyError as exc:
        raise ReaderError(f"SQL source failed: {str(getattr(exc, 'orig', exc)).strip()}") from None
    finally:
        engine.dispose()
