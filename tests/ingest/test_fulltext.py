"""The full-text vectors built in Python (strataflow/ingest/fulltext.py) equal the database's, or are None.

The database's vector is what staging computes for a row without one (staging.FTS, textsearch.TSVECTOR_SQL):
`to_tsvector('english', fts_en) || to_tsvector('simple', fts_zh)`, with (fts_en, fts_zh) = fts_parts(text).
"""

from __future__ import annotations

import json
import random
from datetime import date
from pathlib import Path

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.demo.sample import write_sample
from strataflow.ingest.enrich import ChunkOptions, prepare_chunk
from strataflow.ingest.fulltext import Lexicon, UnknownWords
from strataflow.ingest.readers import detect_format, expand_paths, read_chunks
from strataflow.pipeline.ingest import ingest_logs
from strataflow.textsearch import fts_parts

# Each text's database vector and the Python literal cast by the database, both as text (null: no literal).
COMPARE = text(
    """
    select t.n,
           (to_tsvector('english', t.en) || to_tsvector('simple', t.zh))::text as database,
           cast(t.literal as tsvector)::text as python
    from unnest(cast(:en as text[]), cast(:zh as text[]), cast(:literals as text[]))
        with ordinality as t(en, zh, literal, n)
    order by t.n
    """
)
# L1 rows of a namespace with the vector the database computes from their content's parts.
STORED = text(
    """
    select m.source_message_id, m.fts::text as stored,
           (to_tsvector('english', p.en) || to_tsvector('simple', p.zh))::text as database
    from conversation_messages m
    join unnest(cast(:ids as text[]), cast(:en as text[]), cast(:zh as text[])) as p(id, en, zh)
      on p.id = m.source_message_id
    where m.namespace = :ns
    order by m.source_message_id
    """
)
WORDS = [
    "deploy", "deploys", "deployed", "running", "databases", "Friday", "PostgreSQL", "review", "happily",
    "caring", "generously", "I", "we're", "don't", "it's", "Bob's", "a1b2", "abc123", "x", "QA", "CI",
    "snake_case", "ALLCAPS", "organization", "organizational", "caf", "zz", "q",
]  # fmt: skip
STOPWORDS = ["the", "a", "and", "of", "to", "is", "was", "it", "we", "you", "them", "about", "again", "s"]
NUMBERS = ["0", "7", "42", "007", "2026", "100%", "$5", "1,000", "12:30", "3rd"]
PUNCTUATION = [",", "!", "?", "(", ")", ":", ";", '"', "'", "[", "]", "*", "#", "=", "|", "`"]
DOTS = [".", "...", "..", "1e5", "2e", "10E3x"]  # plain or not depending on what follows
CURLY = ["“", "”", "‘", "’", "—", "–", "…", "，", "。", "：", "、", "\u00a0", "·"]
ODD = [
    "well-known", "-5", "+1", "a - b", "co-op", "e-mail", "https://example.com/a/b?x=1", "http://x.io",
    "www.example.org", "bob@example.com", "a.b@c.de", "3.14", ".5", "5.", "v1.2.3", "1.2.3", "file.txt",
    "end.start", "..path", "/usr/bin", "~home", "&amp;", "<b>bold</b>", "#tag", "@alice", "café", "naïve",
    "Straße", "🙂", "x\ty", "line\nbreak", "back\\slash", "a_b", "_lead", "trail_", "tab\t", "ÅNGSTRÖM",
    "١٢٣", "ｆｕｌｌ", "x" * 300, "y" * 2100,
]  # fmt: skip
CHINESE = ["我在杭州做前端开发", "工作五年了", "想了解一下高才通", "数据库", "今天", "的", "了", "我们"]


def generated_texts(count: int, seed: int = 17) -> list[str]:
    """Texts mixing plain words with every kind of token the Python side must match or refuse."""
    rng = random.Random(seed)
    plain = WORDS + STOPWORDS + NUMBERS + PUNCTUATION
    everything = plain + DOTS + CURLY + ODD + CHINESE
    texts = []
    for n in range(count):  # every third text is plain: words, numbers and punctuation between blanks
        pool = plain if n % 3 == 0 else plain + DOTS + CURLY if n % 3 == 1 else everything
        if n % 6 == 5:  # plain English and Chinese
            pool = plain + CHINESE * 3
        plain_text = n % 3 == 0 or n % 6 == 5
        separators = [" ", "\n", " , ", ". "] if plain_text else [" ", " ", " ", "", "\n", ", ", "."]
        size = rng.randint(1, 40)
        texts.append("".join(rng.choice(pool) + rng.choice(separators) for _ in range(size)).strip() or "x")
    texts += [
        "deploy " * 300,  # one lexeme, more positions than a vector keeps
        "the " * 300 + "deploy",  # stopwords take positions
        " ".join(["deploy"] * 255),
        " ".join(["deploy"] * 256),
        "Deploy deployed DEPLOYING " * 90,
        "我们 " * 300 + "deploy",
        "deploy the 我们数据库 it",  # the Chinese half follows the English half's last lexeme
        "我们数据库 and of the",
        "x " * 17_000,  # positions past 16383
        "ab " * 5000 + "我在杭州做前端开发 " * 10,
        "Caroline said “it’s fine” — then left…",
        "我在杭州做前端开发，工作五年了。I love PostgreSQL and the deploy went well!",
        "Meet at 12:30, room 4B; bring 3 laptops (and coffee).",
        "See https://example.com or mail bob@example.com about v1.2.3 (3.14% faster).",
        "",
        "   ",
    ]
    return texts


def python_vectors(lexicon: Lexicon, texts: list[str]) -> tuple[list[str], list[str], list[str | None]]:
    """(fts_en, fts_zh, literal or None) of each text, looking up new words as the pipeline does."""
    english, chinese, literals = [], [], []
    for body in texts:
        en, zh = fts_parts(body)
        try:
            literal = lexicon.vector(en, zh)
        except UnknownWords:
            lexicon.learn()
            literal = lexicon.vector(en, zh)  # raises again if learn() missed a word
        english.append(en)
        chinese.append(zh)
        literals.append(literal)
    return english, chinese, literals


def assert_same_vectors(engine: Engine, texts: list[str]) -> list[str | None]:
    lexicon = Lexicon(engine)
    assert lexicon.enabled
    english, chinese, literals = python_vectors(lexicon, texts)
    with engine.connect() as conn:
        rows = conn.execute(COMPARE, {"en": english, "zh": chinese, "literals": literals}).all()
    assert len(rows) == len(texts)
    for body, literal, row in zip(texts, literals, rows, strict=True):
        if literal is not None:
            assert row.python == row.database, f"text {body[:200]!r}: Python {literal[:200]!r}"
    return literals


def test_generated_texts_get_the_database_vector_or_none(engine: Engine) -> None:
    texts = generated_texts(600)
    literals = assert_same_vectors(engine, texts)
    built = [literal is not None for literal in literals]
    # Plain texts (every third) are built in Python; texts with URLs, e-mails, decimals, hyphens and the
    # like fall back to the database.
    assert all(built[0:600:3]) and all(built[5:600:6])
    assert 300 < sum(built) < len(texts)
    refused = [
        "well-known words",
        "mail bob@example.com",
        "see https://example.com",
        "pi is 3.14",
        "version v1.2.3",
        "open file.txt",
        "1e5 rows",
        "x" * 2100,
        "deploy " * 300,
        "café",
    ]
    assert python_vectors(Lexicon(engine), refused)[2] == [None] * len(refused)


def test_sample_and_locomo_texts_get_the_database_vector(
    engine: Engine, locomo_path: Path, tmp_path: Path
) -> None:
    write_sample(tmp_path, subjects=6, weeks=6, seed=5, end_date=date(2026, 11, 20))
    texts = [json.loads(line)["content"] for path in sorted(tmp_path.glob("*.jsonl")) for line in path.open()]
    for conversation in json.loads(locomo_path.read_text()):  # the LoCoMo-format fixture's invented turns
        sessions = conversation["conversation"]
        for key, turns in sessions.items():
            if key.startswith("session_") and isinstance(turns, list):
                texts += [turn["text"] for turn in turns]
    assert len(texts) > 1000
    literals = assert_same_vectors(engine, texts)
    assert sum(literal is not None for literal in literals) > 0.6 * len(texts)


def test_an_ingest_stores_the_database_vector_for_every_row(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    write_sample(tmp_path, subjects=2, weeks=3, seed=5, end_date=date(2026, 11, 20))
    # The pipeline's preparation builds most vectors in Python (so the comparison below covers them).
    lexicon = Lexicon(engine)
    built = staged = 0
    for path in expand_paths([str(tmp_path)]):
        options = ChunkOptions(
            path.name, settings.tz, settings.max_content_chars, settings.retention_days, namespace=namespace
        )
        for items in read_chunks(path, detect_format(path), 500, settings.tz):
            chunk = prepare_chunk(items, options, lexicon=lexicon)
            assert chunk.vectors is not None
            built += sum(vector is not None for vector in chunk.vectors)
            staged += chunk.staged
    assert built > 0.6 * staged

    ingest_logs(settings, [tmp_path], namespace=namespace, progress=False)

    contents: dict[str, str] = {}
    for path in sorted(tmp_path.glob("*.jsonl")):
        for line in path.open():
            row = json.loads(line)
            contents[row["source_message_id"]] = row["content"]  # the last record wins
    ids = sorted(contents)
    parts = [fts_parts(contents[i]) for i in ids]
    with engine.connect() as conn:
        rows = conn.execute(
            STORED, {"ns": namespace, "ids": ids, "en": [p[0] for p in parts], "zh": [p[1] for p in parts]}
        ).all()
    assert len(rows) == staged
    for row in rows:
        assert row.stored == row.database, row.source_message_id
