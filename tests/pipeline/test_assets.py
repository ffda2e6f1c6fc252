"""Data assets into asset_documents and asset_chunks: formats, skip when unchanged, atomic replacement."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.config import Settings
from strataflow.llm.embeddings import encode_count
from strataflow.pipeline.assets import (
    AssetResult,
    asset_files,
    file_checksum,
    ingest_assets,
    parse_file,
    store_asset,
)
from strataflow.textsearch import TSQUERY_SQL, or_query_parts

GUIDE = """# Team handbook

Our release train leaves every Friday. Deploys after 4 pm need a second reviewer.

## Incident process

When production breaks, page the on-call engineer first. Then open an incident channel.
"""
GUIDE_ZH = """# 服务说明

我们提供香港优才计划的申请咨询，也帮助前端开发工程师准备职业材料。
"""
CHUNKS = text(
    """
    select d.uri, d.kind, d.version, c.chunk_id, c.chunk_index, c.content, c.token_count, c.lang,
           c.embedding is not null as embedded, c.embedding_model, c.fts is not null as indexed
    from asset_documents d join asset_chunks c using (document_id)
    where d.namespace = :ns order by d.uri, c.chunk_index
    """
)


@pytest.fixture
def asset_dir(tmp_path: Path) -> Path:
    (tmp_path / "handbook.md").write_text(GUIDE, encoding="utf-8")
    (tmp_path / "prices.csv").write_text(
        "plan,monthly_usd,seats\nstarter,49,5\nteam,199,25\nenterprise,999,500\n", encoding="utf-8"
    )
    records = [
        {"program": "QMAS", "full_name": "Quality Migrant Admission Scheme"},
        {"program": "TTPS", "full_name": "Top Talent Pass Scheme"},
    ]
    (tmp_path / "programs.json").write_text(json.dumps(records), encoding="utf-8")
    return tmp_path


def chunks_of(engine: Engine, namespace: str) -> list:
    with engine.connect() as conn:
        return conn.execute(CHUNKS, {"ns": namespace}).all()


def test_markdown_csv_and_json_assets_become_embedded_indexed_chunks(
    engine: Engine, settings: Settings, namespace: str, asset_dir: Path
) -> None:
    result = ingest_assets(settings, [asset_dir], namespace)
    assert result.model_dump(exclude={"encoded", "cache_hits"}) == {
        "assets": 3,
        "inserted": 3,
        "replaced": 0,
        "unchanged": 0,
        "quarantined": 0,
        "chunks_written": 4,
        "chunks_deleted": 0,
    }
    rows = chunks_of(engine, namespace)
    assert {(Path(r.uri).name, r.kind) for r in rows} == {
        ("handbook.md", "markdown"),
        ("prices.csv", "csv"),
        ("programs.json", "json"),
    }
    assert all(
        r.embedded and r.indexed and r.embedding_model == "all-MiniLM-L6-v2" and r.version == 1 for r in rows
    )
    by_name = {Path(r.uri).name: [] for r in rows}
    for r in rows:
        by_name[Path(r.uri).name].append(r.content)
    # Markdown: one chunk per section, each carrying its heading path
    assert by_name["handbook.md"] == [
        "Team handbook\nOur release train leaves every Friday. Deploys after 4 pm need a second reviewer.",
        "Team handbook / Incident process\nWhen production breaks, page the on-call engineer first. "
        "Then open an incident channel.",
    ]
    # a table: rows under their header
    assert by_name["prices.csv"] == [
        "prices.csv\nplan | monthly_usd | seats\nstarter | 49 | 5\nteam | 199 | 25\nenterprise | 999 | 500"
    ]
    assert by_name["programs.json"] == [
        "programs.json\nprogram: QMAS; full_name: Quality Migrant Admission Scheme\n"
        "program: TTPS; full_name: Top Talent Pass Scheme"
    ]


def test_an_unchanged_asset_is_skipped_without_encoding(
    engine: Engine, settings: Settings, namespace: str, asset_dir: Path
) -> None:
    ingest_assets(settings, [asset_dir], namespace)
    ids_before = [r.chunk_id for r in chunks_of(engine, namespace)]
    before = encode_count()
    again = ingest_assets(settings, [asset_dir], namespace)
    assert again == AssetResult(assets=3, unchanged=3)
    assert encode_count() - before == 0
    assert [r.chunk_id for r in chunks_of(engine, namespace)] == ids_before


def test_a_changed_asset_replaces_its_chunks_and_bumps_its_version(
    engine: Engine, settings: Settings, namespace: str, asset_dir: Path
) -> None:
    ingest_assets(settings, [asset_dir], namespace)
    old = {r.chunk_id for r in chunks_of(engine, namespace) if r.uri.endswith("handbook.md")}
    (asset_dir / "handbook.md").write_text(GUIDE.replace("every Friday", "every Tuesday"), encoding="utf-8")
    result = ingest_assets(settings, [asset_dir], namespace)
    assert (result.replaced, result.unchanged, result.chunks_deleted, result.chunks_written) == (1, 2, 2, 2)
    rows = [r for r in chunks_of(engine, namespace) if r.uri.endswith("handbook.md")]
    assert not old & {r.chunk_id for r in rows}
    assert [r.version for r in rows] == [2, 2]
    assert "every Tuesday" in rows[0].content
    with engine.connect() as conn:
        report = conn.execute(
            text("select kind, counts from deletion_reports where namespace = :ns"), {"ns": namespace}
        ).one()
    assert report.kind == "asset_replace"
    assert (report.counts["chunks_deleted"], report.counts["chunks_inserted"], report.counts["version"]) == (
        2,
        2,
        2,
    )


def test_a_replacement_is_atomic_readers_see_old_chunks_until_commit_and_nothing_changes_on_rollback(
    engine: Engine, settings: Settings, namespace: str, asset_dir: Path
) -> None:
    ingest_assets(settings, [asset_dir], namespace)
    path = asset_dir / "handbook.md"
    before = chunks_of(engine, namespace)
    path.write_text(GUIDE + "\n## New section\n\nBrand new text.\n", encoding="utf-8")
    changed = parse_file(path, file_checksum(path))
    with engine.connect() as writer:
        tx = writer.begin()
        action, counts = store_asset(writer, settings, namespace, changed, None)
        assert (action, counts.chunks_written) == ("replaced", 3)
        assert chunks_of(engine, namespace) == before  # another connection still sees the old version
        tx.rollback()  # e.g. the process died mid-replacement
    assert chunks_of(engine, namespace) == before


def test_chinese_asset_text_is_found_by_full_text_search(
    engine: Engine, settings: Settings, namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "services.md").write_text(GUIDE_ZH, encoding="utf-8")
    ingest_assets(settings, [tmp_path], namespace)
    en, zh = or_query_parts("前端开发")
    query = text(
        f"select content, lang from asset_chunks where namespace = :ns "
        f"and fts @@ {TSQUERY_SQL.format(en='cast(:en as text)', zh='cast(:zh as text)')}"
    )
    with engine.connect() as conn:
        hits = conn.execute(query, {"ns": namespace, "en": en or "", "zh": zh}).all()
    assert [(h.lang, "前端开发" in h.content) for h in hits] == [("zh", True)]


def test_bad_asset_files_go_to_quarantine_and_the_rest_continue(
    engine: Engine, settings: Settings, namespace: str, asset_dir: Path
) -> None:
    (asset_dir / "broken.json").write_text('{"program": "QMAS",', encoding="utf-8")
    (asset_dir / "latin1.txt").write_bytes("caf\xe9 menu".encode("latin-1"))
    (asset_dir / "events.jsonl").write_text(
        '{"event": "launch"}\nnot json\n{"event": "retro"}\n', encoding="utf-8"
    )
    result = ingest_assets(settings, [asset_dir], namespace)
    assert (result.assets, result.inserted, result.quarantined) == (6, 4, 3)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "select source, position, field, reason from quarantine where namespace = :ns order by source"
            ),
            {"ns": namespace},
        ).all()
    assert sorted((Path(r.source).name, r.position, r.field, r.reason) for r in rows) == [
        ("broken.json", "line 1", "content", "bad_json"),
        ("events.jsonl", "line 2", "content", "bad_json"),
        ("latin1.txt", "file", "content", "bad_encoding"),
    ]
    events = [r.content for r in chunks_of(engine, namespace) if r.uri.endswith("events.jsonl")]
    assert events == ["events.jsonl\nevent: launch\nevent: retro"]


def test_a_sql_table_becomes_an_asset(
    engine: Engine, settings: Settings, namespace: str, tmp_path: Path
) -> None:
    db = tmp_path / "crm.db"
    with sqlite3.connect(db) as lite:
        lite.execute("create table accounts (name text, tier text)")
        lite.executemany("insert into accounts values (?, ?)", [("Acme", "gold"), ("Globex", "silver")])
    result = ingest_assets(settings, [], namespace, url=f"sqlite:///{db}", table="accounts")
    assert (result.inserted, result.chunks_written) == (1, 1)
    assert [r.content for r in chunks_of(engine, namespace)] == [
        "accounts\nname | tier\nAcme | gold\nGlobex | silver"
    ]
    assert ingest_assets(settings, [], namespace, url=f"sqlite:///{db}", table="accounts").unchanged == 1


def test_asset_files_takes_known_extensions_from_directories(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("a.md", "sub/b.csv", "c.png", "d.jsonl"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    assert [p.relative_to(tmp_path).as_posix() for p in asset_files([tmp_path])] == [
        "a.md",
        "d.jsonl",
        "sub/b.csv",
    ]


def test_cli_ingest_assets_prints_counts_and_embed_has_help(
    namespace: str, asset_dir: Path, engine: Engine
) -> None:
    from strataflow.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["ingest", "assets", str(asset_dir), "--namespace", namespace])
    assert out.exit_code == 0, out.output
    assert "assets 3: inserted 3, replaced 0, unchanged 0, quarantined 0" in out.output
    out = runner.invoke(app, ["embed", "--namespace", namespace, "--no-progress"])
    assert out.exit_code == 0, out.output
    assert "embedded 0 row(s)" in out.output
    for command in (["embed", "--help"], ["ingest", "assets", "--help"]):
        assert "Example:" in runner.invoke(app, command).output
