"""Expired text leaves no copy in the embedding cache: expiry prunes the cached vectors of the messages it
removes, unless a remaining row (another live message, an L2 item) has the same text."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.memory.store import upsert_item
from strataflow.pipeline.expire import expire_l1
from strataflow.pipeline.ingest import ingest_logs

EXPIRED_ONLY = "My passport number is E1234567."
SHARED_WITH_LIVE = "I like green tea."
SHARED_WITH_ITEM = "I live in Lisbon."
CACHED = text(
    "select content_hash from embedding_cache where model = 'expiry-test' and content_hash = any(:h)"
)


def _ingest(settings: Settings, namespace: str, path: Path, at: datetime, texts: list[str]) -> None:
    records = [
        {"conversation_id": "c1", "subject_id": "u1", "source_message_id": f"{path.stem}{i}", "role": "user",
         "content": content, "created_at": (at + timedelta(minutes=i)).isoformat()}
        for i, content in enumerate(texts)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    ingest_logs(settings, [path], namespace=namespace, progress=False)


def test_expiry_prunes_the_cached_vectors_of_expired_text_only(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    old = datetime(1980, 1, 7, 9, tzinfo=UTC) + timedelta(weeks=random.randrange(0, 1000))
    _ingest(
        settings, namespace, tmp_path / "old.jsonl", old, [EXPIRED_ONLY, SHARED_WITH_LIVE, SHARED_WITH_ITEM]
    )
    _ingest(settings, namespace, tmp_path / "live.jsonl", datetime.now(UTC), [SHARED_WITH_LIVE])
    hashes = [content_hash(t) for t in (EXPIRED_ONLY, SHARED_WITH_LIVE, SHARED_WITH_ITEM)]
    with engine.begin() as conn:
        upsert_item(
            conn, namespace=namespace, subject_id="u1", kind="fact", key="city", value="Lisbon",
            statement=SHARED_WITH_ITEM, event_at=old,
        )  # fmt: skip
        conn.execute(
            text("insert into embedding_cache (model, content_hash, embedding) "
                 "select 'expiry-test', h, cast(:v as vector) from unnest(cast(:h as text[])) as h"),
            {"h": hashes, "v": json.dumps([0.1] * 384)},
        )  # fmt: skip

    result = expire_l1(settings, force=True, reason="expiry cache test", namespace=namespace)

    with engine.connect() as conn:
        left = set(conn.execute(CACHED, {"h": hashes}).scalars())
        report = conn.execute(
            text("select counts from deletion_reports where report_id = :id"), {"id": result.report_id}
        ).scalar_one()
    assert result.removed_rows == 3
    assert left == {content_hash(SHARED_WITH_LIVE), content_hash(SHARED_WITH_ITEM)}
    pruned = report["total"]["embedding_cache_pruned"]
    assert result.embedding_cache_pruned == pruned >= 1  # every model's vector of that text
