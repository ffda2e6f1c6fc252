"""Chunking of data assets: token estimate, heading paths, overlap, table headers, JSON shapes."""

from __future__ import annotations

import re

import pytest

from strataflow.ingest.chunking import chunk_json, chunk_rows, chunk_text, estimate_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("deploy the API", 3),  # one per word
        ("v2.1 ships!", 5),  # letters/digits runs and each punctuation mark
        ("前端开发", 4),  # one per CJK character
        ("QMAS申请 ok", 4),  # a Latin run stops at Chinese
        ("", 0),
    ],
)
def test_estimate_tokens_counts_basic_tokenizer_pieces(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


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
    assert [c.token_count for c in chunks] == [100, 100, 90]
    assert chunks[1].content.startswith("w80 ") and chunks[2].content.startswith("w160 ")


def test_table_chunks_repeat_the_header_and_record_their_rows() -> None:
    rows = [(i, [f"name{i}", i * 10]) for i in range(1, 41)]
    chunks = chunk_rows("people.csv", ["name", "score"], rows, max_tokens=50)
    assert all(c.content.startswith("people.csv\nname | score\n") and c.token_count <= 50 for c in chunks)
    assert chunks[0].metadata == {"rows": [1, 14]}
    assert chunks[-1].metadata["rows"][1] == 40
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
