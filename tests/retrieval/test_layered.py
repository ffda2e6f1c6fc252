"""Layered retrieval against the real database and the real embedder: L2 lineage lifting turns that share no
word with the question, a named speaker, when-questions and named periods, the agent filter on items, and a
namespace-wide (approximate) search that keeps turn windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from strataflow.memory.store import upsert_item
from strataflow.retrieval.search import search

BASE_TIME = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SESSION_ONE = [  # chit-chat of a first session
    "Morning! How was the conference trip?",
    "Long flights, but the talks on compilers were worth it.",
    "Did you get to see the city at all?",
    "Only the harbour, I bought a scratching post on the way back.",
    "Next time stay a weekend longer.",
]
SESSION_TWO = [  # a week later: the answer hides in "a3" and "b1", linked by an L2 item
    "Hey, long week?",
    "Biscuit knocked the plant off the shelf again and then slept on the couch all afternoon.",
    "Ha, classic. Did you finish the quarterly slides?",
    "Almost, the charts still need work.",
    "Send them over when they are ready.",
]
DISTRACTORS = (  # another conversation: about animals, none about the user's own
    "The vet clinic on Main Street closed down last month.",
    "My neighbour's kids keep asking to see the zoo animals.",
    "There was a documentary about wolves on TV last night.",
    "The farm we visited had goats, ducks and two old horses.",
    "A stray dog followed the postman down our street this morning.",
)


def message_ids(conn: Connection, namespace: str) -> dict[str, int]:
    rows = conn.execute(
        text("select source_message_id, message_id from conversation_messages where namespace = :ns"),
        {"ns": namespace},
    )
    return {r.source_message_id: int(r.message_id) for r in rows}


def two_sessions(
    write_messages: Any,
    conn: Connection,
    settings: Any,
    namespace: str,
    embedder: Any,
    distractors: tuple[str, ...] = (),
) -> None:
    messages = [
        {"content": c, "source_message_id": f"a{n}", "created_at": BASE_TIME + timedelta(minutes=n)}
        for n, c in enumerate(SESSION_ONE)
    ]
    messages += [
        {"content": c, "source_message_id": f"d{n}", "conversation_id": "notes", "created_at": BASE_TIME}
        for n, c in enumerate(distractors)
    ]
    messages += [
        {"content": c, "source_message_id": f"b{n}", "created_at": BASE_TIME + timedelta(days=7, minutes=n)}
        for n, c in enumerate(SESSION_TWO)
    ]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))


def add_item(conn: Connection, embedder: Any, namespace: str, statement: str, **fields: Any) -> int:
    upsert_item(
        conn,
        namespace=namespace,
        subject_id=fields.pop("subject_id", "u1"),
        kind=fields.pop("kind", "fact"),
        key=fields.pop("key"),
        value=fields.pop("value", statement),
        statement=statement,
        event_at=BASE_TIME,
        **fields,
    )
    item_id = conn.execute(
        text("select max(item_id) from memory_items where namespace = :ns"), {"ns": namespace}
    ).scalar_one()
    conn.execute(
        text("update memory_items set embedding = :v where item_id = :id"),
        {"v": embedder.encode([statement])[0], "id": item_id},
    )
    return int(item_id)


def ranked_ids(hits: list[Any]) -> list[str]:
    return [h.metadata["source_message_id"] for h in hits]


def test_an_l2_item_lifts_the_turns_it_came_from_although_they_share_no_word_with_the_question(
    conn, settings, namespace, write_messages, embedder
):
    two_sessions(write_messages, conn, settings, namespace, embedder, DISTRACTORS)
    ids = message_ids(conn, namespace)
    statement = "The user has a cat named Biscuit"  # linked to a turn of each session
    add_item(conn, embedder, namespace, statement, key="pet", source_message_ids=[ids["a3"], ids["b1"]])
    question = "What pet does the user have?"

    without = search(conn, settings, namespace, question, layers=("messages",), k=15, lineage=False)
    layered = search(conn, settings, namespace, question, layers=("messages",), k=15)

    assert not {"a3", "b1"} & set(ranked_ids(without)[:4])  # the animal talk of another conversation wins
    assert "a3" in ranked_ids(layered)[:4]  # the lift is bounded: it moves the linked turns up, not over all
    for turn in ("a3", "b1"):
        assert ranked_ids(layered).index(turn) < ranked_ids(without).index(turn)
    lifted = [h for h in layered if h.metadata["source_message_id"] in ("a3", "b1")]
    assert len(lifted) == 2 and all(h.metadata["lineage_lift"] > 0 for h in lifted)
    assert {h.layer for h in layered} == {"messages"}  # the item lifts, it is not returned


def test_a_weekly_reports_key_event_lifts_its_turns(conn, settings, namespace, write_messages, embedder):
    two_sessions(write_messages, conn, settings, namespace, embedder)
    ids = message_ids(conn, namespace)
    summary = "Week of trips: the user's dog destroyed a pair of shoes."
    conn.execute(
        text("""
        insert into weekly_reports (namespace, subject_id, week_start, week_end, summary, key_events,
                                    input_hash, embedding, fts)
        values (:ns, 'u1', '2026-03-09', '2026-03-15', :summary, cast(:events as jsonb), 'h', :v,
                to_tsvector('english', :summary))
        """),
        {
            "ns": namespace,
            "summary": summary,
            "events": f'[{{"event": "dog destroyed shoes", "message_ids": [{ids["b1"]}]}}]',
            "v": embedder.encode([summary])[0],
        },
    )

    hits = search(conn, settings, namespace, "Which shoes did the dog destroy?", layers=("messages",), k=3)

    assert ranked_ids(hits)[0] == "b1"
    assert hits[0].metadata["lineage_lift"] > 0


def test_the_named_speakers_own_turn_outranks_replies_that_address_them(
    conn, settings, namespace, write_messages, embedder
):
    turns = [
        ("Ben", "Nora, how did the pottery class go? Was the pottery teacher nice?"),
        ("Nora", "I made two bowls, one cracked in the kiln."),
        ("Ben", "Nora, two bowls on your first pottery day is great!"),
        ("Ben", "I only ever tried the pottery wheel once, Nora."),
    ]
    messages = [
        {"content": c, "metadata": {"speaker": s}, "source_message_id": f"t{n}"}
        for n, (s, c) in enumerate(turns)
    ]
    messages += [
        {"content": c, "source_message_id": f"x{n}", "conversation_id": "other"}
        for n, c in enumerate(SESSION_ONE)
    ]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    hits = search(
        conn, settings, namespace, "What did Nora make in her pottery class?", layers=("messages",), k=4
    )

    # The question turn t0 and Ben's reply that repeats the answer (t2) are close in meaning and words; the
    # speaker evidence is bounded, so it puts Nora's own turn above the reply that only names her (t3).
    order = ranked_ids(hits)
    assert order.index("t1") < order.index("t3") and order.index("t1") <= 2


def test_a_when_question_prefers_the_turn_that_states_a_time(
    conn, settings, namespace, write_messages, embedder
):
    messages = [
        {
            "content": "The dentist, the dentist, I really dislike the dentist and the dentist chair.",
            "source_message_id": "no_time",
        },
        {
            "content": "Went to the dentist yesterday, all fine.",
            "source_message_id": "with_time",
            "created_at": BASE_TIME + timedelta(days=3),
        },
    ]
    messages += [
        {"content": c, "source_message_id": f"x{n}", "conversation_id": "other"}
        for n, c in enumerate(SESSION_ONE)
    ]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    what = search(conn, settings, namespace, "What about the dentist?", layers=("messages",), k=2)
    when = search(conn, settings, namespace, "When did I go to the dentist?", layers=("messages",), k=2)

    assert ranked_ids(what)[0] == "no_time"  # without the when-reading the repeated word wins
    assert ranked_ids(when)[0] == "with_time"


def test_a_period_in_the_question_prefers_turns_of_that_period(
    conn, settings, namespace, write_messages, embedder
):
    dates = {"feb": datetime(2026, 2, 10, 12, tzinfo=UTC), "mar": datetime(2026, 3, 18, 12, tzinfo=UTC)}
    messages = [
        {
            "content": "I cooked a big pot of lasagna for the neighbours.",
            "source_message_id": name,
            "created_at": at,
            "conversation_id": name,
        }
        for name, at in dates.items()
    ]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))
    now = datetime(2026, 4, 1, tzinfo=UTC)

    in_march = search(
        conn, settings, namespace, "What did I cook in March 2026?", layers=("messages",), k=2, now=now
    )
    in_feb = search(
        conn, settings, namespace, "What did I cook on 10 February, 2026?", layers=("messages",), k=2, now=now
    )
    last_month = search(
        conn, settings, namespace, "What did I cook last month?", layers=("messages",), k=2, now=now
    )

    assert ranked_ids(in_march)[0] == "mar"
    assert ranked_ids(in_feb)[0] == "feb"
    assert ranked_ids(last_month)[0] == "mar"
    assert in_march[0].score > in_march[1].score


def test_an_agent_sees_unowned_own_and_shared_items_only(conn, settings, namespace, embedder):
    owners = {"team": (None, False), "mine": ("a1", False), "theirs": ("a2", False), "shared": ("a2", True)}
    for key, (agent, shared) in owners.items():
        item_id = add_item(
            conn,
            embedder,
            namespace,
            f"Deploy checklist notes ({key})",
            key=f"checklist_{key}",
            agent_id=agent,
        )
        conn.execute(
            text("update memory_items set is_shared = :s where item_id = :id"), {"s": shared, "id": item_id}
        )

    def keys(**kwargs: Any) -> set[str]:
        hits = search(conn, settings, namespace, "deploy checklist", layers=("items",), k=10, **kwargs)
        return {h.metadata["key"].removeprefix("checklist_") for h in hits}

    assert keys(agent_id="a1") == {"team", "mine", "shared"}
    assert keys(agent_id="a2") == {"team", "theirs", "shared"}
    assert keys() == {"team", "shared"}  # no agent: no agent's private items


def test_items_are_found_by_their_name_and_description(conn, settings, namespace, embedder):
    item_id = add_item(
        conn, embedder, namespace, "Keep answers under five lines.", key="answer_length", kind="preference"
    )
    conn.execute(
        text(
            "update memory_items set name = 'Reply style', description = 'when writing to Dana' "
            "where item_id = :id"
        ),
        {"id": item_id},
    )
    add_item(conn, embedder, namespace, "Works from Lisbon on Fridays.", key="location")

    hits = search(conn, settings, namespace, "how should replies to Dana look", layers=("items",), k=2)

    assert hits[0].id == item_id
    assert hits[0].metadata["name"] == "Reply style"


def test_a_namespace_wide_search_keeps_turn_windows(conn, settings, namespace, write_messages, embedder):
    messages = []
    for subject in range(12):
        for n, c in enumerate(SESSION_ONE):
            messages.append(
                {
                    "content": c,
                    "subject_id": f"s{subject}",
                    "conversation_id": f"c{subject}",
                    "source_message_id": f"s{subject}-{n}",
                    "created_at": BASE_TIME + timedelta(days=subject, minutes=n),
                }
            )
    messages += [
        {
            "content": "Where did you go for your summer holiday, Anna?",
            "subject_id": "s5",
            "conversation_id": "h",
            "source_message_id": "ask",
            "created_at": BASE_TIME + timedelta(days=20),
        },
        {
            "content": "Lisbon! Three weeks of sun and pastries.",
            "subject_id": "s5",
            "conversation_id": "h",
            "source_message_id": "reply",
            "created_at": BASE_TIME + timedelta(days=20, seconds=5),
        },
    ]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    hits = search(
        conn, settings, namespace, "summer holiday destination", layers=("messages",), k=3, exact_limit=10
    )

    assert not hits[0].metadata["exact"]  # the approximate path
    assert {"ask", "reply"} <= set(ranked_ids(hits))  # the reply came in as the question's neighbour
