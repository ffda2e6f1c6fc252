"""User text stays out of operations data (issue 36 item 4): a provider's error is recorded as its class, HTTP
status, provider and a reference to its llm_calls row, never its text (providers quote the request or the
response in it); a run that ends in another exception keeps its class (and a database error's SQLSTATE),
never the message, in pipeline_runs; a Prefect failure message is reduced the same way. `forget` names what
it cannot reach (the PostgreSQL log, the WAL) in its report, and the access log names no subject."""

from __future__ import annotations

import logging
import uuid

import litellm
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.llm.gateway import provider_error
from strataflow.llm.ledger import LLMCall
from strataflow.pipeline.runs import fail_flow_run, record_run, recorded_error

SECRET = "my passport number is X1234567"


def test_a_provider_error_keeps_class_status_and_reference_never_its_text() -> None:
    call = LLMCall("extract", "v1", "openai/gpt", "a" * 64, "ns", "u1")
    exc = litellm.BadRequestError(message=f"invalid request: messages[0].content={SECRET!r}", model="gpt",
                                  llm_provider="openai")  # fmt: skip
    said = provider_error(exc, call, 2)
    assert SECRET not in said and "X1234567" not in said
    assert said.startswith("BadRequestError, HTTP 400, provider openai") and "ref aaaaaaaaaaaa/2" in said


def test_a_run_ending_in_a_foreign_error_records_its_class_not_its_text(engine: Engine) -> None:
    run_ids: list[uuid.UUID] = []

    def work(run_id: uuid.UUID) -> None:
        run_ids.append(run_id)
        with engine.begin() as conn:  # a real driver error whose message quotes the value
            conn.execute(text("select cast(:v as integer)"), {"v": SECRET})

    try:
        record_run(engine, "test-error-text", {}, None, work)
    except Exception as exc:
        assert "SQLSTATE 22P02" in recorded_error(exc)
    with engine.connect() as conn:
        error = conn.execute(
            text("select error from pipeline_runs where run_id = :r"), {"r": run_ids[0]}
        ).scalar()
    assert error is not None and SECRET not in error and "DataError" in error
    assert recorded_error(ValueError(SECRET)).startswith("ValueError (") and SECRET not in recorded_error(
        ValueError(SECRET)
    )


def test_a_prefect_failure_message_keeps_the_class_only(engine: Engine) -> None:
    flow_run_id = str(uuid.uuid4())
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into pipeline_runs (run_id, flow, status, prefect_flow_run_id) "
                "values (:r, 'test-error-text', 'running', :f)"
            ),
            {"r": uuid.uuid4(), "f": flow_run_id},
        )
    fail_flow_run(engine, flow_run_id, f"Flow run encountered an exception: KeyError: {SECRET!r}")
    with engine.connect() as conn:
        error = conn.execute(
            text("select error from pipeline_runs where prefect_flow_run_id = :f"), {"f": flow_run_id}
        ).scalar_one()
    assert SECRET not in error and "KeyError" in error


def test_forget_says_what_it_cannot_reach_in_its_deletion_report(
    settings: Settings, engine: Engine, namespace: str
) -> None:
    from strataflow.pipeline.forget import forget_subject

    result = forget_subject(settings, namespace, "u1")
    with engine.connect() as conn:
        counts = conn.execute(
            text("select counts from deletion_reports where report_id = :r"), {"r": result.report_id}
        ).scalar_one()
    reached = " ".join(counts["not_reached"])
    assert "PostgreSQL server log" in reached and "WAL" in reached


def test_the_access_log_names_no_subject_and_no_query() -> None:
    from strataflow.service.app import RedactQuery

    for path, logged in (
        ("/v1/profiles/alice_w/user", "/v1/profiles/…/user"),
        ("/mem0/v2/entities/user/alice_w/", "/mem0/v2/entities/user/…/"),
        ("/v1/context?subject=alice_w&query=where", "/v1/context?…"),
        ("/v1/memories/12", "/v1/memories/12"),
    ):
        record = logging.LogRecord(
            "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
            ("127.0.0.1:5000", "GET", path, "1.1", 200), None,
        )  # fmt: skip
        RedactQuery().filter(record)
        assert record.args is not None and record.args[2] == logged  # type: ignore[index]
        assert "alice_w" not in record.getMessage()
