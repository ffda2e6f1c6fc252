"""extract_new end to end: ingest (tasks.ingest) -> extraction through litellm -> L2, watermarks, ledger."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.llm.prompt_blocks import parse_blocks, parse_json_lines
from strataflow.memory.store import upsert_item
from strataflow.pipeline.extract import PROMPT_VERSION, extract_new
from strataflow.pipeline.hot_memory import refresh_hot_memory
from strataflow.pipeline.ingest import ingest_logs

KEY_VALUE = re.compile(r"my (?P<key>[a-z][a-z0-9_]*) is (?P<value>\S+)")


def key_value_model(body: dict[str, Any]) -> str:
    """A stand-in model for the HTTP path: 'my <key> is <value>' in a message -> one fact item."""
    prompt = "\n".join(m["content"] for m in body["messages"])
    blocks = parse_blocks(prompt)
    if "summary" in blocks.get("task", "") or blocks.get("task") == "hot_summary":
        records = parse_json_lines(blocks["messages"])
        return json.dumps(
            {
                "summary": " / ".join(r["text"] for r in records),
                "source_message_ids": [r["id"] for r in records],
            }
        )
    items = []
    for record in parse_json_lines(blocks["messages"]):
        for match in KEY_VALUE.finditer(record["text"]):
            value: Any = int(match["value"]) if match["value"].isdigit() else match["value"]
            items.append(
                {
                    "kind": "fact",
                    "key": match["key"],
                    "value": value,
                    "statement": record["text"],
                    "source_message_ids": [record["id"]],
                }
            )
    return json.dumps({"items": items})


def http_settings(settings: Settings, llm_server: Any, **overrides: object) -> Settings:
    llm_server.fallback = key_value_model
    return settings.model_copy(
        update={"extract_model": "openai/test-model", "llm_api_base": llm_server.url, **overrides}
    )


def items(engine: Engine, namespace: str) -> dict[str, tuple]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "select subject_id, key, value, source, version, source_message_ids, prompt_version"
                " from memory_items"
                " where namespace = :ns and kind <> 'hot_summary'"
            ),
            {"ns": namespace},
        )
        return {f"{r[0]}.{r[1]}": tuple(r[2:]) for r in rows}


def calls(engine: Engine, namespace: str) -> int:
    with engine.connect() as conn:
        return conn.execute(
            text("select count(*) from llm_calls where namespace = :ns"), {"ns": namespace}
        ).scalar()


def test_one_call_per_scope_batch_and_a_rerun_makes_no_call(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server)
    logs = write_logs(
        "team",
        [
            message("ann", "a1", "hi, my city is Berlin", "2026-11-02T09:00:00Z"),
            message("ann", "a2", "sure", "2026-11-02T09:01:00Z", role="assistant"),
            message("ann", "a3", "and my age is 41", "2026-11-02T09:02:00Z"),
            message("bob", "b1", "my city is Oslo", "2026-11-02T09:00:00Z"),
        ],
    )
    ingest_logs(settings, [logs], namespace=namespace, progress=False)
    result = extract_new(settings, namespace=namespace, progress=False)
    assert (result.scopes, result.messages, result.llm_calls, result.items_new) == (2, 3, 2, 3)
    stored = items(engine, namespace)
    assert {k: v[:3] for k, v in stored.items()} == {
        "ann.city": ("Berlin", "extracted", 1),
        "ann.age": (41, "extracted", 1),
        "bob.city": ("Oslo", "extracted", 1),
    }
    assert all(v[4] == PROMPT_VERSION for v in stored.values())
    # both user turns of ann travel in one request, the assistant turn between them as context only
    ann = next(prompt for prompt in llm_server.prompts() if "Berlin" in prompt)
    lines = parse_json_lines(parse_blocks(ann)["messages"])
    assert [(line["role"], line.get("context")) for line in lines] == [
        ("user", None),
        ("assistant", True),
        ("user", None),
    ]

    again = extract_new(settings, namespace=namespace, progress=False)
    assert (again.scopes, again.llm_calls) == (0, 0) and calls(engine, namespace) == 2
    # re-extracting with the model and prompt version that produced the items: both scopes are current,
    # nothing is sent and nothing written
    repeated = extract_new(
        settings, namespace=namespace, reprocess_since=datetime(2026, 1, 1, tzinfo=UTC), progress=False
    )
    assert (repeated.scopes, repeated.scopes_current, repeated.llm_calls, repeated.cache_hits) == (0, 2, 0, 0)
    assert calls(engine, namespace) == 2 and len(llm_server.requests) == 2


def test_every_item_lineage_points_at_real_l1_rows(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server)
    logs = write_logs(
        "lineage",
        [message("cy", f"m{i}", f"my k{i} is v{i}", f"2026-10-0{i}T10:00:00Z") for i in range(1, 5)],
    )
    ingest_logs(settings, [logs], namespace=namespace, progress=False)
    run_id = uuid.uuid4()
    extract_new(settings, run_id=run_id, namespace=namespace, progress=False)
    with engine.connect() as conn:
        orphans = conn.execute(
            text(
                "select i.key, s.id from memory_items i cross join unnest(i.source_message_ids) s(id)"
                " left join conversation_messages m on m.message_id = s.id and m.namespace = i.namespace"
                "  and m.subject_id = i.subject_id"
                " where i.namespace = :ns and m.message_id is null"
            ),
            {"ns": namespace},
        ).all()
        lineage = conn.execute(
            text(
                "select count(*), count(*) filter (where run_id = :run and model = 'openai/test-model'"
                " and cardinality(source_message_ids) = 1) from memory_items where namespace = :ns"
            ),
            {"ns": namespace, "run": run_id},
        ).one()
    assert orphans == [] and tuple(lineage) == (4, 4)


def test_items_citing_messages_outside_the_batch_are_dropped(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server)
    llm_server.fallback = lambda body: json.dumps(
        {
            "items": [
                {
                    "kind": "fact",
                    "key": "age",
                    "value": 1,
                    "statement": "made up",
                    "source_message_ids": [999999999],
                }
            ]
        }
    )
    ingest_logs(
        settings,
        [write_logs("drop", [message("d", "x", "hello", "2026-11-02T09:00:00Z")])],
        namespace=namespace,
        progress=False,
    )
    result = extract_new(settings, namespace=namespace, progress=False)
    assert (result.items_dropped, result.items_new) == (1, 0) and items(engine, namespace) == {}


def test_backfilled_older_value_does_not_replace_the_newer_one(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server)
    ingest_logs(
        settings,
        [write_logs("now", [message("eve", "n1", "my city is Paris", "2026-11-02T09:00:00Z")])],
        namespace=namespace,
        progress=False,
    )
    extract_new(settings, namespace=namespace, progress=False)
    # a late backfill of March logs: ingested after, but older in event time
    ingest_logs(
        settings,
        [write_logs("march", [message("eve", "o1", "my city is Rome", "2026-03-02T09:00:00Z")])],
        namespace=namespace,
        progress=False,
    )
    result = extract_new(settings, namespace=namespace, progress=False)
    assert (result.llm_calls, result.items_kept_older) == (1, 1)
    assert items(engine, namespace)["eve.city"][:3] == ("Paris", "extracted", 1)
    with engine.connect() as conn:
        kept = conn.execute(
            text(
                "select value, valid_from, valid_to from memory_item_versions"
                " where namespace = :ns and note is not null"
            ),
            {"ns": namespace},
        ).one()
    assert tuple(kept) == ("Rome", datetime(2026, 3, 2, 9, tzinfo=UTC), datetime(2026, 11, 2, 9, tzinfo=UTC))


def test_manual_edit_survives_extraction_and_the_conflict_is_reported(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server)
    with engine.begin() as conn:
        upsert_item(
            conn,
            namespace=namespace,
            subject_id="fay",
            kind="fact",
            key="city",
            value="Lyon",
            statement="city: Lyon",
            source="manual",
            event_at=datetime(2026, 10, 1, tzinfo=UTC),
        )
    ingest_logs(
        settings,
        [write_logs("fay", [message("fay", "f1", "my city is Nice", "2026-11-02T09:00:00Z")])],
        namespace=namespace,
        progress=False,
    )
    result = extract_new(settings, namespace=namespace, progress=False)
    assert result.manual_conflicts == [
        {
            "namespace": namespace,
            "subject_id": "fay",
            "kind": "fact",
            "key": "city",
            "extracted_value": "Nice",
        }
    ]
    assert items(engine, namespace)["fay.city"][:2] == ("Lyon", "manual")


def test_budget_stop_ends_cleanly_and_the_next_run_resumes(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server, llm_budget_tokens=100, extract_batch_tokens=200)
    records = [message(f"s{i}", f"m{i}", f"my rank is {i}", "2026-11-02T09:00:00Z") for i in range(3)]
    ingest_logs(settings, [write_logs("budget", records)], namespace=namespace, progress=False)
    first = extract_new(settings, run_id=uuid.uuid4(), namespace=namespace, progress=False)
    assert (first.budget_stopped, first.llm_calls, len(items(engine, namespace))) == (True, 1, 1)
    second = extract_new(settings, run_id=uuid.uuid4(), namespace=namespace, progress=False)
    assert (second.budget_stopped, second.llm_calls) == (True, 1)
    third = extract_new(
        settings.model_copy(update={"llm_budget_tokens": 10_000}),
        run_id=uuid.uuid4(),
        namespace=namespace,
        progress=False,
    )
    assert (third.budget_stopped, third.llm_calls, third.scopes) == (False, 1, 1)
    assert sorted(v[0] for v in items(engine, namespace).values()) == [0, 1, 2]


def test_hot_memory_summarises_scopes_with_new_messages_once(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server)
    ingest_logs(
        settings,
        [write_logs("hot", [message("gus", "h1", "shipping friday", "2026-11-02T09:00:00Z")])],
        namespace=namespace,
        progress=False,
    )
    first = refresh_hot_memory(settings, namespace=namespace)
    again = refresh_hot_memory(settings, namespace=namespace)
    with engine_for(settings).connect() as conn:
        value = conn.execute(
            text("select value from memory_items where namespace = :ns and kind = 'hot_summary'"),
            {"ns": namespace},
        ).scalar()
    assert (first.summaries_written, again.scopes, value) == (
        1,
        0,
        {"summary": "shipping friday", "messages": 1},
    )


def test_extraction_survives_a_429_and_malformed_json_with_every_request_in_the_ledger(
    settings, engine, llm_server, namespace, write_logs, message
):
    settings = http_settings(settings, llm_server)
    llm_server.script = [(429, "rate limited"), (200, '{"items": [{"kind": "fact", "key": ')]
    logs = write_logs("flaky", [message("hal", "h1", "my city is Turin", "2026-11-02T09:00:00Z")])
    ingest_logs(settings, [logs], namespace=namespace, progress=False)
    result = extract_new(settings, namespace=namespace, progress=False)
    assert (result.llm_calls, result.items_new, result.errors) == (3, 1, [])
    assert items(engine, namespace)["hal.city"][0] == "Turin"
    with engine.connect() as conn:
        outcomes = conn.execute(
            text("select attempt, outcome from llm_calls where namespace = :ns order by call_id"),
            {"ns": namespace},
        ).all()
    assert [tuple(o) for o in outcomes] == [(1, "rate_limited"), (2, "invalid_output"), (3, "ok")]
