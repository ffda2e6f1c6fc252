"""Retrieval reads what a real model's answer to the rollup prompt holds: a weekly report's
`key_events[].message_ids` lift the turns behind them, through the rollup stage over litellm's HTTP path
(a scripted OpenAI-compatible server), the real database and the real embedder. Ids written into a
summary's text are not read; an attachment's caption (`metadata.caption`) is searchable text of its message.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, text

from strataflow.pipeline.embed import embed_pending
from strataflow.pipeline.rollup import rollup_weeks
from strataflow.retrieval.search import search
from tests.fixtures.ingested_rows import BASE_TIME, write_messages

DUMMY_KEY = "sk-test-dummy-key-1234567890"
WEEK = {  # source_message_id -> content; BASE_TIME is a Monday long past, so its week is complete
    "rex": "Rex got into the living room again while I was out, the couch looks like a snowstorm now.",
    "park": "The dog park by the river is closed for repairs until May.",
    "bark": "Our neighbour's dog barks at every bicycle that goes past.",
    "sled": "I watched a documentary about sled dogs in Alaska last night.",
    "fence": "The storm destroyed the old fence behind the shed.",
    "tea": "I switched to green tea in the afternoons, it helps me sleep.",
}
QUESTION = "What did the dog destroy?"


def ids_by_source(engine: Engine, namespace: str) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("select source_message_id, message_id from conversation_messages where namespace = :ns"),
            {"ns": namespace},
        )
        return {r.source_message_id: int(r.message_id) for r in rows}


def ranked(engine: Engine, settings: Any, namespace: str, **options: Any) -> list[Any]:
    with engine.connect() as conn:
        return search(conn, settings, namespace, QUESTION, layers=("messages",), k=len(WEEK), **options)


def test_a_models_key_events_lift_their_turns_and_a_summarys_cited_ids_do_not(
    settings, engine, namespace, embedder, scripted_llm_server, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    messages = [
        {"content": content, "source_message_id": sid, "created_at": BASE_TIME + timedelta(hours=n)}
        for n, (sid, content) in enumerate(WEEK.items())
    ]
    with engine.begin() as conn:
        write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))
    ids = ids_by_source(engine, namespace)
    event = "The user's dog Rex destroyed the sofa cushions."
    answer = {
        "summary": f"A week at home with the pets. {event} [msg {ids['tea']}]",  # text: never read as ids
        "key_events": [
            {"event": event, "message_ids": [ids["rex"], 987654321]},  # 987654321: no message of the week
            {"event": "Something the model made up.", "message_ids": [987654322]},
        ],
    }
    scripted_llm_server.fallback = lambda body: json.dumps(answer)
    http = settings.model_copy(
        update={"rollup_model": "openai/test-model", "llm_api_base": scripted_llm_server.url}
    )

    assert rollup_weeks(http, namespace=namespace).reports_written == 1

    prompt = scripted_llm_server.prompt_of(0)
    assert "key_events" in prompt and "message_ids" in prompt, "the prompt asks for key events with their ids"
    with engine.connect() as conn:
        (events,) = conn.execute(
            text("select key_events from weekly_reports where namespace = :ns"), {"ns": namespace}
        ).one()
    assert events == [{"event": event, "message_ids": [ids["rex"]]}]  # only ids of the week's messages
    embed_pending(settings, progress=False, namespace=namespace)  # the weekly flow embeds its reports

    plain = [h.metadata["source_message_id"] for h in ranked(engine, settings, namespace, lineage=False)]
    layered = ranked(engine, settings, namespace)
    lifted = {h.metadata["source_message_id"]: h.metadata.get("lineage_lift", 0) for h in layered}
    assert lifted["rex"] > 0
    assert not any(lifted[sid] for sid in WEEK if sid != "rex")  # tea: cited in the summary's text only
    order = [h.metadata["source_message_id"] for h in layered]
    # the turn shares no word with the question, yet moves up by the (bounded) lift
    assert order.index("rex") <= plain.index("rex")
    plain_hits = ranked(engine, settings, namespace, lineage=False)
    before = {h.metadata["source_message_id"]: h.score for h in plain_hits}
    after = {h.metadata["source_message_id"]: h.score for h in layered}
    assert after["rex"] > before["rex"] and after["tea"] == before["tea"]


def test_an_attachments_caption_is_searchable_text_of_its_message(conn, settings, namespace, embedder):
    messages = [  # one conversation each: no turn window shares another's words
        {"content": "Look at this beauty, it is finally mine!", "source_message_id": "photo",
         "metadata": {"speaker": "Nora", "caption": "a photo of a red kayak on a frozen lake"}},
        {"content": "My neighbour has a red car that never starts.", "source_message_id": "car"},
        {"content": "We rented a canoe on holiday, it was fun.", "source_message_id": "canoe"},
        {"content": "The lake was frozen, so we stayed inside.", "source_message_id": "lake"},
    ]  # fmt: skip
    for m in messages:
        m["conversation_id"] = m["source_message_id"]
    write_messages(conn, settings, namespace, messages, embedder.encode([m["content"] for m in messages]))

    hits = search(conn, settings, namespace, "Who has a red kayak?", layers=("messages",), k=2)

    assert hits[0].metadata["source_message_id"] == "photo"
