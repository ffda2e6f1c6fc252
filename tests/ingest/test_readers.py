"""Streaming readers: every format yields canonical dicts (or a RecordProblem) with their position."""

from __future__ import annotations

import csv
import json
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from models.messages import RecordProblem
from strataflow.ingest.readers import (
    ReaderError,
    detect_format,
    expand_paths,
    load_mapping,
    read_chunks,
    read_sql_chunks,
)
from tests.fixtures.locomo_format import write_locomo

UTC = ZoneInfo("UTC")
ROW = {
    "conversation_id": "c1",
    "subject_id": "u1",
    "source_message_id": "m1",
    "role": "user",
    "content": "hello",
    "created_at": "2026-11-01T10:00:00",
}


def _items(path: Path, fmt: str, mapping: dict[str, str] | None = None, chunk_rows: int = 100) -> list:
    return [item for chunk in read_chunks(path, fmt, chunk_rows, UTC, mapping) for item in chunk]


def test_jsonl_reader_yields_line_numbers_and_marks_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_bytes(
        json.dumps(ROW).encode() + b"\n\n" + b'{"content": "\n' + b"[1, 2]\n" + b'{"content": "caf\xe9"}\n'
    )
    items = _items(path, "jsonl")
    assert [item[0] for item in items] == [1, 3, 4, 5]
    assert items[0][2] == ROW
    assert [item[2].reason for item in items[1:]] == ["malformed_json", "not_an_object", "invalid_utf8"]
    assert items[3][1] == b'{"content": "caf\xe9"}\n'  # the raw bytes travel to quarantine


def test_chunks_are_bounded_by_chunk_rows(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_text("".join(json.dumps({**ROW, "source_message_id": f"m{i}"}) + "\n" for i in range(25)))
    sizes = [len(chunk) for chunk in read_chunks(path, "jsonl", 10, UTC)]
    assert sizes == [10, 10, 5]


def test_csv_reader_applies_the_column_mapping_and_flags_short_rows(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["thread", "user", "msg_id", "speaker_role", "text", "ts", "metadata"])
        writer.writerow(
            ["c1", "u1", "7", "user", "multi\nline, with comma", "2026-11-01 10:00:00", '{"a": 1}']
        )
        writer.writerow(["c1", "u1"])
        # over csv's field size limit
        writer.writerow(["c1", "u1", "8", "user", "x" * 200_000, "2026-11-01", "{}"])
        writer.writerow(["c1", "u1", "9", "user", "still read", "2026-11-01", "{}"])
    mapping = load_mapping(
        ["thread=conversation_id", "user=subject_id", "msg_id=source_message_id", "speaker_role=role"]
    )
    mapping.update({"text": "content", "ts": "created_at"})
    items = _items(path, "csv", mapping)
    assert items[0][2] == {
        "conversation_id": "c1",
        "subject_id": "u1",
        "source_message_id": "7",
        "role": "user",
        "content": "multi\nline, with comma",
        "created_at": "2026-11-01 10:00:00",
        "metadata": {"a": 1},
    }
    assert isinstance(items[1][2], RecordProblem) and items[1][2].reason == "malformed_row"
    assert isinstance(items[2][2], RecordProblem) and items[2][2].reason == "malformed_row"
    assert items[3][2]["content"] == "still read"  # the rows after a bad one are read


def test_parquet_reader_streams_batches_with_row_numbers(tmp_path: Path) -> None:
    path = tmp_path / "logs.parquet"
    rows = [
        {**ROW, "source_message_id": f"m{i}", "created_at": datetime(2026, 11, 1, 10, i)} for i in range(5)
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    chunks = list(read_chunks(path, "parquet", 2, UTC))
    assert [len(chunk) for chunk in chunks] == [2, 2, 1]
    assert chunks[2][0][0] == 5 and chunks[2][0][2]["source_message_id"] == "m4"


def test_locomo_reader_maps_turns_sessions_and_images(locomo_path: Path) -> None:
    items = _items(locomo_path, "locomo", chunk_rows=10_000)
    first = items[0][2]
    samples = json.loads(locomo_path.read_text())
    sample = samples[0]
    assert items[0][0] == f"{sample['sample_id']}:D1:1"
    assert first["source_message_id"] == "D1:1" and first["source"] == f"locomo:{sample['sample_id']}"
    assert first["subject_id"] == first["conversation_id"] == sample["sample_id"] and first["role"] == "user"
    assert first["created_at"] == datetime(2022, 3, 14, 14, 5, tzinfo=UTC)  # "2:05 pm on 14 March, 2022"
    assert items[1][2]["created_at"] == first["created_at"] + timedelta(seconds=1)  # turns keep their order
    assert first["metadata"]["speaker"] == sample["conversation"]["speaker_a"]
    assert first["metadata"]["speakers"] == [
        sample["conversation"]["speaker_a"],
        sample["conversation"]["speaker_b"],
    ]
    turns = {
        (s["sample_id"], turn["dia_id"]): turn
        for s in samples
        for k, v in s["conversation"].items()
        if k.split("_")[-1].isdigit()
        for turn in v
    }
    assert len(items) == len(turns)
    with_images = [r for _, _, r in items if "img_url" in turns[r["subject_id"], r["source_message_id"]]]
    assert len(with_images) == 5
    for record in with_images:  # the caption is the canonical metadata.caption; LoCoMo's name is not kept
        turn = turns[record["subject_id"], record["source_message_id"]]
        assert (
            record["metadata"]["caption"] == turn["blip_caption"] and "blip_caption" not in record["metadata"]
        )
        assert (record["metadata"]["img_url"], record["metadata"]["query"]) == (
            turn["img_url"],
            turn["query"],
        )
    assert sum("caption" in item[2]["metadata"] for item in items) == len(with_images)


def test_locomo_reader_reports_each_turn_of_a_session_whose_date_it_cannot_read(
    tmp_path: Path, locomo_path: Path
) -> None:
    samples = json.loads(locomo_path.read_text())
    samples[1]["conversation"]["session_2_date_time"] = "sometime in late September"
    items = _items(write_locomo(tmp_path / "bad_date.json", samples), "locomo", chunk_rows=7)
    errors = [item for item in items if isinstance(item[2], RecordProblem)]
    assert len(errors) == len(samples[1]["conversation"]["session_2"])
    assert {item[0] for item in errors} == {f"fx-2:D2:{n}" for n in range(1, len(errors) + 1)}
    assert all(e[2].field == "created_at" and e[2].reason == "bad_timestamp" and e[1] for e in errors)
    good = [item[2]["source_message_id"] for item in items if not isinstance(item[2], RecordProblem)]
    every = [item[2]["source_message_id"] for item in _items(locomo_path, "locomo", chunk_rows=7)]
    assert len(good) == len(every) - len(errors)


def test_sql_reader_reads_rows_after_the_watermark(tmp_path: Path) -> None:
    database = tmp_path / "source.db"
    with sqlite3.connect(database) as db:
        db.execute("create table chat (thread text, body text, changed text)")
        db.executemany(
            "insert into chat values (?, ?, ?)", [("c1", "old", "2026-01-01"), ("c1", "new", "2026-02-01")]
        )
    mapping = {"body": "content", "changed": "updated_at"}
    url, query = f"sqlite:///{database}", "select * from chat"
    everything = [item for chunk in read_sql_chunks(url, query, 100, mapping) for item in chunk]
    assert [item[2]["content"] for item in everything] == ["old", "new"]
    newer = [
        item for chunk in read_sql_chunks(url, query, 100, mapping, since="2026-01-15") for item in chunk
    ]
    assert [item[2]["content"] for item in newer] == ["new"]


def test_paths_expand_directories_and_globs_and_formats_are_detected(
    tmp_path: Path, locomo_path: Path
) -> None:
    for name in ("a.jsonl", "b.csv", "notes.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.jsonl").write_text("x")
    assert [p.name for p in expand_paths([str(tmp_path)])] == [
        "a.jsonl",
        "b.csv",
    ]  # top level, log extensions
    assert [p.name for p in expand_paths([str(tmp_path / "*.csv")])] == ["b.csv"]
    assert detect_format(tmp_path / "b.csv") == "csv" and detect_format(locomo_path) == "locomo"
    with pytest.raises(ReaderError, match="no such file"):
        expand_paths([str(tmp_path / "missing.jsonl")])


def test_mapping_file_in_yaml_or_toml(tmp_path: Path) -> None:
    (tmp_path / "map.yaml").write_text("columns:\n  text: content\n  ts: created_at\n")
    (tmp_path / "map.toml").write_text('text = "content"\n')
    assert load_mapping(None, tmp_path / "map.yaml") == {"text": "content", "ts": "created_at"}
    assert load_mapping(["ts=created_at"], tmp_path / "map.toml") == {"text": "content", "ts": "created_at"}
    with pytest.raises(ReaderError, match="src=dst|source_column=canonical_field"):
        load_mapping(["nonsense"])
