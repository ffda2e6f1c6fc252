"""Embedding bench: raw model.encode sentences/s vs the embedding stage over the same texts from the database.

    python -m bench.embed [--texts 3000] [--rounds 10] [--zh-share 0.0]

Runs on a fresh STRATAFLOW_HOME: migrates, inserts its own L1 rows (distinct synthetic chat texts) in its own
namespaces (one per round). Each round times `embedder.encode` over that round's texts (the model loaded
and warmed up) and `embed_pending` over the same rows (read them, look up the cache, encode, write the
cache, update the rows and their HNSW index); odd rounds run the two in the other order. Alternating keeps
both measurements under the same load on a shared machine. Finally the stage runs again and counts what
the rerun encoded. `--zh-share` makes that share of the texts Chinese: each text is embedded by its own
model (strataflow.llm.embeddings.model_for_text), and the direct encode does the same, one call per model.
Since one multilingual space (sql/401) the stage also gives every text whose own model is not the
multilingual one its vector under that model, and the direct encode does the same: `encode_per_s` counts
texts through both encodes, `own_encode_per_s` through their own model's alone (what the stage encoded
before, timed in the same rounds), `multi_texts` the texts with a second vector.
One JSON line last on stdout: encode_per_s, own_encode_per_s, stage_per_s, ratio = stage / encode (target
>= 0.9), rerun_encodes (target 0).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, text

from strataflow.hashes import content_hash

SUBJECTS = [
    "the deploy",
    "our release",
    "the migration",
    "the pricing page",
    "QA",
    "the API",
    "the dashboard",
    "my visa application",
    "the onboarding flow",
    "search ranking",
    "the budget",
    "the data pipeline",
]
VERBS = [
    "is blocked by",
    "depends on",
    "should wait for",
    "was delayed because of",
    "finally fixed",
    "needs another review of",
    "shipped together with",
    "broke after",
    "looks good next to",
]
OBJECTS = [
    "the login bug",
    "a flaky test",
    "the new schema",
    "Friday's outage",
    "the vendor contract",
    "the staging database",
    "customer feedback from Acme",
    "the security audit",
    "the old cron job",
]
TAILS = [
    "",
    "Can you take a look?",
    "I think we should decide by Monday.",
    "Let's discuss it in standup.",
    "Maria prefers the second option because it is cheaper and easier to roll back.",
    "Status: about 70% done, the remaining work is tests and documentation for the reviewers.",
    "Honestly I'm not sure, but the numbers from last week suggest we are on track for the launch.",
]

ZH_SUBJECTS = [
    "上线",
    "这次发版",
    "数据迁移",
    "定价页面",
    "测试",
    "接口",
    "看板",
    "我的签证申请",
    "新手引导",
    "搜索排序",
]
ZH_VERBS = [
    "被卡在",
    "要等",
    "因为",
    "终于修好了",
    "还需要再看一下",
    "和",
    "之后出了问题：",
    "看起来没问题，除了",
]
ZH_OBJECTS = [
    "登录的bug",
    "一个不稳定的测试",
    "新的表结构",
    "周五的故障",
    "供应商合同",
    "预发数据库",
    "安全审计",
]
ZH_TAILS = [
    "",
    "你能帮忙看一下吗？",
    "我觉得周一之前要定下来。",
    "站会上再讨论吧。",
    "小李更倾向第二个方案，因为便宜而且容易回滚。",
    "进度大概百分之七十，剩下的是测试和给评审写文档。",
]

INSERT_L1_ROWS = text(
    """
    with rows as (
        select * from unnest(cast(:source_message_ids as text[]), cast(:contents as text[]),
                             cast(:hashes as text[]), cast(:event_ats as timestamptz[]))
            as r(source_message_id, content, content_hash, event_at)
    ), keys as (
        insert into message_keys (namespace, source, source_message_id, subject_id, conversation_id, event_at,
                                  content_hash)
        select :namespace, :source, source_message_id, :subject_id, :conversation_id, event_at, content_hash
        from rows
        returning message_id, source_message_id
    )
    insert into conversation_messages (message_id, namespace, subject_id, conversation_id, source,
                                       source_message_id, role, content, content_hash, lang, event_at,
                                       expires_at)
    select k.message_id, :namespace, :subject_id, :conversation_id, :source, r.source_message_id, 'user',
           r.content, r.content_hash, 'en', r.event_at, r.event_at + interval '30 days'
    from rows r join keys k using (source_message_id)
    """
)
T = TypeVar("T")
ENSURE_PARTITIONS = text("select ensure_message_partitions(:from_at, :to_at)")


def bench_texts(n: int, seed: int = 7, zh_share: float = 0.0) -> list[str]:
    """n distinct chat-like sentences of varied length (5 to about 40 words), deterministic for a seed; about
    zh_share of them in Chinese."""
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        if zh_share and rng.random() < zh_share:
            parts = [f"#{i}", rng.choice(ZH_SUBJECTS), rng.choice(ZH_VERBS), rng.choice(ZH_OBJECTS) + "。"]
            parts.extend(rng.sample(ZH_TAILS, k=rng.randint(0, 2)))
            texts.append("".join(parts))
            continue
        parts = [f"#{i}", rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS) + "."]
        parts.extend(rng.sample(TAILS, k=rng.randint(0, 2)))
        texts.append(" ".join(p for p in parts if p))
    return texts


def insert_l1_rows(
    conn: Connection,
    namespace: str,
    texts: Sequence[str],
    start: datetime | None = None,
    subject_id: str = "s1",
) -> None:
    """Insert one user message per text straight into L1 (one a minute from start), without embeddings."""
    start = start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    event_ats = [start + timedelta(minutes=i) for i in range(len(texts))]
    conn.execute(ENSURE_PARTITIONS, {"from_at": event_ats[0], "to_at": event_ats[-1]})
    conn.execute(
        INSERT_L1_ROWS,
        {
            "namespace": namespace,
            "source": "bench",
            "subject_id": subject_id,
            "conversation_id": f"{subject_id}-c1",
            "source_message_ids": [f"{namespace}-{i}" for i in range(len(texts))],
            "contents": list(texts),
            "hashes": [content_hash(t) for t in texts],
            "event_ats": event_ats,
        },
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=3000, help="Texts to embed (default 3000).")
    parser.add_argument("--rounds", type=int, default=10, help="Alternate encode and stage this many times.")
    parser.add_argument("--zh-share", type=float, default=0.0, help="Share of Chinese texts (default 0).")
    args = parser.parse_args(argv)

    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for
    from strataflow.llm.embeddings import encode_count, get_embedder, model_for_text
    from strataflow.memory.item_embedding import multi_model
    from strataflow.pipeline.embed import embed_pending

    settings = load_settings()
    engine = engine_for(settings)
    migrations.upgrade(engine)
    run = uuid.uuid4().hex[:8]
    texts = bench_texts(args.texts, seed=args.texts, zh_share=args.zh_share)
    rounds = max(1, min(args.rounds, len(texts)))
    parts = [texts[i::rounds] for i in range(rounds)]
    namespaces = [f"bench_embed_{run}_{i}" for i in range(rounds)]
    with engine.begin() as conn:
        for namespace, part in zip(namespaces, parts, strict=True):
            insert_l1_rows(conn, namespace, part)
    log(f"inserted {len(texts)} rows into {rounds} namespaces bench_embed_{run}_*; loading the model")

    embedder = get_embedder(settings)
    multi = multi_model(settings)
    own_s = [0.0]

    def encode(part: Sequence[str]) -> int:
        """The direct encode: each text by its own model, one call per model (timed into own_s), then the
        texts of another model by the multilingual one; the texts encoded."""
        by_model: dict[str, list[str]] = {}
        for t in part:
            by_model.setdefault(model_for_text(settings, t), []).append(t)
        started = time.perf_counter()
        done = sum(len(get_embedder(settings, model).encode(group)) for model, group in by_model.items())
        own_s[0] += time.perf_counter() - started
        others = [t for model, group in by_model.items() if multi and model != multi for t in group]
        return done + (len(get_embedder(settings, multi).encode(others)) if multi and others else 0)

    encode(bench_texts(64, seed=-1, zh_share=args.zh_share))  # load and warm up
    own_s[0] = 0.0
    multi_texts = sum(bool(multi) and model_for_text(settings, t) != multi for t in texts)
    # Alternate the two measurements so both see the same load on a shared machine.
    encode_s = stage_s = 0.0
    stage_rows = stage_encoded = rerun_encodes = 0
    for i, (namespace, part) in enumerate(zip(namespaces, parts, strict=True)):
        before = encode_count()
        if i % 2:  # odd rounds run the stage first, so a load trend does not favour either side
            result, round_stage_s = _timed(
                lambda ns=namespace: embed_pending(settings, progress=False, namespace=ns)
            )
            round_encode_s = _timed(lambda p=part: encode(p))[1]
        else:
            round_encode_s = _timed(lambda p=part: encode(p))[1]
            result, round_stage_s = _timed(
                lambda ns=namespace: embed_pending(settings, progress=False, namespace=ns)
            )
        encode_s, stage_s = encode_s + round_encode_s, stage_s + round_stage_s
        stage_rows += result.conversation_messages
        stage_encoded += (
            encode_count()
            - before
            - len(part)
            - sum(bool(multi) and model_for_text(settings, t) != multi for t in part)
        )
        log(
            f"round {i + 1}/{rounds}: encode {len(part) / round_encode_s:.0f}/s, "
            f"stage {result.conversation_messages / round_stage_s:.0f}/s"
        )
    for namespace in namespaces:
        before = encode_count()
        embed_pending(settings, progress=False, namespace=namespace)
        rerun_encodes += encode_count() - before
    backfill_rows, backfill_s = _backfill(engine, settings, namespaces) if multi else (0, 0.0)
    encode_per_s = len(texts) / encode_s
    stage_per_s = stage_rows / stage_s
    print(
        json.dumps(
            {
                "texts": len(texts),
                "model": embedder.model_name,
                "zh_texts": sum(model_for_text(settings, t) != embedder.model_name for t in texts),
                "encode_per_s": round(encode_per_s, 1),
                "own_encode_per_s": round(len(texts) / own_s[0], 1),
                "multi_texts": multi_texts,
                "stage_per_s": round(stage_per_s, 1),
                "ratio": round(stage_per_s / encode_per_s, 3),
                "stage_encoded": stage_encoded,
                "rerun_encodes": rerun_encodes,
                "backfill_rows": backfill_rows,
                "backfill_per_s": round(backfill_rows / backfill_s, 1) if backfill_s else None,
                "hours_for_1m_backfill": round(1e6 * backfill_s / backfill_rows / 3600, 1)
                if backfill_rows
                else None,
            }
        )
    )


CLEAR_MULTI = text(
    "update conversation_messages set embedding_multi = null, embedding_multi_model = null "
    "where namespace = any(:namespaces) and embedding_multi is not null"
)


def _backfill(engine: Any, settings: Any, namespaces: Sequence[str]) -> tuple[int, float]:
    """The multilingual vectors of the bench's rows cleared (as rows embedded before sql/401, or after a
    change of the multilingual model), then filled again by `strataflow embed`'s backfill pass
    (strataflow.pipeline.embed_multi, PAGE_ROWS rows a page): rows and seconds."""
    from strataflow.pipeline.embed import embed_pending

    with engine.begin() as conn:
        conn.execute(CLEAR_MULTI, {"namespaces": list(namespaces)})
    rows, seconds = 0, 0.0
    for namespace in namespaces:
        started = time.perf_counter()
        result = embed_pending(settings, progress=False, namespace=namespace)
        rows, seconds = rows + result.conversation_messages_multi, seconds + time.perf_counter() - started
    log(f"backfill: {rows} multilingual vectors in {seconds:.1f} s")
    return rows, seconds


def _timed(work: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    value = work()
    return value, time.perf_counter() - started


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
