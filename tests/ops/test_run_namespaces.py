"""Runs and deletions over every namespace are recorded per namespace (sql/330): an analyst sees its
namespace's part of them in pipeline_health and deletions, and nothing of another namespace's."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import Engine, text

from models.results import EmbedResult
from strataflow.db import roles
from strataflow.pipeline import runs

INSERT_CALL = text(
    """
    insert into llm_calls (run_id, stage, namespace, subject_id, model, prompt_version, input_hash,
                           prompt_tokens, completion_tokens, outcome)
    values (:run_id, 'extract', :ns, 's1', 'offline/rules', 'v1', md5(random()::text), 10, 5, 'ok')
    """
)
INSERT_EXPIRY = text(
    """
    insert into deletion_reports (run_id, kind, namespace, counts)
    values (:run_id, 'expire', null, cast(:counts as jsonb)) returning report_id
    """
)


@pytest.fixture
def two(engine: Engine) -> tuple[str, str, str]:
    """Namespaces a and b, and an analyst login role granted a only."""
    suffix = uuid.uuid4().hex[:8]
    a, b, analyst = f"pa_{suffix}", f"pb_{suffix}", f"an_{suffix}"
    with engine.begin() as conn:
        roles.create_role(conn, analyst, "analyst", with_password=False)
        roles.grant(conn, analyst, a)
    return a, b, analyst


def _as(engine: Engine, role: str, query: str, **params: object) -> list[tuple[object, ...]]:
    with engine.connect() as conn, conn.begin():
        roles.as_role(conn, role)
        return [tuple(row) for row in conn.execute(text(query), params)]


def test_a_global_run_shows_under_each_namespace_it_worked_in_and_nothing_of_the_others(
    engine: Engine, two: tuple[str, str, str]
) -> None:
    a, b, analyst = two
    flow = f"embed_{uuid.uuid4().hex[:6]}"
    run_id = runs.start_run(engine, flow, {}, namespace=None)
    with engine.begin() as conn:
        conn.execute(INSERT_CALL, [{"run_id": run_id, "ns": a}, {"run_id": run_id, "ns": b}])
    result = EmbedResult(
        model="m", by_namespace={a: {"conversation_messages": 4}, b: {"conversation_messages": 9}}
    )
    error = f"{runs.scope_ref(a, 's1')}: timeout; {runs.scope_ref(b, 's2')}: rate limited"
    runs.finish_run(engine, run_id, runs.COMPLETED_WITH_ERRORS, {}, error, runs.namespace_counts([result]))

    rows = _as(
        engine,
        analyst,
        "select namespace, counts, error from pipeline_run_namespaces where run_id = :r",
        r=run_id,
    )
    assert len(rows) == 1 and rows[0][0] == a
    counts, own_error = rows[0][1], str(rows[0][2])
    assert counts["conversation_messages"] == 4 and counts["llm_calls"] == 1 and counts["tokens"] == 15
    assert a in own_error and b not in own_error and "rate limited" not in own_error

    query = "select namespace, count_runs, count_completed_with_errors from pipeline_health where flow = :f"
    health = _as(engine, analyst, query, f=flow)
    assert health == [(a, 1, 1)]
    assert _as(engine, analyst, "select count(*) from pipeline_runs where run_id = :r", r=run_id) == [(0,)]

    # a run marked crashed later is crashed in every namespace's row
    with engine.begin() as conn:
        conn.execute(text("update pipeline_runs set status = 'crashed' where run_id = :r"), {"r": run_id})
    assert _as(engine, analyst, "select count_crashed from pipeline_health where flow = :f", f=flow) == [(1,)]
    with engine.connect() as conn:  # the owner sees both namespaces' rows, and no '*' row for the run
        owner = conn.execute(
            text("select namespace from pipeline_health where flow = :f"), {"f": flow}
        ).scalars()
        assert sorted(owner) == sorted([a, b])


def test_a_global_expiry_names_each_namespace_it_removed_rows_of(
    engine: Engine, two: tuple[str, str, str]
) -> None:
    a, b, analyst = two
    counts = {"total": {"removed": 12}, "by_namespace": {a: {"removed": 5}, b: {"removed": 7}}}
    with engine.begin() as conn:
        report_id = conn.execute(INSERT_EXPIRY, {"run_id": None, "counts": json.dumps(counts)}).scalar_one()
    seen = _as(
        engine,
        analyst,
        "select namespace, count_rows_deleted from deletions where report_id = :r",
        r=report_id,
    )
    assert seen == [(a, 5)]
    with engine.connect() as conn:
        owner = conn.execute(
            text("select namespace, count_rows_deleted from deletions where report_id = :r order by 1"),
            {"r": report_id},
        ).all()
    assert [tuple(row) for row in owner] == sorted([(a, 5), (b, 7)])
