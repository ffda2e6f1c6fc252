"""strataflow export / import between namespaces of the real database: every layer, ids renumbered, lineage
kept, the same context, a second import writing nothing, bad lines quarantined with their line numbers, and
the subject filter. One namespace `src` is built once for the module by the real stages (ingest, extract,
embed, rollup, reflect, expire, the entry API, profile edits, asset ingest)."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.cli import app
from strataflow.config import Settings
from strataflow.ops.transfer.export import export_namespace
from strataflow.ops.transfer.restore import TransferError, import_file

SAID = {
    "alice_w": (
        ["Hi, I am Alice Wong. I am 34 years old and I live in Porto.",
         "I work as a product manager at Lumina.", "I plan to move to Lisbon next spring with my husband.",
         "I prefer short answers in plain text."],
        ["Good news: we moved to Lisbon last week.", "I now work as a senior product manager at Lumina.",
         "I decided to rent an apartment in Alfama instead of buying."],
    ),
    "bruno_k": (
        ["Hello, my name is Bruno Keller and I am a data engineer in Zurich.",
         "We decided to migrate the warehouse to PostgreSQL in Q3.", "I prefer Python over Scala."],
        ["I was promoted to lead data engineer this week.",
         "The PostgreSQL migration is now 60 percent done."],
    ),
}  # fmt: skip
OLD = ["I used to live in Braga years ago.", "Back then I studied economics at the University of Minho."]
# Per table: the rows of one namespace, as the comparison counts them.
COUNTED = {
    "conversation_messages": "select count(*) from conversation_messages where namespace = :ns",
    "expired_keys": "select count(*) from message_keys where namespace = :ns and expired_at is not null",
    "memory_items": "select count(*) from memory_items where namespace = :ns and kind <> 'hot_summary'",
    "entries": "select count(*) from memory_items where namespace = :ns and entry_type is not null",
    "memory_item_versions": (
        "select count(*) from memory_item_versions where namespace = :ns and kind <> 'hot_summary'"
    ),
    "insights": "select count(*) from insights where namespace = :ns",
    "weekly_reports": "select count(*) from weekly_reports where namespace = :ns",
    "profile_documents": "select count(*) from profile_documents where namespace = :ns",
    "disabled": "select count(*) from profile_documents where namespace = :ns and status = 'DISABLED'",
    "manual_profiles": "select count(*) from profile_documents where namespace = :ns and manual <> '{}'",
    "asset_documents": "select count(*) from asset_documents where namespace = :ns",
    "asset_chunks": "select count(*) from asset_chunks where namespace = :ns",
    "embedded_messages": "select count(embedding) from conversation_messages where namespace = :ns",
    "embedded_items": (
        "select count(embedding) from memory_items where namespace = :ns and kind <> 'hot_summary'"
    ),
    "watermarks": "select count(*) from watermarks where namespace = :ns and stage = 'extract'",
}  # fmt: skip


def _write_log(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _week(week: int, now: datetime) -> list[dict[str, Any]]:
    records = []
    for subject, sessions in SAID.items():
        for i, content in enumerate(sessions[week]):
            at = now - timedelta(days=16 - 7 * week, minutes=-2 * i)
            for role, body, late in (("user", content, 0), ("assistant", f"Noted ({week}.{i}).", 1)):
                records.append(
                    {"conversation_id": f"{subject}-w{week}", "subject_id": subject, "role": role,
                     "content": body, "source_message_id": f"{subject}-w{week}-{i}-{role}",
                     "created_at": (at + timedelta(minutes=late)).isoformat()}
                )  # fmt: skip
    return records


@pytest.fixture(scope="module")
def src(settings: Settings, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A namespace with every layer, made by the real stages."""
    from strataflow.memory.api import create_memory, delete_memory
    from strataflow.memory.profiles import patch_profile, set_profile_status
    from strataflow.pipeline.assets import ingest_assets
    from strataflow.pipeline.embed import embed_pending
    from strataflow.pipeline.expire import expire_l1
    from strataflow.pipeline.extract import extract_new
    from strataflow.pipeline.ingest import ingest_logs
    from strataflow.pipeline.reflect import reflect_pending
    from strataflow.pipeline.rollup import rollup_weeks

    ns = f"src_{uuid.uuid4().hex[:8]}"
    folder = tmp_path_factory.mktemp("transfer-src")
    now = datetime.now(UTC).replace(hour=10, minute=0, second=0, microsecond=0)
    old = [
        {"conversation_id": "alice_w-old", "subject_id": "alice_w", "role": "user", "content": content,
         "source_message_id": f"alice_w-old-{i}",
         "created_at": (now - timedelta(days=60, minutes=-i)).isoformat()}
        for i, content in enumerate(OLD)
    ]  # fmt: skip
    ingest_logs(
        settings, [_write_log(folder / "w1.jsonl", old + _week(0, now))], namespace=ns, progress=False
    )
    extract_new(settings, namespace=ns, progress=False)
    embed_pending(settings, progress=False, namespace=ns)
    ingest_logs(settings, [_write_log(folder / "w2.jsonl", _week(1, now))], namespace=ns, progress=False)
    extract_new(settings, namespace=ns, progress=False)  # changes facts of week 1: L2 history
    rollup_weeks(settings, namespace=ns)
    reflect_pending(settings, namespace=ns)
    expire_l1(settings, namespace=ns)  # the 60-day-old week: rolled up, so its L1 rows go, their keys stay
    with engine.begin() as conn:
        create_memory(conn, ns, "alice_w", "feedback", "answer style", "Keep answers under five lines.")
        create_memory(
            conn, ns, "bruno_k", "reference", "runbook", "The runbook is in the wiki.", agent_id="ops"
        )
        gone = create_memory(conn, ns, "bruno_k", "project", "old plan", "Move to Snowflake.")
        delete_memory(conn, ns, gone.item.id)
        patch_profile(conn, ns, "alice_w", "user", {"timezone": "Europe/Lisbon"})
        set_profile_status(conn, ns, "bruno_k", "work", "disabled")
    (folder / "assets").mkdir()
    (folder / "assets" / "handbook.md").write_text(
        "# Handbook\n\nDeploys happen on Tuesdays.\n\n## On call\n\nOn call answers within 15 minutes.\n"
    )
    ingest_assets(settings, [folder / "assets"], ns)
    return ns


def counts(engine: Engine, ns: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {name: conn.execute(text(sql), {"ns": ns}).scalar_one() for name, sql in COUNTED.items()}


def context_entries(settings: Settings, engine: Engine, ns: str, subject: str, query: str) -> Counter[str]:
    """The context as a multiset of its entries with ids and the namespace masked (an import renumbers)."""
    from strataflow.retrieval.context import build_context

    with engine.connect() as conn:
        block = build_context(conn, settings, ns, subject, query, budget_tokens=8000, profile="both").text
    block = re.sub(r' namespace="[^"]*"', "", block)
    block = re.sub(r"\b(id|from)=[0-9][0-9,]*", r"\1=#", block)
    block = re.sub(r"\[msg [0-9][0-9, ]*\]", "[msg #]", block)
    return Counter(re.split(r"\n(?=- \[|<|#)", block))


@pytest.fixture(scope="module")
def exported(src: str, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("transfer-out") / "src.export.jsonl"
    result = CliRunner().invoke(app, ["export", "--namespace", src, "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stdout
    return out


def test_export_file_has_a_header_and_every_layer(src: str, exported: Path, engine: Engine) -> None:
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    header = lines[0]
    assert header["type"] == "header" and header["format"] == "strataflow-export" and header["version"] == 1
    assert header["source"]["namespace"] == src
    found = Counter(line["type"] for line in lines[1:])
    for kind in ("message_key", "message", "item", "insight", "report", "profile", "watermark", "asset"):
        assert found[kind] > 0, f"no {kind} line in the export"
    assert found["message"] == header["counts"]["messages"] == counts(engine, src)["conversation_messages"]
    assert exported.stat().st_mode & 0o077 == 0  # personal data: the owner's only


def test_round_trip_gives_the_same_rows_and_context(
    src: str, exported: Path, settings: Settings, engine: Engine
) -> None:
    dst = f"dst_{uuid.uuid4().hex[:8]}"
    result = CliRunner().invoke(app, ["import", str(exported), "--namespace", dst, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "0 line(s) quarantined" in result.stdout
    before = counts(engine, src)
    assert counts(engine, dst) == before
    assert all(before[name] > 0 for name in COUNTED), before
    for subject, query in (
        ("alice_w", "Where does Alice live and work?"),
        ("bruno_k", "What is Bruno doing?"),
    ):
        assert context_entries(settings, engine, dst, subject, query) == context_entries(
            settings, engine, src, subject, query
        )
    with engine.connect() as conn:  # lineage: the same source messages, under their new ids
        lineage = """
            select mi.subject_id, mi.agent_id, mi.kind, mi.key,
                array_agg(k.source_message_id order by k.source_message_id)
            from memory_items mi join message_keys k on k.message_id = any(mi.source_message_ids)
            where mi.namespace = :ns group by 1, 2, 3, 4 order by 1, 2, 3, 4
        """
        history = """
            select i.subject_id, i.agent_id, i.kind, i.key, v.version, v.action, v.recorded_at, v.valid_from,
                v.valid_to, v.superseded_at
            from memory_item_versions v join memory_items i using (item_id)
            where i.namespace = :ns order by 1, 2, 3, 4, 5, 6, 7
        """
        for sql in (lineage, history):
            assert conn.execute(text(sql), {"ns": dst}).all() == conn.execute(text(sql), {"ns": src}).all()
        ids = conn.execute(text("select min(item_id) from memory_items where namespace = :ns"), {"ns": dst})
        assert (
            ids.scalar_one()
            > conn.execute(
                text("select max(item_id) from memory_items where namespace = :ns"), {"ns": src}
            ).scalar_one()
        )


def test_second_import_adds_nothing_and_leaves_no_work(
    src: str, exported: Path, settings: Settings, engine: Engine
) -> None:
    from strataflow.pipeline.extract import extract_new
    from strataflow.pipeline.rollup import rollup_weeks

    dst = f"dst_{uuid.uuid4().hex[:8]}"
    first = import_file(settings, exported, dst, progress=False)
    assert first.written() > 0 and first.quarantined == 0
    after_first = counts(engine, dst)
    again = import_file(settings, exported, dst, progress=False)
    assert again.written() == 0
    assert all(layer.new == layer.updated == 0 for layer in again.layers.values())
    assert counts(engine, dst) == after_first
    # watermarks and report hashes came along: the stages find nothing to do in the copy
    assert extract_new(settings, namespace=dst, progress=False).scopes == 0
    assert rollup_weeks(settings, namespace=dst).weeks_considered == 0


def test_bad_lines_are_quarantined_with_their_line_numbers(
    src: str, exported: Path, settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    lines = exported.read_text().splitlines()
    lines.insert(3, "{not json")  # line 4
    kinds = [line.split('"type":"', 1)[-1].split('"', 1)[0] for line in lines]
    item_at, message_at = kinds.index("item"), kinds.index("message")
    item = json.loads(lines[item_at])
    item["kind"] = "gossip"
    lines[item_at] = json.dumps(item)
    message = json.loads(lines[message_at])
    message["role"] = "robot"
    lines[message_at] = json.dumps(message)
    bad = tmp_path / "bad.export.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    dst = f"dst_{uuid.uuid4().hex[:8]}"
    result = import_file(settings, bad, dst, progress=False)
    item_at, message_at = item_at + 1, message_at + 1  # line numbers count from 1
    positions = {"4", str(item_at), str(message_at)}
    with engine.connect() as conn:
        rows = conn.execute(
            text("select position, field, error from quarantine where namespace = :ns order by position"),
            {"ns": dst},
        ).all()
    assert {row.position for row in rows} == positions
    by_position = {row.position: row for row in rows}
    assert by_position[str(item_at)].field == "kind"
    assert f"line {item_at}: field 'kind'" in by_position[str(item_at)].error
    assert by_position[str(message_at)].field == "role"
    assert f"line {message_at}: field 'role'" in by_position[str(message_at)].error
    assert all(row.error.startswith("import:bad.export.jsonl line ") for row in rows)
    assert result.quarantined == 3 and result.layer("items").quarantined == 1
    assert result.layer("messages").quarantined == 1
    source, copy = counts(engine, src), counts(engine, dst)
    assert copy["memory_items"] == source["memory_items"] - 1
    assert copy["conversation_messages"] == source["conversation_messages"] - 1
    assert copy["weekly_reports"] == source["weekly_reports"]
    again = import_file(settings, bad, dst, progress=False)  # the bad lines again: quarantined once
    assert again.written() == 0 and again.quarantined == 3
    with engine.connect() as conn:
        total = conn.execute(text("select count(*) from quarantine where namespace = :ns"), {"ns": dst})
        assert total.scalar_one() == 3


def test_subject_filter_exports_one_subject(
    src: str, settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    out = tmp_path / "alice.jsonl.gz"
    exported = export_namespace(settings, src, out, subject_id="alice_w", progress=False)
    assert exported.counts["assets"] == 0 and exported.counts["messages"] > 0
    dst = f"dst_{uuid.uuid4().hex[:8]}"
    result = import_file(settings, out, dst, progress=False)
    assert result.subjects == 1 and result.quarantined == 0
    with engine.connect() as conn:
        subjects = (
            conn.execute(
                text("select distinct subject_id from memory_items where namespace = :ns"), {"ns": dst}
            )
            .scalars()
            .all()
        )
        alice = conn.execute(
            text(
                "select count(*) from conversation_messages where namespace = :ns and subject_id = 'alice_w'"
            ),
            {"ns": src},
        ).scalar_one()
    assert subjects == ["alice_w"]
    assert counts(engine, dst)["conversation_messages"] == alice
    assert counts(engine, dst)["asset_documents"] == 0


def test_a_file_that_is_not_an_export_is_refused(settings: Settings, tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"conversation_id": "c", "subject_id": "s"}\n')
    with pytest.raises(TransferError, match="line 1: field 'format'"):
        import_file(settings, plain, "anywhere", progress=False)
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"type": "header", "format": "strataflow-export", "version": 99}) + "\n")
    with pytest.raises(TransferError, match="line 1: field 'version'"):
        import_file(settings, newer, "anywhere", progress=False)
