"""Seed 000 save_info / summarize and seed 002 profile documents (plain functions on the `conn` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.vocabulary import PROFILE_KEYS
from strataflow.memory.profiles import (
    build_profile_documents,
    get_profile,
    patch_profile,
    put_profile,
    render_profile_block,
    save_info,
    set_profile_status,
    summarize,
)
from strataflow.memory.store import upsert_item

SEED_000 = {
    "age": 32,
    "education": "硕士",
    "university": "浙江大学",
    "major": "计算机",
    "job_title": "前端开发",
    "years_of_experience": 8,
    "annual_income": 800000,
    "location": "杭州",
}


def test_save_info_skips_equal_values_and_newer_values_override(conn):
    first = save_info(conn, "pf", "u1", SEED_000, event_at=datetime(2026, 11, 1, tzinfo=UTC))
    assert (first.saved_count, first.skipped_fields) == (8, [])
    second = save_info(
        conn, "pf", "u1", {"age": 32, "location": "上海"}, event_at=datetime(2026, 11, 9, tzinfo=UTC)
    )
    assert second.model_dump() == {
        "extracted_info": {"age": 32, "location": "上海"},
        "saved_count": 1,
        "skipped_fields": ["age"],
        "actions": {"age": "unchanged", "location": "content_modified"},
    }
    assert summarize(conn, "pf", "u1").basic == {"age": 32, "location": "上海"}


def test_summarize_groups_sections_scores_completeness_and_narrates(conn):
    save_info(conn, "pf", "u2", {**SEED_000, "target_programs": ["QMAS"], "marital_status": "已婚"})
    summary = summarize(conn, "pf", "u2")
    assert summary.career == {
        "education": "硕士",
        "university": "浙江大学",
        "major": "计算机",
        "job_title": "前端开发",
        "years_of_experience": 8,
        "annual_income": 800000,
    }
    assert summary.immigration == {"target_programs": ["QMAS"]} and summary.family == {
        "marital_status": "已婚"
    }
    assert summary.completeness == round(100 * 10 / len(PROFILE_KEYS))
    assert "浙江大学" in summary.narrative and "800000" in summary.narrative
    empty = summarize(conn, "pf", "nobody")
    assert (empty.completeness, empty.basic) == (0, {})


def test_documents_carry_field_meta_and_split_user_from_work(conn):
    save_info(conn, "pf", "u3", {"age": 32, "job_title": "前端开发"})
    upsert_item(
        conn,
        namespace="pf",
        subject_id="u3",
        kind="decision",
        key="decision_framework",
        value="react",
        statement="we chose react",
        confidence=0.8,
        event_at=datetime(2026, 11, 1, tzinfo=UTC),
    )
    docs = build_profile_documents(conn, "pf", "u3")
    assert set(docs["user"]) == {"age"} and set(docs["work"]) == {"job_title", "decision_framework"}
    field = docs["work"]["decision_framework"]
    assert (field["value"], field["source"], field["confidence"], field["kind"]) == (
        "react",
        "extracted",
        0.8,
        "decision",
    )
    assert datetime.fromisoformat(field["last_updated_at"]).tzinfo is not None


def test_patch_is_manual_and_put_replaces_the_document(conn):
    save_info(conn, "pf", "u4", {"age": 32, "location": "杭州"})
    patched = patch_profile(conn, "pf", "u4", "user", {"location": "上海"})
    assert (
        patched.document["location"]["source"] == "manual"
        and patched.document["age"]["source"] == "extracted"
    )
    # extraction (source extracted) no longer changes the manual field
    later = save_info(conn, "pf", "u4", {"location": "深圳"}, event_at=datetime(2030, 1, 1, tzinfo=UTC))
    assert later.actions == {"location": "manual_protected"}
    put = put_profile(conn, "pf", "u4", "user", {"age": 33})
    assert {k: (v["value"], v["source"]) for k, v in put.document.items()} == {"age": (33, "manual")}
    assert put.version > patched.version
    assert render_profile_block(put) == "<user-profile>\nage: 33\n</user-profile>"


def test_status_toggles_between_active_and_disabled(conn):
    save_info(conn, "pf", "u5", {"age": 40})
    assert set_profile_status(conn, "pf", "u5", "work", "DISABLED")
    assert get_profile(conn, "pf", "u5", "work").status == "DISABLED"
    with pytest.raises(ValueError, match="ACTIVE or DISABLED"):
        set_profile_status(conn, "pf", "u5", "work", "GONE")
    assert not set_profile_status(conn, "pf", "missing", "user", "ACTIVE")
