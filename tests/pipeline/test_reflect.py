"""Insight reflection: each version reflected once; a changed fact changes its insight (old in history).

The model is the scripted one (tests/fixtures/scripted_model.py: one insight per key, "<key>: <newest
value>"), so the statements below are the model's, stored as given; how the offline rules word an insight is
tested in tests/llm/offline/test_offline_provider.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from strataflow.memory.store import upsert_item
from strataflow.pipeline.reflect import reflect_pending

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
SELECT_INSIGHTS = text(
    """
    select insight_id, key, question, statement, confidence, evidence_item_ids, evidence_message_ids,
           valid_from, valid_to, superseded_at, prompt_version
    from insights where namespace = :ns order by insight_id
    """
)


def insights(engine, namespace):
    with engine.connect() as conn:
        return list(conn.execute(SELECT_INSIGHTS, {"ns": namespace}))


def state_occupation(engine, namespace, job, event_at, message_id):
    with engine.begin() as conn:
        upsert_item(
            conn,
            namespace=namespace,
            subject_id="u1",
            kind="fact",
            key="job_title",
            value=job,
            statement=f"I work as a {job}.",
            event_at=event_at,
            source_message_ids=[message_id],
        )
        return conn.execute(
            text(
                "select item_id, version, reflected_version from memory_items "
                "where namespace = :ns and key = 'job_title'"
            ),
            {"ns": namespace},
        ).one()


def test_an_insight_changes_when_its_fact_changes_and_the_old_one_stays_in_history(
    scripted_model, engine, namespace, ledger_count
):
    settings = scripted_model.settings
    item = state_occupation(engine, namespace, "nurse", T0, 101)

    first = reflect_pending(settings, namespace=namespace)

    (created,) = insights(engine, namespace)
    assert (first.scopes, first.items_reflected, first.insights_created) == (1, 1, 1)
    assert (created.evidence_item_ids, created.evidence_message_ids, created.valid_to) == (
        [item.item_id],
        [101],
        None,
    )
    assert (created.statement, created.valid_from, created.prompt_version) == (
        "job_title: nurse",
        T0,
        "reflect-v1",
    )
    assert created.question == "What is the user's job title?"
    calls = ledger_count(namespace)

    again = reflect_pending(settings, namespace=namespace)  # nothing pending: no request, nothing written
    assert (again.scopes, again.items_reflected, ledger_count(namespace)) == (0, 0, calls)

    changed_at = T0 + timedelta(days=20)
    changed = state_occupation(engine, namespace, "software engineer", changed_at, 202)
    assert (changed.version, changed.reflected_version) == (2, 1)

    second = reflect_pending(settings, namespace=namespace)

    old, new = insights(engine, namespace)
    assert (second.items_reflected, second.insights_updated) == (1, 1)
    assert old.insight_id == created.insight_id and old.statement == created.statement
    assert (old.valid_to, old.superseded_at is not None) == (changed_at, True)
    assert (new.key, new.statement) == (old.key, "job_title: software engineer")
    assert (new.valid_from, new.valid_to, new.evidence_message_ids) == (changed_at, None, [202])


def test_reflecting_the_same_statement_again_writes_no_new_insight(scripted_model, engine, namespace):
    settings = scripted_model.settings
    state_occupation(engine, namespace, "teacher", T0, 7)
    reflect_pending(settings, namespace=namespace)
    with engine.begin() as conn:  # a new version with the same value and statement (e.g. importance changed)
        conn.execute(
            text("update memory_items set version = version + 1 where namespace = :ns"), {"ns": namespace}
        )

    result = reflect_pending(settings, namespace=namespace)

    assert (result.items_reflected, result.insights_unchanged, result.insights_created) == (1, 1, 0)
    assert len(insights(engine, namespace)) == 1


def test_older_evidence_goes_into_history_and_the_newest_stays_current(scripted_model, engine, namespace):
    settings = scripted_model.settings
    state_occupation(engine, namespace, "pilot", T0 + timedelta(days=30), 9)
    reflect_pending(settings, namespace=namespace)
    with engine.begin() as conn:  # a backfilled, older and contradicting statement of the same attribute
        conn.execute(
            text(
                "update memory_items set version = version + 1, value = to_jsonb('chef'::text), "
                "statement = 'I work as a chef.', valid_from = :at where namespace = :ns"
            ),
            {"ns": namespace, "at": T0},
        )

    result = reflect_pending(settings, namespace=namespace)

    current, history = insights(engine, namespace)
    assert result.insights_historical == 1
    assert (current.statement, current.valid_to) == ("job_title: pilot", None)
    assert (history.statement, history.valid_to) == ("job_title: chef", T0 + timedelta(days=30))
