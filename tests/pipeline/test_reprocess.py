"""Recomputing extraction with another model (strataflow/pipeline/extract.py with a Recompute window), over
litellm's real HTTP path: a scripted OpenAI-compatible server on 127.0.0.1 plays an old and a new model."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from models.params import EVERY_SCOPE, Recompute, Shard
from strataflow.config import Settings
from strataflow.llm.prompt_blocks import parse_blocks, parse_json_lines
from strataflow.memory.store import upsert_item
from strataflow.pipeline.extract import extract_new
from strataflow.pipeline.ingest import ingest_logs

FACT = re.compile(r"my (?P<key>[a-z_]+) is (?P<value>\w+)")
WINDOW = Recompute(since=datetime(2026, 11, 1, tzinfo=UTC), until=datetime(2026, 11, 8, tzinfo=UTC))
SELECT_CURRENT = text(
    """
    select subject_id, key, value, source, version, model, run_id::text from memory_items
    where namespace = :ns order by subject_id, key
    """
)
SELECT_HISTORY = text(
    """
    select subject_id, key, version, value, model, run_id::text, superseded_at is not null, note
    from memory_item_versions where namespace = :ns order by subject_id, key, version_id
    """
)


def model_answer(upper: bool) -> Any:
    """A stand-in model: 'my <key> is <value>' in a user line -> one fact; the new model upper-cases."""

    def answer(body: dict[str, Any]) -> str:
        prompt = "\n".join(m["content"] for m in body["messages"])
        items = []
        for record in parse_json_lines(parse_blocks(prompt)["messages"]):
            for match in FACT.finditer(record["text"]):
                value = match["value"].upper() if upper else match["value"]
                statement = f"{match['key']} {value}"
                items.append(
                    {"kind": "fact", "key": match["key"], "value": value, "statement": statement}
                    | {"source_message_ids": [record["id"]]}
                )
        return json.dumps({"items": items})

    return answer


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    records = [
        ("ann", "a1", "my city is berlin", "2026-11-02T09:00:00Z"),
        ("ann", "a2", "and my pet is cat", "2026-11-03T09:00:00Z"),
        ("bob", "b1", "my city is oslo", "2026-11-04T09:00:00Z"),
        ("bob", "b2", "my team is core", "2026-11-05T09:00:00Z"),
    ]
    path = tmp_path / "chat.jsonl"
    lines = [
        {"conversation_id": subject, "subject_id": subject, "source_message_id": mid, "role": "user"}
        | {"content": content, "created_at": created_at}
        for subject, mid, content, created_at in records
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_reprocess_with_a_new_model_versions_every_changed_item_and_leaves_manual_items_alone(
    settings: Settings,
    engine: Engine,
    namespace: str,
    logs: Path,
    scripted_llm_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-key-1234567890")
    old = settings.model_copy(update={"extract_model": "openai/old", "llm_api_base": scripted_llm_server.url})
    new = old.model_copy(update={"extract_model": "openai/new"})
    scripted_llm_server.fallback = model_answer(upper=False)
    ingest_logs(old, [logs], namespace=namespace, progress=False)
    old_run = uuid.uuid4()
    extract_new(old, run_id=old_run, namespace=namespace, progress=False)
    with engine.begin() as conn:  # a person corrects bob's team by hand
        upsert_item(
            conn,
            namespace=namespace,
            subject_id="bob",
            kind="fact",
            key="team",
            value="platform",
            statement="team: platform",
            source="manual",
            event_at=datetime(2026, 11, 6, tzinfo=UTC),
        )

    scripted_llm_server.fallback = model_answer(upper=True)
    new_run = uuid.uuid4()
    result = extract_new(new, run_id=new_run, namespace=namespace, progress=False, recompute=WINDOW)
    with engine.connect() as conn:
        current = [tuple(row) for row in conn.execute(SELECT_CURRENT, {"ns": namespace})]
        history = [tuple(row) for row in conn.execute(SELECT_HISTORY, {"ns": namespace})]

    assert (result.scopes, result.llm_calls, result.items_changed) == (2, 2, 3)
    assert current == [
        ("ann", "city", "BERLIN", "extracted", 2, "openai/new", str(new_run)),
        ("ann", "pet", "CAT", "extracted", 2, "openai/new", str(new_run)),
        ("bob", "city", "OSLO", "extracted", 2, "openai/new", str(new_run)),
        ("bob", "team", "platform", "manual", 2, None, None),
    ]
    note = "older event time than the current value"  # the hand edit (11-06) is newer than the message
    assert history == [
        ("ann", "city", 1, "berlin", "openai/old", str(old_run), True, None),
        ("ann", "city", 2, "BERLIN", "openai/new", str(new_run), False, None),
        ("ann", "pet", 1, "cat", "openai/old", str(old_run), True, None),
        ("ann", "pet", 2, "CAT", "openai/new", str(new_run), False, None),
        ("bob", "city", 1, "oslo", "openai/old", str(old_run), True, None),
        ("bob", "city", 2, "OSLO", "openai/new", str(new_run), False, None),
        ("bob", "team", 1, "core", "openai/old", str(old_run), True, None),
        ("bob", "team", 2, "platform", None, None, False, None),
        ("bob", "team", 2, "CORE", "openai/new", str(new_run), True, note),
    ]

    requests = len(scripted_llm_server.requests)
    again = extract_new(new, run_id=uuid.uuid4(), namespace=namespace, progress=False, recompute=WINDOW)
    assert (again.llm_calls, again.scopes_current, len(scripted_llm_server.requests)) == (0, 2, requests)


def test_force_asks_the_model_again_even_where_it_produced_the_items(
    settings: Settings, engine: Engine, namespace: str, logs: Path, scripted_llm_server: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-key-1234567890")
    same = settings.model_copy(update={"extract_model": "openai/same"})
    same = same.model_copy(update={"llm_api_base": scripted_llm_server.url})
    scripted_llm_server.fallback = model_answer(upper=False)
    ingest_logs(same, [logs], namespace=namespace, progress=False)
    extract_new(same, namespace=namespace, progress=False)
    requests = len(scripted_llm_server.requests)

    current = extract_new(same, namespace=namespace, progress=False, recompute=WINDOW)
    forced = extract_new(
        same, namespace=namespace, progress=False, recompute=WINDOW.model_copy(update={"force": True})
    )
    assert (current.llm_calls, current.scopes_current) == (0, 2)
    assert (forced.llm_calls, forced.cache_hits, forced.items_unchanged) == (2, 0, 4)
    assert len(scripted_llm_server.requests) == requests + 2


def test_a_reprocess_stops_cleanly_at_the_budget_and_the_next_one_resumes_where_it_stopped(
    settings: Settings, engine: Engine, namespace: str, logs: Path, scripted_llm_server: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-key-1234567890")
    old = settings.model_copy(update={"extract_model": "openai/old", "llm_api_base": scripted_llm_server.url})
    scripted_llm_server.fallback = model_answer(upper=False)
    ingest_logs(old, [logs], namespace=namespace, progress=False)
    extract_new(old, namespace=namespace, progress=False)

    scripted_llm_server.fallback = model_answer(upper=True)
    tight = old.model_copy(update={"extract_model": "openai/new", "llm_budget_tokens": 100})  # 120 a call
    stopped = extract_new(tight, run_id=uuid.uuid4(), namespace=namespace, progress=False, recompute=WINDOW)
    roomy = tight.model_copy(update={"llm_budget_tokens": 10_000})
    resumed = extract_new(roomy, run_id=uuid.uuid4(), namespace=namespace, progress=False, recompute=WINDOW)

    assert (stopped.budget_stopped, stopped.llm_calls, stopped.items_changed) == (True, 1, 2)
    assert (resumed.budget_stopped, resumed.scopes_current, resumed.llm_calls) == (False, 1, 1)
    with engine.connect() as conn:
        models = conn.execute(
            text("select distinct model from memory_items where namespace = :ns"), {"ns": namespace}
        ).scalars()
        assert list(models) == ["openai/new"]


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_split_the_scopes_into_disjoint_parts_that_cover_them_all(count: int) -> None:
    scopes = [("ns", f"subject-{i}") for i in range(200)] + [("other", "subject-1")]
    parts = [[s for s in scopes if Shard(index=i, count=count).owns(*s)] for i in range(count)]
    assert sorted(s for part in parts for s in part) == sorted(scopes)
    assert all(part for part in parts)  # 201 scopes over at most 7 parts: none is empty
    assert EVERY_SCOPE.owns("ns", "anyone") and Shard(index=1, count=2) == Shard(index=1, count=2)
    with pytest.raises(ValueError):
        Shard(index=count, count=count)


def test_an_unchanged_reprocess_sends_nothing_where_earlier_runs_batched_the_window_otherwise(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    """Messages that gave no item (greetings, thanks), extracted by two runs as they arrived, are one batch
    to a reprocess: with the same model and prompt version it sends nothing (sql/482), and with another
    model it sends the window once."""
    said = ["Hi there!", "Thanks a lot.", "How are you today?", "ok", "Good morning.", "See you."]
    for part in (said[:3], said[3:]):  # an incremental run per arrival
        path = tmp_path / f"{uuid.uuid4().hex}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "conversation_id": "c",
                        "subject_id": "dee",
                        "source_message_id": text,
                        "role": "user",
                        "content": text,
                        "created_at": "2026-11-03T09:00:00Z",
                    }
                )
                + "\n"
                for text in part
            ),  # fmt: skip
            encoding="utf-8",
        )
        ingest_logs(settings, [path], namespace=namespace, progress=False)
        assert extract_new(settings, namespace=namespace, progress=False).llm_calls == 1

    again = extract_new(settings, namespace=namespace, recompute=WINDOW, progress=False)
    assert (again.llm_calls, again.scopes_current) == (0, 1)

    other = settings.model_copy(update={"extract_model": "offline/rules-v2"})
    assert extract_new(other, namespace=namespace, recompute=WINDOW, progress=False).llm_calls == 1
    assert extract_new(other, namespace=namespace, recompute=WINDOW, progress=False).llm_calls == 0
