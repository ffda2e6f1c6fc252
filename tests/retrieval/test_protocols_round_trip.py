"""The shapes `../shared/checks/protocols` reads, at the library level the service calls one-to-one: the
bilingual sample ingested and extracted as a new user would, then each seed's round trip."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from strataflow.config import Settings
from strataflow.demo.sample import write_sample
from strataflow.memory.profiles import get_profiles, patch_profile, set_profile_status
from strataflow.memory.user_memory import summarize
from strataflow.pipeline.extract import extract_new
from strataflow.pipeline.hot_memory import refresh_hot_memory
from strataflow.pipeline.ingest import ingest_logs
from strataflow.pipeline.save_info import save_exchange
from strataflow.retrieval.context import build_context


def test_the_sample_gives_every_seed_shape_the_protocols_check_reads(
    engine: Engine, settings: Settings, namespace: str, tmp_path: Path
) -> None:
    write_sample(tmp_path)
    consulting, team = f"{namespace}_c", f"{namespace}_t"
    ingest_logs(settings, [tmp_path / "consulting_zh.jsonl"], namespace=consulting, progress=False)
    ingest_logs(settings, [tmp_path / "project_en.jsonl"], namespace=team, progress=False)
    for ns in (consulting, team):
        assert extract_new(settings, namespace=ns, progress=False).errors == []
        assert refresh_hot_memory(settings, namespace=ns).errors == []

    with engine.connect() as conn:
        work = get_profiles(conn, team, "proj_atlas")["work_memory"]
        user = get_profiles(conn, consulting, "client_03")["user_memory"]
    members = work["team_members"]
    assert members and all(m["name"] and "source" in m["meta"] for m in members), work
    assert isinstance(work["current_projects"], list) and work["current_projects"]
    assert isinstance(user["people"], list) and isinstance(user["places"], list) and user["places"]

    def context(**kw: Any) -> Any:
        with engine.connect() as conn:
            return build_context(
                conn, settings, consulting, kw.pop("subject", "client_03"), kw.pop("query"), **kw
            )

    question = "这位客户的学历和工作是什么？"
    assert "<!-- USER_MEMORY_START -->" in context(query=question, profile="user").text
    with engine.begin() as conn:
        set_profile_status(conn, consulting, "client_03", "user", "disabled")
    assert "USER_MEMORY_START" not in context(query=question, profile="user").text
    with engine.begin() as conn:
        set_profile_status(conn, consulting, "client_03", "user", "active")
    assert "hot_summary" in context(query="他在哪里工作？", fmt="json").text
    assert context(subject="nobody_here", query="anything at all").text == ""

    exchange = ("我今年四十出头，在成都做律师，年薪大概50万。", "好的，了解了，谢谢您的介绍。")
    with engine.begin() as conn:
        first = save_exchange(conn, settings, consulting, "newcomer_01", *exchange)
        again = save_exchange(conn, settings, consulting, "newcomer_01", *exchange)
        summary = summarize(conn, consulting, "client_03")
        patched = patch_profile(conn, consulting, "u1", "user", {"occupation": "data engineer"})
        profiles = get_profiles(conn, consulting, "u1")
    # seed 000 save_info's shape (what the offline rules extract from it: tests/llm/offline)
    assert first.saved_count >= 1 and len(first.saved_memories) == first.saved_count
    assert sorted(m.field for m in first.saved_memories) == sorted(first.extracted_info)
    assert all(m.memoryType and m.content and m.importance is not None for m in first.saved_memories)
    assert (again.saved_count, again.saved_memories) == (0, [])
    assert sorted(again.skipped_fields) == sorted(first.extracted_info), (
        "the same exchange saves nothing twice"
    )
    completeness = summary.completeness.model_dump()
    assert set(completeness) == {"score", "filled_fields", "missing_fields"}
    assert re.search(r"[\u4e00-\u9fff]", summary.narrative_summary)
    assert patched.content["occupation"] == "data engineer" == profiles["user_memory"]["occupation"]
    assert "work_memory" in profiles
