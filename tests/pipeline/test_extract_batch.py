"""Extraction through the provider's batch API (strataflow/pipeline/extract_batch.py), over litellm's real
files + batches path against an OpenAI-compatible batch server on 127.0.0.1 (tests/fixtures/batch_server.py)
whose answers are the scripted model's: the same items as the synchronous path, cost at the batch price, a
batch that expires partly leaving its scopes for the next run (counted, named, watermarks kept), a batch
left waiting collected by the next run without sending its work again, and the nightly polling with task
retries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from models.params import NightlyParams
from strataflow.cli import app
from strataflow.pipeline.runs import scope_ref
from tests.fixtures.scripted_model import DUMMY_KEY, ScriptedModel, fact

BATCH_MODEL = "openai/gpt-4o-mini"  # litellm's cost map has its batch prices
PEOPLE = {
    "ana": ("I work as a pharmacist in Braga.", fact("job_title", "pharmacist")),
    "bo": ("我住在成都，养了一只猫。", fact("location", "成都")),
    "cy": ("I am allergic to peanuts.", fact("allergy", "peanuts")),
}
SELECT_ITEMS = text(
    "select subject_id, key, value from memory_items where namespace = :ns and kind <> 'hot_summary' "
    "order by subject_id, key"
)
SELECT_RUN = text(
    "select status, error, counts from pipeline_runs where flow = 'extract' and namespace = :ns "
    "order by started_at desc limit 1"
)
SELECT_SUBMITTED = text(
    "select status, request_count from llm_batches where batch_id = 'batch_1' and provider = :url"
)
SELECT_BATCH = text(
    "select status, answered, missing from llm_batches where batch_id = 'batch_1' and provider = :url"
)
SELECT_CALLS = text("select outcome, cost_usd from llm_calls where namespace = :ns order by call_id")
SELECT_WATERMARKS = text(
    "select scope from watermarks where stage = 'extract' and namespace = :ns order by 1"
)


@pytest.fixture
def batch_model(batch_server: Any, monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    """The scripted model behind the batch server, with the CLI's environment pointed at it."""
    model = ScriptedModel(batch_server, None)  # type: ignore[arg-type]
    for text_value, item in PEOPLE.values():
        model.says(text_value, item)
    batch_server.reply = model.reply
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    monkeypatch.setenv("STRATAFLOW_EXTRACT_MODEL", BATCH_MODEL)
    monkeypatch.setenv("STRATAFLOW_LLM_API_BASE", batch_server.url)
    monkeypatch.setenv("STRATAFLOW_LLM_BATCH_POLL_S", "0.05")
    monkeypatch.setenv("STRATAFLOW_LLM_MAX_RETRIES", "0")
    return model


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "m.jsonl"
    rows = [
        {"conversation_id": f"c-{who}", "subject_id": who, "source_message_id": f"{who}-1", "role": "user",
         "content": said, "created_at": "2026-11-02T09:00:00Z"}
        for who, (said, _) in PEOPLE.items()
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _ingest(tmp_path: Path, namespace: str) -> None:
    done = CliRunner().invoke(app, ["ingest", "logs", str(_write(tmp_path)), "--namespace", namespace])
    assert done.exit_code == 0, done.output


def _rows(engine: Engine, query: Any, namespace: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query, {"ns": namespace})]


def test_a_batch_extraction_writes_what_the_synchronous_one_writes_at_the_batch_price(
    engine: Engine, namespace: str, tmp_path: Path, batch_server: Any, batch_model: ScriptedModel,
    scripted_model: ScriptedModel, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _ingest(tmp_path, namespace)
    batch_server.polls_before_end = 2  # in progress twice: the command polls until it ends

    ran = CliRunner().invoke(app, ["extract", "--batch", "--namespace", namespace])

    assert ran.exit_code == 0, ran.output
    assert "submitted batch batch_1 with 3 request(s)" in ran.output
    assert "in_progress" in ran.output and "3 answered, 0 invalid, 0 missing" in ran.output
    batched = _rows(engine, SELECT_ITEMS, namespace)
    assert batched == [("ana", "job_title", "pharmacist"), ("bo", "location", "成都"),
                       ("cy", "allergy", "peanuts")]  # fmt: skip
    status, error, counts = _rows(engine, SELECT_RUN, namespace)[0]
    assert (status, error) == ("completed", None) and counts["llm_calls"] == 3
    calls = _rows(engine, SELECT_CALLS, namespace)
    # 1,000 prompt and 100 completion tokens each, at gpt-4o-mini's batch prices (half the list price)
    assert [o for o, _ in calls] == ["ok"] * 3
    assert all(float(cost) == pytest.approx(1000 * 0.075e-6 + 100 * 0.3e-6) for _, cost in calls)
    assert [line["url"] for line in batch_server.lines_received] == ["/v1/chat/completions"] * 3
    assert batch_server.chat_requests == [], "every extraction request went in the batch"
    assert {line["body"]["model"] for line in batch_server.lines_received} == {"gpt-4o-mini"}

    # the same messages, extracted request by request in another namespace, give the same items
    other = f"{namespace}_sync"
    _ingest(tmp_path, other)
    for name, value in scripted_model.env.items():
        monkeypatch.setenv(name, value)
    for text_value, item in PEOPLE.values():
        scripted_model.says(text_value, item)
    synchronous = CliRunner().invoke(app, ["extract", "--namespace", other])
    assert synchronous.exit_code == 0, synchronous.output
    assert _rows(engine, SELECT_ITEMS, other) == batched


def test_a_batch_that_expires_partly_leaves_its_other_scopes_for_the_next_run_counted(
    engine: Engine, namespace: str, tmp_path: Path, batch_server: Any, batch_model: ScriptedModel
) -> None:
    _ingest(tmp_path, namespace)
    batch_server.answer_only = 1  # the provider ran one request before the window closed

    ran = CliRunner().invoke(app, ["extract", "--batch", "--namespace", namespace])

    assert ran.exit_code == 0, ran.output
    assert "1 answered, 0 invalid, 2 missing" in ran.output
    assert [row[0] for row in _rows(engine, SELECT_ITEMS, namespace)] == ["ana"]
    status, error, counts = _rows(engine, SELECT_RUN, namespace)[0]
    assert status == "completed_with_errors" and counts["deferred"] == 2
    for who in ("bo", "cy"):
        assert scope_ref(namespace, who) in error and "next run" in error
    assert _rows(engine, SELECT_WATERMARKS, namespace) == [("ana",)], "the deferred scopes' stay put"
    assert sorted(o for o, _ in _rows(engine, SELECT_CALLS, namespace)) == ["error", "error", "ok"]
    assert batch_server.chat_requests == [], "a deferred scope sends nothing"

    batch_server.answer_only = None
    again = CliRunner().invoke(app, ["extract", "--batch", "--namespace", namespace])

    assert again.exit_code == 0, again.output
    assert "submitted batch batch_2 with 2 request(s)" in again.output, "only the missing work is sent again"
    assert [row[0] for row in _rows(engine, SELECT_ITEMS, namespace)] == ["ana", "bo", "cy"]
    assert _rows(engine, SELECT_RUN, namespace)[0][:2] == ("completed", None)


def test_a_batch_left_waiting_is_collected_by_the_next_run_without_sending_its_work_again(
    engine: Engine, namespace: str, tmp_path: Path, batch_server: Any, batch_model: ScriptedModel
) -> None:
    _ingest(tmp_path, namespace)
    batch_server.polls_before_end = 1

    submitted = CliRunner().invoke(app, ["extract", "--batch", "--no-wait", "--namespace", namespace])

    assert submitted.exit_code == 0, submitted.output
    assert "submitted batch batch_1 with 3 request(s)" in submitted.output
    assert _rows(engine, SELECT_ITEMS, namespace) == [], "nothing applied before the provider answers"
    with engine.connect() as conn:
        row = conn.execute(SELECT_SUBMITTED, {"url": batch_server.url})
        assert tuple(row.one()) == ("submitted", 3)

    collected = CliRunner().invoke(app, ["extract", "--batch", "--namespace", namespace])

    assert collected.exit_code == 0, collected.output
    assert "submitted batch" not in collected.output and list(batch_server.batches) == ["batch_1"]
    assert [row[0] for row in _rows(engine, SELECT_ITEMS, namespace)] == ["ana", "bo", "cy"]
    with engine.connect() as conn:
        row = conn.execute(SELECT_BATCH, {"url": batch_server.url})
        assert tuple(row.one()) == ("collected", 3, 0)


def test_batch_needs_a_model_with_a_batch_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATAFLOW_EXTRACT_MODEL", "offline/strataflow-rules")
    ran = CliRunner().invoke(app, ["extract", "--batch"])
    assert ran.exit_code == 1 and "no batch API" in ran.output and "openai/<model>" in ran.output


def test_the_nightly_waits_for_its_batch_with_task_retries_and_applies_it(
    prefect_harness: None, engine: Engine, namespace: str, tmp_path: Path, batch_server: Any,
    batch_model: ScriptedModel,
) -> None:  # fmt: skip
    from flows.nightly import nightly

    batch_server.polls_before_end = 2
    state = nightly(NightlyParams(paths=[str(_write(tmp_path))], namespace=namespace, llm_batch=True),
                    return_state=True)  # fmt: skip

    assert state.is_completed(), state.message
    summary = state.result()
    assert summary.status == "completed"
    assert summary.stages["batch"]["batches_submitted"] == 1 and summary.stages["batch"]["answered"] == 3
    assert batch_server.batches["batch_1"].polls == 3, "two retries of the wait task, then the end"
    assert [row[0] for row in _rows(engine, SELECT_ITEMS, namespace)] == ["ana", "bo", "cy"]


CALL_SUBJECTS = text(
    "select distinct subject_id from llm_calls where namespace = :ns and subject_id is not null order by 1"
)
TABLES = text(
    """
    select c.relname from pg_class as c join pg_namespace as n on n.oid = c.relnamespace
    where c.relkind in ('r', 'p') and not c.relispartition and n.nspname = 'public' order by 1
    """
)


def _holding(engine: Engine, namespace: str, *needles: str) -> dict[str, int]:
    """table -> rows of the namespace whose text holds any of the needles (every row of every table, cast to
    text, that names the namespace: a batch's requests name it in their identities)."""
    found: dict[str, int] = {}
    with engine.connect() as conn:
        for (table,) in conn.execute(TABLES).all():
            for needle in needles:
                count = conn.execute(
                    text(f'select count(*) from "{table}" as x where strpos(x::text, :n) > 0 '
                         "and strpos(x::text, :ns) > 0"),
                    {"n": needle, "ns": namespace},
                ).scalar()  # fmt: skip
                if count:
                    found[table] = found.get(table, 0) + int(count)
    return found


def test_forget_reaches_batches_and_an_answer_collected_after_it_is_never_written_back(
    engine: Engine, namespace: str, tmp_path: Path, batch_server: Any, batch_model: ScriptedModel
) -> None:
    """R6: a collected batch keeps each request's subject and message lines (llm_batches.requests) until
    forget removes them; a batch still at the provider when its subject is forgotten is collected later
    without writing the subject's llm_cache or llm_calls rows back; the other subjects' answers land."""
    _ingest(tmp_path, namespace)
    submitted = CliRunner().invoke(app, ["extract", "--batch", "--no-wait", "--namespace", namespace])
    assert submitted.exit_code == 0, submitted.output
    assert (
        _holding(engine, namespace, "pharmacist in Braga").get("llm_batches") == 1
    )  # the message lines, in the batch
    forgot = CliRunner().invoke(app, ["forget", "-n", namespace, "-s", "ana"])
    assert forgot.exit_code == 0, forgot.output
    assert "llm_batches" not in _holding(engine, namespace, "pharmacist in Braga")
    collected = CliRunner().invoke(app, ["extract", "--batch", "--namespace", namespace])
    assert collected.exit_code == 0, collected.output
    assert _holding(engine, namespace, "pharmacist in Braga", "Braga") == {}, (
        "the forgotten subject's text came back"
    )
    ns = {"ns": namespace}
    with engine.connect() as conn:
        subjects = conn.execute(CALL_SUBJECTS, ns).scalars().all()
        cached = conn.execute(
            text("select count(*) from llm_cache where namespace = :ns and subject_id = 'ana'"), ns
        )
    assert subjects == ["bo", "cy"] and cached.scalar() == 0, subjects
    assert [row[0] for row in _rows(engine, SELECT_ITEMS, namespace)] == ["bo", "cy"]
    forgot = CliRunner().invoke(app, ["forget", "-n", namespace, "-s", "bo"])  # after its batch was collected
    assert forgot.exit_code == 0, forgot.output
    assert _holding(engine, namespace, "我住在成都") == {}
    with engine.connect() as conn:
        assert conn.execute(CALL_SUBJECTS, ns).scalars().all() == ["cy"]
