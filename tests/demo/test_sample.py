"""The sample generator: deterministic, small, bilingual, with a facts sidecar and assets."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import Engine, text

from models.vocabulary import PROFILE_KEYS
from strataflow.config import Settings
from strataflow.demo.sample import write_sample
from strataflow.pipeline.ingest import ingest_logs

TZ = ZoneInfo("Asia/Shanghai")
AGE_RANGE = re.compile(r"(?P<d>[1-9])0(?:\+|-(?P=d)9)")  # an open bound (40+) or a decade (40-49)


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def test_same_seed_and_end_date_give_identical_files_and_another_seed_differs(tmp_path: Path) -> None:
    write_sample(tmp_path / "a", seed=3, end_date=date(2026, 6, 30), tz=TZ)
    write_sample(tmp_path / "b", seed=3, end_date=date(2026, 6, 30), tz=TZ)
    write_sample(tmp_path / "c", seed=4, end_date=date(2026, 6, 30), tz=TZ)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert _files(tmp_path / "a") != _files(tmp_path / "c")
    assert set(_files(tmp_path / "a")) == {
        "consulting_zh.jsonl",
        "project_en.jsonl",
        "facts/facts.jsonl",
        "assets/programs.md",
        "assets/team_roster.csv",
        "assets/release_plan.json",
    }


def test_sample_spans_the_weeks_up_to_yesterday_and_stays_small(tmp_path: Path) -> None:
    summary = write_sample(tmp_path, tz=TZ)
    messages = [
        json.loads(line)
        for f in ("consulting_zh.jsonl", "project_en.jsonl")
        for line in (tmp_path / f).open()
    ]
    times = [datetime.fromisoformat(m["created_at"]).astimezone(TZ).date() for m in messages]
    yesterday = datetime.now(TZ).date() - timedelta(days=1)
    assert max(times) <= yesterday and min(times) >= yesterday - timedelta(days=6 * 7 - 1)
    assert summary.messages == len(messages) <= 3000 and len({m["subject_id"] for m in messages}) == 6
    assert {m["role"] for m in messages} == {"user", "assistant"}


def test_facts_point_at_messages_that_state_them_with_canonical_values(tmp_path: Path) -> None:
    write_sample(tmp_path, seed=11, end_date=date(2026, 3, 1), tz=TZ)
    messages = {
        json.loads(line)["source_message_id"]: json.loads(line)
        for f in ("consulting_zh.jsonl", "project_en.jsonl")
        for line in (tmp_path / f).open()
    }
    facts = [json.loads(line) for line in (tmp_path / "facts" / "facts.jsonl").open()]
    assert facts and all(f["source_message_id"] in messages for f in facts)
    profile = [f for f in facts if f["subject_id"].startswith("client_")]
    assert {f["key"] for f in profile} <= PROFILE_KEYS
    for fact in profile:
        said = messages[fact["source_message_id"]]["content"]
        if fact["key"] == "annual_income":
            assert isinstance(fact["value"], int) and str(fact["value"] // 10000) in said  # 80万 -> 800000
        if fact["key"] == "age":  # a number, or a range kept as the documented string (never a midpoint)
            assert isinstance(fact["value"], int) or AGE_RANGE.fullmatch(fact["value"]), fact
        if fact["key"] == "university":
            assert fact["value"].endswith("大学")  # full names, even when the client used 浙大 or 港大
    team = [f for f in facts if f["subject_id"].startswith("proj_")]
    assert {f["kind"] for f in team} >= {"decision", "status"}


def test_sample_ingests_cleanly_and_twice_inserts_nothing(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    write_sample(tmp_path, subjects=1, weeks=2, seed=5, tz=settings.tz)
    first = ingest_logs(settings, [tmp_path], namespace=namespace, progress=False)
    assert first.quarantined == 0 and first.inserted == first.read > 0 and first.files == 2
    second = ingest_logs(settings, [tmp_path], namespace=namespace, progress=False)
    assert (second.inserted, second.files_skipped) == (0, 2)
    with engine.connect() as conn:
        intents = conn.execute(
            text("select count(distinct intent) from conversation_messages where namespace = :ns"),
            {"ns": namespace},
        ).scalar()
    assert intents >= 3
