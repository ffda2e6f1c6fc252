"""The embedding stage over every table with an embedding column (real local model, real database)."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest
from sqlalchemy import Connection, Engine, text

from bench.embed import insert_l1_rows
from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.llm.embeddings import encode_count, vectors_for
from strataflow.pipeline.embed import (
    TARGETS,
    EmbedResult,
    embed_pending,
    embedded_hash_sql,
    read_page,
    write_page,
)

MODEL = "all-MiniLM-L6-v2"
MODELS = "all-MiniLM-L6-v2 + multilingual-e5-small"  # EmbedResult.model: the configured models

INSERT_ITEM = text(
    """
    insert into memory_items (namespace, subject_id, kind, key, value, statement, valid_from)
    values (:ns, 'u1', 'fact', :key, cast(:value as jsonb), :statement, now())
    """
)
INSERT_REPORT = text(
    """
    insert into weekly_reports (namespace, subject_id, week_start, week_end, summary, input_hash)
    values (:ns, 'u1', :week_start, :week_end, :summary, 'h')
    """
)
INSERT_INSIGHT = text(
    """
    insert into insights (namespace, subject_id, key, question, statement, valid_from)
    values (:ns, 'u1', 'occupation', 'What does the user do?', :statement, now())
    """
)
EMBEDDED_ROWS = text(
    """
    select 'conversation_messages' as t, embedding_model, embedding is not null as has
    from conversation_messages where namespace = :ns
    union all
    select 'memory_items', embedding_model, embedding is not null from memory_items where namespace = :ns
    union all
    select 'weekly_reports', embedding_model, embedding is not null from weekly_reports where namespace = :ns
    union all
    select 'insights', embedding_model, embedding is not null from insights where namespace = :ns
    """
)


@pytest.fixture
def seeded(engine: Engine, namespace: str) -> str:
    """Three messages (two identical), one item, one weekly report and one insight, none embedded."""
    tag = namespace
    with engine.begin() as conn:
        insert_l1_rows(
            conn,
            namespace,
            [f"we ship {tag} on Friday", f"QA found a bug in {tag}", f"we ship {tag} on Friday"],
            start=datetime(2025, 3, 3, 10, tzinfo=UTC),
        )
        conn.execute(
            INSERT_ITEM,
            {
                "ns": namespace,
                "key": "job_title",
                "value": '"engineer"',
                "statement": f"I work as a data engineer ({tag})",
            },
        )
        conn.execute(
            INSERT_REPORT,
            {
                "ns": namespace,
                "week_start": date(2025, 3, 3),
                "week_end": date(2025, 3, 9),
                "summary": f"Week of {tag}: release planned",
            },
        )
        conn.execute(INSERT_INSIGHT, {"ns": namespace, "statement": f"The user is an engineer ({tag})"})
    return namespace


def test_embed_pending_embeds_every_table_and_encodes_identical_texts_once(
    engine: Engine, settings: Settings, seeded: str
) -> None:
    before = encode_count()
    result = embed_pending(settings, progress=False, namespace=seeded)
    tables = {"conversation_messages": 3, "memory_items": 1, "weekly_reports": 1, "insights": 1}
    by_namespace = {seeded: tables}
    assert result == EmbedResult(
        model=MODELS,
        by_namespace=by_namespace,
        conversation_messages=3,
        memory_items=1,
        weekly_reports=1,
        insights=1,
        asset_chunks=0,
        # the English rows' multilingual vectors, written with their own (strataflow.pipeline.embed_multi):
        # the two identical turns' text encoded once
        conversation_messages_multi=3,
        memory_items_multi=1,
        weekly_reports_multi=1,
        encoded=9,
        cache_hits=1,
    )
    assert encode_count() - before == 9
    with engine.connect() as conn:
        rows = conn.execute(EMBEDDED_ROWS, {"ns": seeded}).all()
    assert sorted(rows) == sorted(
        [("conversation_messages", MODEL, True)] * 3
        + [("memory_items", MODEL, True), ("weekly_reports", MODEL, True), ("insights", MODEL, True)]
    )


def test_a_rerun_encodes_nothing_and_touches_no_row(engine: Engine, settings: Settings, seeded: str) -> None:
    embed_pending(settings, progress=False, namespace=seeded)
    before = encode_count()
    again = embed_pending(settings, progress=False, namespace=seeded)
    assert again == EmbedResult(model=MODELS)
    assert encode_count() - before == 0


def test_rows_cleared_by_a_content_change_are_embedded_from_the_cache_when_the_text_is_known(
    engine: Engine, settings: Settings, seeded: str
) -> None:
    embed_pending(settings, progress=False, namespace=seeded)
    with engine.begin() as conn:
        conn.execute(
            text("update conversation_messages set embedding = null where namespace = :ns"), {"ns": seeded}
        )
    before = encode_count()
    result = embed_pending(settings, progress=False, namespace=seeded)
    assert (result.conversation_messages, result.encoded, result.cache_hits) == (3, 0, 3)
    assert encode_count() - before == 0


def test_reembed_replaces_vectors_of_another_model_and_plain_embed_leaves_them(
    engine: Engine, settings: Settings, seeded: str
) -> None:
    embed_pending(settings, progress=False, namespace=seeded)
    with engine.begin() as conn:
        conn.execute(
            text("update memory_items set embedding_model = 'old-model' where namespace = :ns"),
            {"ns": seeded},
        )
    assert embed_pending(settings, progress=False, namespace=seeded).memory_items == 0
    result = embed_pending(settings, reembed=True, progress=False, namespace=seeded)
    assert (result.memory_items, result.conversation_messages, result.encoded) == (1, 0, 0)
    with engine.connect() as conn:
        models = (
            conn.execute(
                text("select embedding_model from memory_items where namespace = :ns"), {"ns": seeded}
            )
            .scalars()
            .all()
        )
    assert models == [MODEL]


def test_embed_pending_leaves_other_namespaces_alone(engine: Engine, settings: Settings, seeded: str) -> None:
    other = f"t_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        insert_l1_rows(conn, other, [f"untouched {other}"], start=datetime(2025, 3, 4, tzinfo=UTC))
    embed_pending(settings, progress=False, namespace=seeded)
    with engine.connect() as conn:
        pending = conn.execute(
            text("select count(*) from conversation_messages where namespace = :ns and embedding is null"),
            {"ns": other},
        ).scalar_one()
    assert pending == 1


@pytest.mark.parametrize(
    ("statement", "key", "value", "expected"),
    [
        # an item is its statement, trimmed
        ("I live in Hangzhou", "location", '"Hangzhou"', "I live in Hangzhou"),
        ("  I live in Hangzhou\n", "location", '"Hangzhou"', "I live in Hangzhou"),
        ("\u3000我在杭州\u00a0", "location", '"杭州"', "我在杭州"),
        # an item without a statement still gets a meaningful text from its key and value
        (None, "target_programs", '["QMAS"]', 'target programs: ["QMAS"]'),
        (" ", "salary", "800000", "salary: 800000"),
        (None, "city", '"杭州"', "city: 杭州"),
        (None, "flags", '{"a": 1, "b": [true, null]}', 'flags: {"a": 1, "b": [true, null]}'),
        (None, "note", None, "note: null"),
    ],
)
def test_an_items_embedded_text_and_its_cache_key(
    conn: Connection, settings: Settings, statement: str | None, key: str, value: str | None, expected: str
) -> None:
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    conn.execute(INSERT_ITEM, {"ns": namespace, "key": key, "value": value, "statement": statement})
    target = next(t for t in TARGETS if t.table == "memory_items")
    [row] = read_page(conn, settings, target, 0, False, namespace)
    assert row["embedded_text"] == expected
    stored = conn.execute(
        text(f"select {embedded_hash_sql('memory_items')} from memory_items where namespace = :ns"),
        {"ns": namespace},
    ).scalar_one()
    assert stored == content_hash(expected)  # expiry and forget find the cache row by this


def test_a_message_is_embedded_as_written(conn: Connection, settings: Settings) -> None:
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    insert_l1_rows(conn, namespace, [" I am 30多岁 "], start=datetime(2025, 3, 5, tzinfo=UTC))
    target = next(t for t in TARGETS if t.table == "conversation_messages")
    [row] = read_page(conn, settings, target, 0, False, namespace)
    assert row["embedded_text"] == " I am 30多岁 "  # no speaker prefix (a retrieval recipe decides that)


def test_a_row_whose_text_changed_while_its_page_was_encoded_keeps_a_null_embedding(
    conn: Connection, settings: Settings
) -> None:
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    insert_l1_rows(
        conn,
        namespace,
        [f"old text {namespace}", f"kept {namespace}"],
        start=datetime(2025, 3, 5, tzinfo=UTC),
    )
    target = next(t for t in TARGETS if t.table == "conversation_messages")
    rows = read_page(conn, settings, target, 0, False, namespace)
    vectors, models, new = vectors_for(conn, settings, [r["embedded_text"] for r in rows])
    changed = rows[0]["message_id"]
    conn.execute(  # what a re-ingest with new content does meanwhile
        text("update conversation_messages set content = 'new', content_hash = 'h2' where message_id = :id"),
        {"id": changed},
    )
    write_page(conn, target, rows, vectors, models, new)
    embedded = conn.execute(
        text("select message_id, embedding is not null from conversation_messages where namespace = :ns"),
        {"ns": namespace},
    ).all()
    assert sorted(embedded) == sorted([(changed, False), (rows[1]["message_id"], True)])


MODELS_OF = text("select content, embedding_model from conversation_messages where namespace = :ns")


def test_reembed_after_a_change_of_the_cjk_model_replaces_only_the_rows_whose_model_changed(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    chinese, english = f"我下个月搬去杭州（{namespace}）", f"I move to Hangzhou next month ({namespace})"
    with engine.begin() as conn:
        insert_l1_rows(conn, namespace, [chinese, english], start=datetime(2025, 3, 6, tzinfo=UTC))
    one_model = settings.model_copy(update={"embed_cjk_model": ""})
    assert embed_pending(one_model, progress=False, namespace=namespace).conversation_messages == 2
    with engine.connect() as conn:
        assert dict(conn.execute(MODELS_OF, {"ns": namespace}).tuples().all()) == {
            chinese: MODEL,
            english: MODEL,
        }

    assert embed_pending(settings, progress=False, namespace=namespace).conversation_messages == 0
    result = embed_pending(settings, reembed=True, progress=False, namespace=namespace)
    assert (result.conversation_messages, result.encoded) == (1, 1)
    with engine.connect() as conn:
        models = dict(conn.execute(MODELS_OF, {"ns": namespace}).tuples().all())
    assert models == {chinese: "multilingual-e5-small", english: MODEL}
    assert embed_pending(settings, reembed=True, progress=False, namespace=namespace).embedded == 0
    back = embed_pending(one_model, reembed=True, progress=False, namespace=namespace)
    assert (back.conversation_messages, back.encoded, back.cache_hits) == (
        1,
        0,
        1,
    )  # MiniLM's vector is cached
