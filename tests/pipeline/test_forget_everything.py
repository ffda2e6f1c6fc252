"""Forget, checked as the subject would: after `forget`, no row of any table or view holds the subject's id or
their words, including quarantined lines that are not JSON, the LLM ledger's errors and run records."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.pipeline.extract import extract_new
from strataflow.pipeline.forget import forget_subject, subject_pattern
from strataflow.pipeline.ingest import ingest_logs

# The subject's passport number: their words, wherever they went. Drawn per run, since the search below reads
# every namespace and other tests store passport numbers of their own.
SECRET = f"E{uuid.uuid4().int % 10**7:07d}"
RELATIONS = text(
    """
    select c.relname from pg_class as c join pg_namespace as n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p', 'v') and not c.relispartition
    order by c.relname
    """
)


def _relations_matching(engine: Engine, pattern: str) -> dict[str, int]:
    """Rows of every table and view whose whole row, as text, matches the regular expression."""
    found = {}
    with engine.connect() as conn:
        for relation in conn.execute(RELATIONS).scalars():
            count = conn.execute(
                text(f'select count(*) from "{relation}" as t where t::text ~ :pattern'), {"pattern": pattern}
            ).scalar()
            if count:
                found[relation] = count
    return found


@pytest.fixture
def subject() -> str:
    return f"client_{uuid.uuid4().hex[:8]}"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_forget_leaves_nothing_of_the_subject_anywhere(
    settings: Settings,
    engine: Engine,
    namespace: str,
    subject: str,
    tmp_path: Path,
    echo_llm_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bystander = subject + "0"  # a longer id that merely starts with the subject's
    record = {"conversation_id": "c1", "subject_id": subject, "source_message_id": "m1", "role": "user",
              "content": f"my passport is {SECRET}", "created_at": "2026-11-02T10:00:00Z"}  # fmt: skip
    lines = [
        json.dumps(record),
        json.dumps({**record, "source_message_id": "m2", "role": "wizard"}),  # valid JSON, invalid record
        f'{{"subject_id" : "{subject}", "content": "my passport is {SECRET}"',  # not JSON; spaced
        json.dumps({**record, "subject_id": bystander, "source_message_id": "b1", "content": "hello"}),
    ]
    ingested = ingest_logs(
        settings, [_write(tmp_path / "s.jsonl", lines)], namespace=namespace, progress=False
    )
    assert (ingested.inserted, ingested.quarantined) == (2, 2)
    with engine.begin() as conn:
        # A quarantine row written before quarantine stored the subject of malformed lines, and run records
        # that name the subject (and one that names only the bystander).
        conn.execute(
            text("insert into quarantine (namespace, source, position, reason, error, raw_record) values "
                 "(:ns, 'old.jsonl', '1', 'malformed_json', 'not JSON', :raw)"),
            {"ns": namespace, "raw": f'{{ "subject_id":\t"{subject}" , "content": "{SECRET}"'},
        )  # fmt: skip
        conn.execute(
            text("insert into pipeline_runs (run_id, flow, namespace, status, counts, error) values "
                 "(:a, 'extract', :ns, 'failed', cast(:counts as jsonb), :error), "
                 "(:b, 'extract', :ns, 'failed', cast(:other as jsonb), null)"),
            {"a": uuid.uuid4(), "b": uuid.uuid4(), "ns": namespace,
             "counts": json.dumps({"errors": [f"{namespace}/{subject}: invalid output"]}),
             "error": f"extraction of {namespace}/{subject} failed",
             "other": json.dumps({"errors": [f"{namespace}/{bystander}: invalid output"]})},
        )  # fmt: skip
    # The model answers with the user's words in a field that fails validation, twice (call and repair).
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-key-1234567890")
    invalid = json.dumps({"items": [{"kind": "fact", "key": f"passport {SECRET}", "value": SECRET}]})
    echo_llm_server.script = [(200, invalid)] * 4  # two scopes, a call and a repair each
    http = settings.model_copy(
        update={"extract_model": "openai/test-model", "llm_api_base": echo_llm_server.url}
    )
    extracted = extract_new(http, namespace=namespace, progress=False)
    assert extracted.units_failed == 2  # the subject's scope and the bystander's
    with engine.connect() as conn:
        errors = conn.execute(
            text("select error from llm_calls where namespace = :ns and subject_id = :s"),
            {"ns": namespace, "s": subject},
        ).scalars().all()  # fmt: skip
    assert len(errors) == 2 and all("validation error" in e and SECRET not in e for e in errors)
    whole_id = subject_pattern(subject)  # the subject's id, not the bystander's longer one
    assert _relations_matching(engine, whole_id) and _relations_matching(engine, SECRET)  # the search works

    result = forget_subject(settings, namespace, subject)

    assert _relations_matching(engine, SECRET) == {}
    assert _relations_matching(engine, whole_id) == {}
    with engine.connect() as conn:
        bystander_runs = conn.execute(
            text("select count(*) from pipeline_runs where namespace = :ns and counts::text like :b"),
            {"ns": namespace, "b": f"%{bystander}%"},
        ).scalar_one()
        bystander_messages = conn.execute(
            text("select count(*) from message_keys where namespace = :ns and subject_id = :b"),
            {"ns": namespace, "b": bystander},
        ).scalar_one()
    assert (bystander_runs, bystander_messages) == (1, 1)
    counted = {
        k: result.counts[k] for k in ("quarantine", "llm_calls_errors_cleared", "pipeline_runs_scrubbed")
    }
    assert counted == {"quarantine": 3, "llm_calls_errors_cleared": 2, "pipeline_runs_scrubbed": 1}
