"""Seed 004 node fields over L2: several keys per item, obs_reflected / obs_updated as counts (the
memory_nodes view), and perceptual memory of today with the data assets ingested today."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.memory.store import delete_item, upsert_item
from strataflow.pipeline.assets import ingest_assets
from strataflow.pipeline.reflect import reflect_pending

T0 = datetime(2025, 5, 5, 9, 0, tzinfo=UTC)
SELECT_NODE = text(
    """
    select key, keys, action_status, store_status, obs_reflected, obs_updated, dt
    from memory_nodes where namespace = :ns and key = :key
    """
)


def _write(engine: Engine, namespace: str, key: str, value: Any, at: datetime, **extra: Any) -> None:
    with engine.begin() as conn:
        upsert_item(conn, namespace=namespace, subject_id="u", kind=extra.pop("kind", "fact"), key=key,
                    value=value, statement=f"{key}: {value}", event_at=at, **extra)  # fmt: skip


def _node(engine: Engine, namespace: str, key: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(SELECT_NODE, {"ns": namespace, "key": key}).one()


def test_an_item_has_several_keys_and_one_entity_finds_every_item_about_it(
    engine: Engine, namespace: str
) -> None:
    _write(engine, namespace, "person_emery", {"name": "Emery", "role": "QA engineer"}, T0)
    release = {"decision": "weekly releases", "reason": "Emery needs a day"}
    _write(
        engine,
        namespace,
        "decision_release",
        release,
        T0,
        kind="decision",
        metadata={"keys": ["Emery", "QA"]},
    )
    _write(engine, namespace, "university", "Example University", T0, category="career")
    assert _node(engine, namespace, "person_emery").keys == ["emery", "person_emery"]
    assert _node(engine, namespace, "decision_release").keys == [
        "decision_release", "emery", "qa", "release", "weekly releases"]  # fmt: skip
    assert _node(engine, namespace, "university").keys == ["career", "university"]
    with engine.connect() as conn:
        about = conn.execute(
            text("select key from memory_items where namespace = :ns and keys && array['emery'] order by 1"),
            {"ns": namespace},
        ).scalars().all()  # fmt: skip
    assert about == ["decision_release", "person_emery"]


def test_obs_updated_counts_updates_and_obs_reflected_counts_reflections(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    _write(engine, namespace, "job_title", "nurse", T0)
    node = _node(engine, namespace, "job_title")
    assert (node.action_status, node.store_status, node.obs_updated, node.obs_reflected) == (
        "new",
        "valid",
        0,
        0,
    )
    reflect_pending(settings, namespace=namespace)
    _write(engine, namespace, "job_title", "software engineer", T0 + timedelta(days=3))
    _write(engine, namespace, "job_title", "software engineer", T0 + timedelta(days=1))  # older: history only
    reflect_pending(settings, namespace=namespace)
    node = _node(engine, namespace, "job_title")
    assert (node.action_status, node.obs_updated, node.obs_reflected) == ("content_modified", 1, 2)
    assert str(node.dt) == "2025-05-08"
    with engine.begin() as conn:
        delete_item(conn, namespace=namespace, subject_id="u", kind="fact", key="job_title",
                    event_at=T0 + timedelta(days=9))  # fmt: skip
    node = _node(engine, namespace, "job_title")
    assert (node.action_status, node.store_status, node.obs_updated) == ("deleted", "deleted", 1)


def test_perceptual_memory_of_today_holds_the_assets_ingested_today(
    engine: Engine, settings: Settings, namespace: str, tmp_path: Path
) -> None:
    guide = tmp_path / "onboarding.md"
    guide.write_text("# Onboarding guide\n\nHow to set up the data platform.\n", encoding="utf-8")
    assert ingest_assets(settings, [guide], namespace).inserted == 1
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "select memory_type, subject_id, kind, key, text from perceptual_memory where namespace = :ns"
            ),
            {"ns": namespace},
        ).all()
        yesterday = conn.execute(
            text("update asset_documents set ingested_at = now() - interval '2 days',"
                 " updated_at = now() - interval '2 days' where namespace = :ns"), {"ns": namespace},
        )  # fmt: skip
        assert yesterday.rowcount == 1
        later = conn.execute(
            text("select count(*) from perceptual_memory where namespace = :ns"), {"ns": namespace}
        ).scalar()
        conn.rollback()
    assert [(r.memory_type, r.subject_id, r.kind) for r in rows] == [("asset", None, "markdown")]
    assert rows[0].key.endswith("/onboarding.md") and rows[0].text == "onboarding.md"  # the asset's title
    assert later == 0, "an asset ingested two days ago is not today's"
