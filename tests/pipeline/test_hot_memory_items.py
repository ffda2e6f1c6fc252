"""Seed 001 refreshHotMemory: the hot summary and the typed items (status, decision, preference) it finds,
through the offline provider and through litellm's HTTP path (a scripted OpenAI-compatible server), and the
`strataflow hot-memory refresh` command."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.cli import app
from strataflow.config import Settings
from strataflow.pipeline.hot_memory import refresh_hot_memory

SELECT_ITEMS = text(
    """
    select kind, key, value, prompt_version, source_message_ids from memory_items
    where namespace = :ns and subject_id = :subject order by kind, key
    """
)


def _items(engine: Engine, namespace: str, subject: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(SELECT_ITEMS, {"ns": namespace, "subject": subject}))


def test_offline_refresh_writes_the_summary_and_the_typed_items(
    engine: Engine, settings: Settings, namespace: str, load: Any
) -> None:
    """With the default offline model: one summary and typed items of the hot kinds only, each resting on the
    subject's messages (which items the rules find here: tests/llm/offline/test_stage_prompts.py)."""
    load({"team": ["The login page is in progress, about 60% done.",
                   "We decided to use Redis because it keeps the stack small.",
                   "Riley is our tech lead."]}, extract=False)  # fmt: skip
    result = refresh_hot_memory(settings, namespace=namespace, subject_id="team")
    rows = _items(engine, namespace, "team")
    typed = [r for r in rows if r.kind != "hot_summary"]
    assert (result.scopes, result.summaries_written, result.errors) == (1, 1, [])
    assert result.items_written == len(typed) > 0
    assert [r.kind for r in rows].count("hot_summary") == 1
    assert {r.kind for r in typed} <= {"status", "decision", "preference"}, "facts are extraction's job"
    assert {r.prompt_version for r in rows} == {"hot-summary-v2"}
    with engine.connect() as conn:
        said = set(
            conn.execute(
                text("select message_id from conversation_messages where namespace = :ns and role = 'user'"),
                {"ns": namespace},
            ).scalars()
        )
    assert all(r.source_message_ids and set(r.source_message_ids) <= said for r in rows)
    again = refresh_hot_memory(settings, namespace=namespace)
    assert (again.scopes, again.llm_calls) == (0, 0)


def test_items_come_back_through_litellm_and_only_hot_kinds_citing_the_prompt_are_kept(
    engine: Engine,
    settings: Settings,
    namespace: str,
    load: Any,
    scripted_llm_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-key-1234567890")
    load({"p": ["We should cache the search results; everyone prefers fast pages."]}, extract=False)

    def reply(body: dict[str, Any]) -> str:
        prompt = "\n".join(m["content"] for m in body["messages"])
        first = int(re.findall(r'\{"id":(\d+),"role":"user"', prompt)[0])
        item = {"statement": "cache the search results", "confidence": 0.8, "source_message_ids": [first]}
        return json.dumps({
            "summary": "The team wants the search results cached.", "source_message_ids": [first],
            "items": [
                {**item, "kind": "decision", "key": "decision_search_cache", "value": {"decision": "cache"}},
                {**item, "kind": "preference", "key": "preference_speed", "value": "fast pages"},
                {**item, "kind": "fact", "key": "age", "value": 30},  # not a hot kind: dropped
                {**item, "kind": "status", "key": "status_x", "value": "done",
                 "source_message_ids": [999999]},  # cites no message of the prompt: dropped
            ],
        })  # fmt: skip

    scripted_llm_server.fallback = reply
    http = settings.model_copy(
        update={"extract_model": "openai/test-model", "llm_api_base": scripted_llm_server.url}
    )
    result = refresh_hot_memory(http, namespace=namespace)
    assert (result.llm_calls, result.summaries_written, result.items_written) == (1, 1, 2)
    assert "decision_<topic>" in scripted_llm_server.prompt_of(0), "the prompt asks for the typed items"
    keys = [(r.kind, r.key) for r in _items(engine, namespace, "p")]
    assert keys == [("decision", "decision_search_cache"), ("hot_summary", "hot_summary"),
                    ("preference", "preference_speed")]  # fmt: skip


def test_the_refresh_command_takes_a_namespace_and_a_subject(
    engine: Engine, namespace: str, load: Any
) -> None:
    load(
        {"a": ["We decided to use Kafka because it scales."], "b": ["The admin page is blocked."]},
        extract=False,
    )
    runner = CliRunner()
    done = runner.invoke(app, ["hot-memory", "refresh", "-n", namespace, "-s", "a"])
    assert done.exit_code == 0, done.output
    typed = [r for r in _items(engine, namespace, "a") if r.kind != "hot_summary"]
    assert f"scopes 1, summaries written 1, typed items written {len(typed)}" in done.stdout
    assert [r.key for r in _items(engine, namespace, "b")] == [], "only the subject asked for"
    with engine.connect() as conn:
        run = conn.execute(
            text("select status, counts ->> 'items_written' from pipeline_runs where flow = 'hot_memory'"
                 " and namespace = :ns"), {"ns": namespace},
        ).one()  # fmt: skip
    assert tuple(run) == ("completed", str(len(typed)))
