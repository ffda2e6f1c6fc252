"""Hybrid retrieval against the real database: filters, k results under narrow filters, fusion, Chinese."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import text

from strataflow.retrieval.search import search

BASE_TIME = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the default message times of fixtures/ingested_rows.py
TOPICS = [
    "The quarterly budget review moved to Thursday afternoon.",
    "I bought new running shoes for the marathon in October.",
    "Our team switched the CI pipeline to a faster runner.",
    "My sister is visiting from Toronto next weekend.",
    "The coffee machine on the third floor is broken again.",
    "We need to renew the SSL certificates before they expire.",
    "I'm reading a novel about a lighthouse keeper.",
    "The database migration finished without errors overnight.",
]


def unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def test_a_subject_filter_returns_k_hits_from_that_subject_only(
    conn, settings, namespace, write_messages, embedder
):
    messages = [
        {"content": TOPICS[n % len(TOPICS)], "subject_id": "crowd", "source_message_id": f"crowd{n}"}
        for n in range(60)
    ]
    messages += [
        {
            "content": f"{TOPICS[n % len(TOPICS)]} (note {n})",
            "subject_id": "few",
            "source_message_id": f"few{n}",
        }
        for n in range(12)
    ]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    hits = search(
        conn, settings, namespace, "budget review meeting", subject_id="few", layers=("messages",), k=10
    )

    assert len(hits) == 10
    assert {h.metadata["subject_id"] for h in hits} == {"few"}
    assert "budget" in hits[0].text


def test_a_narrow_filter_still_gets_k_hits_where_a_plain_hnsw_scan_returns_too_few(
    conn, settings, namespace, write_messages
):
    rng = np.random.default_rng(3)
    query = unit(rng.normal(size=384))
    near = [unit(query + 0.3 * rng.normal(size=384) / np.sqrt(384) * 4) for _ in range(400)]
    far = [unit(-query + rng.normal(size=384) / np.sqrt(384)) for _ in range(15)]
    messages = [
        {"content": f"status line {n}", "subject_id": "busy", "source_message_id": f"b{n}"}
        for n in range(400)
    ]
    messages += [
        {"content": f"quiet line {n}", "subject_id": "quiet", "source_message_id": f"q{n}"} for n in range(15)
    ]
    write_messages(conn, settings, namespace, messages, np.array(near + far))

    # The problem: an HNSW scan returns its ef_search (40) nearest rows, then the filter removes them all.
    # (Filters written so that no other index applies, and sequential scans off: the plan is the HNSW scan.)
    conn.execute(text("set local enable_seqscan = off"))
    plain = conn.execute(
        text(
            "select message_id from conversation_messages "
            "where namespace || '' = :ns and subject_id || '' = 'quiet' "
            "order by embedding <=> :q limit 10"
        ),
        {"ns": namespace, "q": query},
    ).all()
    assert len(plain) < 10
    conn.execute(text("set local enable_seqscan = on"))

    # exact_limit=0 forces the approximate path (HNSW + over-fetch, exact fallback) on this small scope.
    hits = search(
        conn,
        settings,
        namespace,
        "nothing in the text matches",
        subject_id="quiet",
        layers=("messages",),
        k=10,
        query_embedding=query,
        exact_limit=0,
    )
    assert len(hits) == 10
    assert {h.metadata["subject_id"] for h in hits} == {"quiet"}
    assert not any(h.metadata["exact"] for h in hits)

    exact = search(
        conn,
        settings,
        namespace,
        "quiet line",
        subject_id="quiet",
        layers=("messages",),
        k=20,
        query_embedding=query,
    )
    assert len(exact) == 15 and all(h.metadata["exact"] for h in exact)


def test_namespace_subject_and_time_filters_hold(conn, settings, namespace, write_messages, embedder):
    other = namespace + "_other"
    week = [
        {
            "content": f"Deploy note {n}: the release train left on time.",
            "source_message_id": f"d{n}",
            "subject_id": "u1" if n % 2 else "u2",
            "created_at": BASE_TIME + timedelta(days=n),
        }
        for n in range(14)
    ]
    vectors = embedder.encode([m["content"] for m in week])
    write_messages(
        conn,
        settings,
        namespace,
        week + [{**m, "namespace": other} for m in week],
        np.vstack([vectors, vectors]),
    )
    since, until = BASE_TIME + timedelta(days=3), BASE_TIME + timedelta(days=9)

    hits = search(
        conn,
        settings,
        namespace,
        "release train deploy",
        subject_id="u1",
        layers=("messages",),
        k=20,
        since=since,
        until=until,
    )

    assert sorted(h.metadata["source_message_id"] for h in hits) == ["d3", "d5", "d7"]
    assert all(h.metadata["namespace"] == namespace and since <= h.event_at < until for h in hits)
    everyone = search(conn, settings, namespace, "release train deploy", layers=("messages",), k=50)
    assert len(everyone) == 14 and {h.metadata["namespace"] for h in everyone} == {namespace}


def test_chinese_queries_find_chinese_rows(conn, settings, namespace, write_messages, embedder):
    messages = [
        {"content": "我在南京大学读的计算机专业，毕业五年了。", "source_message_id": "school"},
        {"content": "下周二我们要和客户开会讨论预算。", "source_message_id": "meeting"},
        {"content": "我打算明年申请香港的优才计划。", "source_message_id": "program"},
        {"content": "The weather in Hangzhou was great last week.", "source_message_id": "weather"},
    ]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    def top(query: str) -> str:
        hits = search(conn, settings, namespace, query, layers=("messages",), k=3)
        return str(hits[0].metadata["source_message_id"])

    assert top("我是哪个大学毕业的？南京大学") == "school"
    assert top("优才计划申请") == "program"
    assert top("和客户开会") == "meeting"


def test_fusion_ranks_an_exact_keyword_match_and_a_semantic_match(
    conn, settings, namespace, write_messages, embedder
):
    messages = [
        {"content": topic, "source_message_id": f"t{n}", "conversation_id": f"c{n}"}
        for n, topic in enumerate(TOPICS)
    ]
    messages.append(
        {
            "content": "Ticket QX-7731 is blocked on the vendor.",
            "source_message_id": "kw",
            "conversation_id": "ckw",
        }
    )
    messages.append(
        {
            "content": "We adopted a golden retriever puppy last month.",
            "source_message_id": "sem",
            "conversation_id": "csem",
        }
    )
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    keyword = search(conn, settings, namespace, "status of qx-7731", layers=("messages",), k=3)
    semantic = search(conn, settings, namespace, "Does the family own a dog?", layers=("messages",), k=3)
    both = search(conn, settings, namespace, "qx-7731 and the new dog", layers=("messages",), k=3)

    assert keyword[0].metadata["source_message_id"] == "kw" and keyword[0].metadata["coverage"] > 0
    assert semantic[0].metadata["source_message_id"] == "sem" and semantic[0].metadata["coverage"] == 0
    assert {"kw", "sem"} <= {h.metadata["source_message_id"] for h in both}


def test_a_short_reply_is_found_through_the_turn_it_answers(
    conn, settings, namespace, write_messages, embedder
):
    messages = [
        {"content": topic, "conversation_id": "noise", "source_message_id": f"n{i}"}
        for i, topic in enumerate(TOPICS)
    ]
    messages += [
        {"content": "Where did you go for your summer holiday, Anna?", "metadata": {"speaker": "Ben"}},
        {
            "content": "Lisbon! Three weeks of sun and pastries.",
            "metadata": {"speaker": "Anna"},
            "source_message_id": "reply",
        },
        {"content": "Sounds lovely, I should go there too.", "metadata": {"speaker": "Ben"}},
    ]
    for n, m in enumerate(messages[len(TOPICS) :]):
        m.setdefault("source_message_id", f"h{n}")
        m["created_at"] = BASE_TIME + timedelta(days=2, seconds=n)
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    hits = search(
        conn, settings, namespace, "Where did Anna spend her summer holiday?", layers=("messages",), k=3
    )

    assert "reply" in [h.metadata["source_message_id"] for h in hits]


def test_every_layer_answers_with_provenance(conn, settings, namespace, write_messages, embedder):
    write_messages(
        conn,
        settings,
        namespace,
        [{"content": "The Lisbon office opens in May."}],
        embedder.encode(["The Lisbon office opens in May."]),
    )
    vector = embedder.encode(["Works at the Lisbon office"])[0]
    conn.execute(
        text("""
        insert into memory_items (namespace, subject_id, kind, key, value, statement, valid_from, embedding,
                                  fts, source_message_ids)
        values (:ns, 'u1', 'fact', 'location', '"Lisbon"', 'Works at the Lisbon office', now(), :v,
                to_tsvector('english', 'Works at the Lisbon office'), '{1,2}');
        """),
        {"ns": namespace, "v": vector},
    )
    conn.execute(
        text("""
        insert into weekly_reports (namespace, subject_id, week_start, week_end, summary, input_hash,
                                    embedding, fts)
        values (:ns, 'u1', '2026-03-02', '2026-03-08', 'Planned the Lisbon office opening.', 'h', :v,
                to_tsvector('english', 'Planned the Lisbon office opening.'));
        """),
        {"ns": namespace, "v": vector},
    )
    document_id = conn.execute(
        text("""
        insert into asset_documents (namespace, uri, kind, title, checksum)
        values (:ns, 'docs/offices.md', 'markdown', 'Offices', 'x') returning document_id"""),
        {"ns": namespace},
    ).scalar_one()
    conn.execute(
        text("""
        insert into asset_chunks (document_id, namespace, chunk_index, content, content_hash, token_count,
                                  embedding, fts)
        values (:d, :ns, 0, 'Lisbon office: Rua Augusta 12, opens May.', 'c', 9, :v,
                to_tsvector('english', 'Lisbon office: Rua Augusta 12, opens May.'))"""),
        {"d": document_id, "ns": namespace, "v": vector},
    )

    hits = search(conn, settings, namespace, "Lisbon office", subject_id="u1", k=10)

    by_layer = {h.layer: h for h in hits}
    assert set(by_layer) == {"messages", "items", "reports", "assets"}
    assert by_layer["items"].metadata["key"] == "location" and by_layer["items"].metadata[
        "source_message_ids"
    ] == [1, 2]
    assert by_layer["reports"].metadata["week_start"] == "2026-03-02"
    assert by_layer["assets"].metadata["uri"] == "docs/offices.md"
    assert by_layer["messages"].metadata["table"] == "conversation_messages"
    assert all(0 <= h.score <= 1 for h in hits)
    assert (
        search(
            conn, settings, namespace, "Lisbon office", subject_id="someone_else", layers=("items", "reports")
        )
        == []
    )
