"""Data-subject deletion: every table left without a row of the subject; other subjects untouched."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pyarrow.parquet as pq
from sqlalchemy import text

from strataflow.hashes import content_hash
from strataflow.memory.store import upsert_item
from strataflow.pipeline.expire import expire_l1
from strataflow.pipeline.forget import NOT_REACHED, forget_subject
from strataflow.pipeline.reflect import reflect_pending
from strataflow.pipeline.rollup import rollup_weeks

SCOPED_TABLES = (
    "conversation_messages",
    "message_keys",
    "memory_items",
    "memory_item_versions",
    "profile_documents",
    "weekly_reports",
    "insights",
    "llm_cache",
    "llm_calls",
    "quarantine",
)


def rows_of(engine, namespace, subject):
    """Rows naming (namespace, subject) in every table with a subject, watermarks, raw quarantine."""
    with engine.connect() as conn:
        counts = {
            table: conn.execute(
                text(f"select count(*) from {table} where namespace = :ns and subject_id = :s"),
                {"ns": namespace, "s": subject},
            ).scalar_one()
            for table in SCOPED_TABLES
        }
        counts["watermarks"] = conn.execute(
            text("select count(*) from watermarks where namespace = :ns and scope = :s"),
            {"ns": namespace, "s": subject},
        ).scalar_one()
        counts["quarantine_raw"] = conn.execute(
            text("select count(*) from quarantine where strpos(raw_record, :needle) > 0"),
            {"needle": f'"subject_id": "{subject}"'},
        ).scalar_one()
        counts["embedding_cache"] = conn.execute(
            text("select count(*) from embedding_cache where content_hash = :h"),
            {"h": content_hash(f"My passport number is {subject}-X1.")},
        ).scalar_one()
    return counts


def seed_subject(engine, settings, add_messages, namespace, subject, monday):
    ids = add_messages(
        namespace,
        subject,
        [
            (monday + timedelta(hours=9), "user", f"My passport number is {subject}-X1."),
            (monday + timedelta(days=1, hours=9), "user", "I am 34 years old."),
        ],
    )
    with engine.begin() as conn:
        for age, day in ((34, 0), (35, 2)):  # two versions: memory_item_versions holds both
            upsert_item(
                conn, namespace=namespace, subject_id=subject, kind="fact", key="age", value=age,
                statement=f"I am {age} years old.", event_at=monday + timedelta(days=day),
                source_message_ids=ids[1:],
            )  # fmt: skip
        conn.execute(
            text(
                "insert into profile_documents (namespace, subject_id, doc_type, document) "
                "values (:ns, :s, 'user', '{\"age\": {\"value\": 35}}')"
            ),
            {"ns": namespace, "s": subject},
        )
        conn.execute(
            text("insert into watermarks (stage, namespace, scope, position) values ('extract', :ns, :s, 9)"),
            {"ns": namespace, "s": subject},
        )
        conn.execute(
            text(
                "insert into quarantine (namespace, subject_id, source, position, reason, error, raw_record) "
                "values (:ns, :s, :file, '3', 'bad_timestamp', 'bad time', '{}'), "
                "(null, null, 'y.jsonl', '4', 'missing_field', 'no namespace', :raw)"
            ),
            {
                "ns": namespace,
                "s": subject,
                "file": f"{subject}.jsonl",  # one record per subject (sql/283)
                "raw": json.dumps({"subject_id": subject, "content": "hi"}),
            },
        )
        conn.execute(
            text(
                "insert into embedding_cache (model, content_hash, embedding) values ('m', :h, :v) "
                "on conflict do nothing"
            ),
            {"h": content_hash(f"My passport number is {subject}-X1."), "v": [0.1] * 384},
        )
    return ids


def test_forget_leaves_no_row_of_the_subject_in_any_table(
    settings, engine, add_messages, namespace, old_monday
):
    seed_subject(engine, settings, add_messages, namespace, "gone", old_monday)
    kept_ids = seed_subject(engine, settings, add_messages, namespace, "stays", old_monday)
    rollup_weeks(settings, namespace=namespace)
    reflect_pending(settings, namespace=namespace)
    archived = expire_l1(settings.model_copy(update={"archive_expired": True}), namespace=namespace)
    before = rows_of(engine, namespace, "gone")
    assert all(
        before[t] > 0
        for t in (
            "message_keys",
            "memory_items",
            "memory_item_versions",
            "weekly_reports",
            "insights",
            "llm_cache",
            "llm_calls",
            "watermarks",
            "quarantine_raw",
        )
    )

    result = forget_subject(settings, namespace, "gone")

    assert rows_of(engine, namespace, "gone") == {table: 0 for table in before}
    stays = rows_of(engine, namespace, "stays")
    assert all(
        stays[t] > 0 for t in ("message_keys", "memory_items", "weekly_reports", "insights", "watermarks")
    )
    archive = pq.read_table(archived.archive_path).to_pylist()
    assert {row["subject_id"] for row in archive} == {"stays"}
    assert sorted(row["message_id"] for row in archive) == kept_ids
    assert result.counts["archive_rows"] == 2 and result.counts["memory_item_versions"] == 2
    assert result.counts["llm_calls_unlinked"] == before["llm_calls"]
    with engine.connect() as conn:
        saved = conn.execute(
            text("select * from deletion_reports where report_id = :id"), {"id": result.report_id}
        ).one()
    digest = hashlib.sha256(f"{namespace}\x00gone".encode()).hexdigest()
    assert (saved.kind, saved.subject_id) == ("forget", f"sha256:{digest}")
    assert saved.counts == {
        "total": {"removed": result.total},
        "by_table": result.counts,
        "not_reached": list(NOT_REACHED),  # the PostgreSQL log, the WAL, ...: said, not silently skipped
    }
    assert result.total == sum(result.counts.values()) - result.counts["llm_calls_unlinked"]
    assert "gone" not in json.dumps(saved.counts)
