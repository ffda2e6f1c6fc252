"""The HTTP API against the real server (uvicorn on 127.0.0.1) with httpx: every endpoint's round trip, the
error statuses, and tenancy through the key's role."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import Engine, text

from strataflow.memory.api import memory_history
from tests.fixtures.scripted_model import ScriptedModel, fact
from tests.fixtures.service import Tenant, make_tenant


def _message(subject: str, content: str, **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": "c1", "subject_id": subject, "source_message_id": uuid.uuid4().hex, "role": "user",
        "content": content, "created_at": datetime.now(UTC).isoformat(), **fields,
    }  # fmt: skip


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message", "field"} and error["message"]
    return dict(error)


def test_health_readiness_and_the_openapi_reference(api_url: str) -> None:
    assert httpx.get(f"{api_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{api_url}/readyz").json() == {
        "ready": True,
        "database": "ok",
        "pending_migrations": [],
    }
    assert "swagger" in httpx.get(f"{api_url}/docs").text.lower()
    paths = set(httpx.get(f"{api_url}/openapi.json").json()["paths"])
    assert paths >= {
        "/v1/messages", "/v1/context", "/v1/memories", "/v1/memories/search", "/v1/memories/{item_id}",
        "/v1/memories/{item_id}/history", "/v1/profiles/{subject}", "/v1/profiles/{subject}/user",
        "/v1/profiles/{subject}/{doc_type}/status", "/v1/save_info", "/v1/summarize", "/v1/user_context",
    }  # fmt: skip


def test_a_posted_message_is_found_by_context_at_once_and_only_by_its_namespace(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha, beta = tenants["alpha"].client(api_url), tenants["beta"].client(api_url)
    message = _message(subject, "I moved to Lisbon last month and now work as a data engineer at Quintessa.")
    first = alpha.post("/v1/messages", json=message)
    assert first.status_code == 200 and first.json()["accepted"] == 1 and first.json()["inserted"] == 1
    again = alpha.post("/v1/messages", json=[message])  # a list, and the same message: idempotent
    assert (again.json()["ids"], again.json()["inserted"], again.json()["unchanged"]) == (
        first.json()["ids"],
        0,
        1,
    )
    question = {"subject": subject, "query": "Where does the user live now, Lisbon?"}
    found = alpha.get("/v1/context", params=question)
    assert found.status_code == 200 and "Quintessa" in found.text
    assert found.headers["content-type"].startswith("text/plain")
    as_json = alpha.post("/v1/context", json={**question, "format": "json", "budget": 800})
    assert as_json.headers["content-type"] == "application/json" and "Quintessa" in as_json.text
    assert beta.get("/v1/context", params=question).text == ""  # nothing for beta: an empty body


def test_an_entry_round_trips_through_every_memories_endpoint(
    api_url: str, engine: Engine, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    body = {
        "subject": subject,
        "type": "feedback",
        "name": "用户偏好-简洁风格",
        "content": "prefers short answers",
    }
    created = alpha.post("/v1/memories", json=body)
    assert created.status_code == 201
    entry = created.json()
    assert (entry["name"], entry["type"], entry["kind"], entry["content"]) == (
        "用户偏好-简洁风格", "feedback", "feedback", "prefers short answers",
    )  # fmt: skip
    assert alpha.get(f"/v1/memories/{entry['id']}").json() == entry
    patched = alpha.patch(f"/v1/memories/{entry['id']}", json={"type": "user", "description": "answer style"})
    assert (patched.json()["type"], patched.json()["kind"], patched.json()["version"]) == ("user", "fact", 2)
    hits = alpha.post("/v1/memories/search", json={"query": "short answers", "subject": subject}).json()[
        "results"
    ]
    assert [hit["id"] for hit in hits] == [entry["id"]] and hits[0]["score"] > 0
    listed = alpha.get("/v1/memories", params={"subject": subject, "limit": 1}).json()
    assert [e["id"] for e in listed["entries"]] == [entry["id"]] and listed["next_cursor"] is None
    history = alpha.get(f"/v1/memories/{entry['id']}/history").json()
    assert [(v["version"], v["action"], v["type"]) for v in history] == [
        (1, "new", "feedback"),
        (2, "modified", "user"),
    ]
    deleted = alpha.delete(f"/v1/memories/{entry['id']}")
    assert deleted.json()["status"] == "deleted"
    # Gone from every URL of the entry (Schemathesis' use-after-free); the CLI and SQL keep its versions.
    for gone in ("", "/history"):
        _error(alpha.get(f"/v1/memories/{entry['id']}{gone}"), 404)
    _error(alpha.patch(f"/v1/memories/{entry['id']}", json={"description": "again"}), 404)
    with engine.connect() as conn:
        kept = memory_history(conn, tenants["alpha"].namespace, entry["id"])
    assert [(v.version, v.action) for v in kept] == [(1, "new"), (2, "modified"), (3, "deleted")]


def test_agent_scope_over_http_private_unless_shared(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    entry = {
        "subject": subject,
        "type": "project",
        "name": "三季度计划",
        "content": "Q3: the Lisbon office launch",
    }
    private = alpha.post("/v1/memories", json={**entry, "agent": "agent_a"}).json()
    shared = alpha.post(
        "/v1/memories",
        json={**entry, "name": "handbook", "agent": "agent_a", "shared": True, "type": "reference"},
    ).json()

    def hits(agent: str) -> set[int]:
        found = alpha.post(
            "/v1/memories/search", json={"query": "Lisbon office launch", "subject": subject, "agent": agent}
        )
        return {hit["id"] for hit in found.json()["results"]}

    assert hits("agent_a") == {private["id"], shared["id"]}
    assert hits("agent_b") == {shared["id"]}
    _error(alpha.get(f"/v1/memories/{private['id']}", params={"agent": "agent_b"}), 404)
    _error(
        alpha.patch(f"/v1/memories/{shared['id']}", params={"agent": "agent_b"}, json={"content": "x"}), 403
    )


def test_profiles_round_trip_with_status_and_markers_in_the_context(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha, beta = tenants["alpha"].client(api_url), tenants["beta"].client(api_url)
    fresh = alpha.get(f"/v1/profiles/{subject}").json()
    assert fresh["user_memory"]["people"] == [] and isinstance(fresh["work_memory"]["current_projects"], list)
    patched = alpha.patch(f"/v1/profiles/{subject}/user", json={"content": {"occupation": "data engineer"}})
    assert patched.status_code == 200 and patched.json()["content"]["occupation"] == "data engineer"
    people = [{"name": "Ana", "relationship": "sister"}]
    put = alpha.put(
        f"/v1/profiles/{subject}/user", json={"content": {"occupation": "analyst", "people": people}}
    )
    assert put.json()["content"]["people"][0]["name"] == "Ana"
    assert alpha.get(f"/v1/profiles/{subject}/user").json()["content"]["occupation"] == "analyst"
    bad = _error(
        alpha.patch(f"/v1/profiles/{subject}/user", json={"content": {"people": [{"relationship": 3}]}}), 422
    )
    assert bad["field"] is not None and bad["field"].startswith("people.0")
    question = {"subject": subject, "query": "What does the user do for a living?", "profile": "user"}
    assert "<!-- USER_MEMORY_START -->" in alpha.get("/v1/context", params=question).text
    status = alpha.put(f"/v1/profiles/{subject}/user/status", json={"status": "DISABLED"})
    assert status.status_code == 200 and status.json()["status"] == "disabled"
    assert "USER_MEMORY_START" not in alpha.get("/v1/context", params=question).text
    _error(alpha.put(f"/v1/profiles/{subject}/user/status", json={"status": "maybe"}), 422)
    assert "analyst" not in beta.get(f"/v1/profiles/{subject}").text


def test_the_seed_000_tools_save_info_summarize_and_user_context(
    scripted_api_url: str, scripted_model: ScriptedModel, tenants: dict[str, Tenant], subject: str
) -> None:
    said = "我今年四十出头，在成都做律师。"
    scripted_model.says(said, fact("age", "40+"), fact("job_title", "律师"), fact("location", "成都"))
    alpha = tenants["alpha"].client(scripted_api_url)
    exchange = {"subject": subject, "user_message": said, "assistant_message": "好的，了解了。"}
    saved = alpha.post("/v1/save_info", json=exchange)
    assert saved.status_code == 200, saved.text
    body = saved.json()
    assert body["extracted_info"] == {"age": "40+", "job_title": "律师", "location": "成都"}
    assert body["saved_count"] == len(body["saved_memories"]) == 3 and body["skipped_fields"] == []
    assert [(m["memoryType"], m["field"], m["content"]) for m in body["saved_memories"]] == [
        ("FACT", "age", "年龄：40+"),
        ("FACT", "job_title", "职位：律师"),
        ("FACT", "location", "所在地：成都"),
    ]
    again = alpha.post("/v1/save_info", json=exchange).json()
    assert again["saved_count"] == 0 and sorted(again["skipped_fields"]) == ["age", "job_title", "location"]
    assert scripted_model.tasks() == ["extract"], "the second call was answered by the cache"
    summary = alpha.post("/v1/summarize", json={"subject": subject}).json()
    assert set(summary["completeness"]) >= {"score", "filled_fields", "missing_fields"}
    assert sorted(summary["completeness"]["filled_fields"]) == ["age", "job_title", "location"]
    assert summary["narrative_summary"] and summary["language"] == "zh"
    found = alpha.post("/v1/user_context", json={"subject": subject, "query": "他在哪里工作？"}).json()
    assert found["total_memories"] == 3 and "所在地：成都" in [m["content"] for m in found["memories"]]
    _error(tenants["reader"].client(scripted_api_url).post("/v1/save_info", json=exchange), 403)
    assert (
        tenants["beta"]
        .client(scripted_api_url)
        .post("/v1/user_context", json={"subject": subject, "query": "成都"})
        .json()["total_memories"]
        == 0
    )


def test_keys_that_cannot_be_used_get_401(api_url: str, engine: Engine) -> None:
    tenant = make_tenant(engine, "agent", ("ns_revoked",))
    query = {"subject": "u1", "query": "anything"}
    assert _error(httpx.get(f"{api_url}/v1/context", params=query), 401)["code"] == "unauthorized"
    _error(httpx.get(f"{api_url}/v1/context", params=query, headers={"Authorization": "Bearer sk-nope"}), 401)
    _error(
        httpx.get(f"{api_url}/v1/context", params=query, headers={"Authorization": f"Basic {tenant.key}"}),
        401,
    )
    assert tenant.client(api_url).get("/v1/context", params=query).status_code == 200
    with engine.begin() as conn:
        conn.execute(text("update api_keys set revoked_at = now() where name = :n"), {"n": tenant.role})
    assert "revoked" in _error(tenant.client(api_url).get("/v1/context", params=query), 401)["message"]


def test_an_analyst_key_reads_but_every_write_is_403(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    reader = tenants["reader"].client(api_url)
    assert reader.get("/v1/context", params={"subject": subject, "query": "x"}).status_code == 200
    assert reader.get("/v1/memories").status_code == 200
    _error(reader.post("/v1/messages", json=_message(subject, "hello")), 403)
    _error(
        reader.post("/v1/memories", json={"subject": subject, "type": "user", "name": "n", "content": "c"}),
        403,
    )
    _error(reader.patch(f"/v1/profiles/{subject}/user", json={"content": {"occupation": "x"}}), 403)
    _error(reader.delete("/v1/memories/1"), 403)


def test_a_key_with_two_namespaces_picks_one_with_x_namespace(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    both = tenants["both"]
    query = {"subject": subject, "query": "x"}
    assert _error(both.client(api_url).get("/v1/context", params=query), 400)["code"] == "namespace_required"
    _error(both.client(api_url, **{"X-Namespace": "not_granted"}).get("/v1/context", params=query), 403)
    in_beta = both.client(api_url, **{"X-Namespace": both.namespaces[1]})
    entry = in_beta.post(
        "/v1/memories", json={"subject": subject, "type": "user", "name": "n", "content": "c"}
    )
    assert entry.status_code == 201
    assert tenants["beta"].client(api_url).get(f"/v1/memories/{entry.json()['id']}").status_code == 200
    _error(tenants["alpha"].client(api_url).get(f"/v1/memories/{entry.json()['id']}"), 404)


def test_two_namespaces_see_nothing_of_each_other_through_any_endpoint(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha, beta = tenants["alpha"].client(api_url), tenants["beta"].client(api_url)
    alpha.post("/v1/messages", json=_message(subject, "The secret project is called Bluefin."))
    entry = alpha.post(
        "/v1/memories", json={"subject": subject, "type": "project", "name": "codename", "content": "Bluefin"}
    ).json()
    alpha.patch(f"/v1/profiles/{subject}/work", json={"content": {"occupation": "Bluefin lead"}})
    item = f"/v1/memories/{entry['id']}"
    for response in [
        beta.get("/v1/context", params={"subject": subject, "query": "What is the secret project Bluefin?"}),
        beta.post("/v1/context", json={"subject": subject, "query": "Bluefin", "format": "json"}),
        beta.get("/v1/memories", params={"subject": subject}),
        beta.post("/v1/memories/search", json={"query": "Bluefin codename"}),
        beta.get(f"/v1/profiles/{subject}"),
        beta.get(f"/v1/profiles/{subject}/work"),
        beta.post("/v1/user_context", json={"subject": subject, "query": "Bluefin"}),
        beta.post("/v1/summarize", json={"subject": subject}),
    ]:
        assert response.status_code in (200, 404) and "Bluefin" not in response.text, response.text
    for response in [
        beta.get(item),
        beta.patch(item, json={"content": "x"}),
        beta.delete(item),
        beta.get(f"{item}/history"),
    ]:
        _error(response, 404)
    assert alpha.get(item).json()["content"] == "Bluefin"  # beta's attempts changed nothing


def test_errors_name_the_field_and_use_the_status_http_means(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    bad_role = _error(alpha.post("/v1/messages", json=_message(subject, "hi", role="wizard")), 422)
    assert (bad_role["field"], bad_role["code"]) == ("role", "unknown_role")
    _error(alpha.post("/v1/messages", json=[_message(subject, "x", created_at="yesterday-ish")]), 422)
    assert (
        _error(
            alpha.post(
                "/v1/memories", json={"subject": subject, "type": "diary", "name": "n", "content": "c"}
            ),
            422,
        )["field"]
        == "type"
    )
    assert _error(alpha.get("/v1/memories", params={"cursor": "garbage"}), 422)["field"] == "cursor"
    assert _error(alpha.get("/v1/context", params={"subject": subject}), 422)["field"] == "query"
    entry = {"subject": subject, "type": "user", "name": "once", "content": "c"}
    assert alpha.post("/v1/memories", json=entry).status_code == 201
    assert _error(alpha.post("/v1/memories", json=entry), 409)["code"] == "conflict"
    _error(alpha.get("/v1/memories/999999999"), 404)
    _error(alpha.get("/v1/no-such-thing"), 404)
    _error(alpha.put("/v1/messages", json={}), 405)


def test_the_rate_limit_answers_429_with_retry_after(limited_url: str, tenants: dict[str, Tenant]) -> None:
    client = tenants["alpha"].client(limited_url)
    statuses = [client.get("/v1/memories", params={"limit": 1}).status_code for _ in range(5)]
    assert statuses[:3] == [200, 200, 200] and 429 in statuses[3:]
    limited = client.get("/v1/memories", params={"limit": 1})
    _error(limited, 429)
    assert int(limited.headers["Retry-After"]) >= 1
    assert tenants["beta"].client(limited_url).get("/v1/memories").status_code == 200  # per key


def test_hostile_bodies_get_4xx_and_change_nothing(
    api_url: str, engine: Engine, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"]
    client = alpha.client(api_url)

    def counts() -> tuple[int, ...]:
        with engine.connect() as conn:
            return tuple(
                conn.execute(
                    text(f"select count(*) from {table} where namespace = :ns"), {"ns": alpha.namespace}
                ).scalar_one()
                for table in ("message_keys", "memory_items", "profile_documents", "quarantine")
            )

    before = counts()
    json_headers = {"content-type": "application/json"}
    _error(client.post("/v1/messages", content=b"x" * 2_000_000, headers=json_headers), 413)
    _error(client.post("/v1/messages", content=b'{"content": "\xff\xfe"}', headers=json_headers), 400)
    _error(client.post("/v1/messages", content=b"{not json", headers=json_headers), 400)
    _error(client.post("/v1/messages", json="just a string"), 422)
    _error(client.post("/v1/memories", json={"subject": ["u"], "type": 5, "name": {}, "content": None}), 422)
    _error(
        client.post(
            "/v1/memories", json={"subject": subject, "type": "user", "name": "a\x00b", "content": "c"}
        ),
        422,
    )
    _error(
        client.post(
            "/v1/memories",
            json={"subject": subject, "type": "user", "name": "n", "content": "c", "admin": True},
        ),
        422,
    )
    _error(client.post("/v1/memories/search", json={"query": "x", "limit": 10_000}), 422)
    _error(client.get("/v1/memories/1; drop table memory_items"), 404)  # no such path: ids are integers
    assert counts() == before
    sql = "'; drop table memory_items; --"
    stored = client.post(
        "/v1/memories", json={"subject": subject, "type": "user", "name": sql, "content": sql}
    )
    assert stored.status_code == 201 and stored.json()["name"] == sql  # bound parameters: stored as text
    assert client.post("/v1/memories/search", json={"query": sql}).status_code == 200
    assert counts()[1] == before[1] + 1
