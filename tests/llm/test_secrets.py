"""Secrets: an API key lives only in the environment. A canary key is really used (the LLM server receives it)
and then appears nowhere we keep or show: ledger, cache, runs, quarantine, any table, Prefect artifacts and
logs, Python log records, console output or exception messages."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.pipeline.extract import extract_new
from strataflow.pipeline.ingest import ingest_logs

TABLES_WITH_TEXT = ("llm_calls", "llm_cache", "pipeline_runs", "quarantine")
BASE_TABLES = text(
    """
    select c.relname from pg_class as c join pg_namespace as n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
    """
)


def _write_log(path: Path, texts: list[str]) -> Path:
    records: list[Any] = [
        {"conversation_id": "c1", "subject_id": "s1", "source_message_id": f"{path.stem}-{i}", "role": "user",
         "content": content, "created_at": f"2026-11-0{2 + i}T09:00:00Z"}
        for i, content in enumerate(texts)
    ]  # fmt: skip
    records.append({"conversation_id": "c1", "subject_id": "s1", "role": "wizard", "content": "bad row"})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _rows_with(engine: Engine, needle: str) -> dict[str, int]:
    """Rows of every table whose whole row, cast to text, contains needle (text and jsonb columns too)."""
    found = {}
    with engine.connect() as conn:
        for table in conn.execute(BASE_TABLES).scalars():
            count = conn.execute(
                text(f'select count(*) from "{table}" as t where strpos(t::text, :needle) > 0'),
                {"needle": needle},
            ).scalar()
            if count:
                found[table] = count
    return found


def _prefect_texts(flow_run_id: str) -> tuple[list[str], list[str]]:
    """(artifacts, logs) of a flow run, as text."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[uuid.UUID(flow_run_id)]))
        )
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[uuid.UUID(flow_run_id)]))
        )
        every_artifact = client.read_artifacts()  # and everything else the API holds, of any run
    texts = [a.model_dump_json() for a in [*artifacts, *every_artifact]]
    return texts, [log.model_dump_json() for log in logs]


def test_a_canary_api_key_is_used_but_appears_nowhere(
    settings: Settings,
    engine: Engine,
    namespace: str,
    tmp_path: Path,
    echo_llm_server: Any,
    prefect_harness: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from flows.nightly import nightly
    from models.params import NightlyParams

    canary = f"sk-canary-{uuid.uuid4()}"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    monkeypatch.setenv("STRATAFLOW_EXTRACT_MODEL", "openai/test-model")  # what the flow's load_settings reads
    monkeypatch.setenv("STRATAFLOW_LLM_API_BASE", echo_llm_server.url)
    caplog.set_level(logging.INFO)
    http = settings.model_copy(
        update={"extract_model": "openai/test-model", "llm_api_base": echo_llm_server.url}
    )
    # The first request fails: an error path is taken and logged.
    echo_llm_server.script = [(500, "upstream exploded")]
    errors: list[str] = []

    ingested = ingest_logs(
        http,
        [_write_log(tmp_path / "a" / "day1.jsonl", ["I live in Porto."])],
        namespace=namespace,
        progress=False,
    )
    extracted = extract_new(http, namespace=namespace, progress=False)
    errors += extracted.errors
    summary = nightly(
        NightlyParams(
            paths=[str(_write_log(tmp_path / "b" / "day2.jsonl", ["I work as a baker now."]))],
            namespace=namespace,
        )
    )
    echo_llm_server.script = [
        (401, "Incorrect API key provided")
    ] * 4  # a refused key: the error must not echo it
    _write_log(tmp_path / "c" / "day3.jsonl", ["I have a dog."])
    ingest_logs(http, [tmp_path / "c"], namespace=namespace, progress=False)
    try:
        errors += extract_new(http, namespace=namespace, progress=False).errors
    except Exception as exc:  # noqa: BLE001 - whatever is raised, its text is searched
        errors += [str(exc), repr(exc), str(exc.__cause__)]

    assert ingested.quarantined == 1 and summary.status == "completed"
    assert echo_llm_server.authorizations and set(echo_llm_server.authorizations) == {
        f"Bearer {canary}"
    }  # it was used
    with engine.connect() as conn:
        outcomes = conn.execute(
            text("select outcome, error from llm_calls where namespace = :ns"), {"ns": namespace}
        ).all()
    assert any(outcome != "ok" and error for outcome, error in outcomes)  # the failures were recorded
    assert _rows_with(engine, "HTTP 500")  # the search below does find what is there: the error's status
    assert _rows_with(engine, "upstream exploded") == {}  # never the provider's text (it may quote users)
    for table in TABLES_WITH_TEXT:
        with engine.connect() as conn:
            assert (
                conn.execute(
                    text(f"select count(*) from {table} where namespace = :ns"), {"ns": namespace}
                ).scalar()
                > 0
                or table == "llm_cache"
            )
    artifacts, logs = _prefect_texts(str(summary.prefect_flow_run_id))
    assert artifacts and logs
    records = [f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records]
    out, err = capfd.readouterr()

    assert _rows_with(engine, canary) == {}
    assert _rows_with(engine, canary[3:20]) == {}  # not even a masked or partial copy
    leaks = {name: [t for t in texts if canary in t or canary[3:20] in t]
             for name, texts in [("artifacts", artifacts), ("prefect logs", logs), ("log records", records),
                                 ("exceptions and errors", errors), ("console", [out, err])]}  # fmt: skip
    assert {name: found for name, found in leaks.items() if found} == {}
