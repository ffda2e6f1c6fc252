"""One definition of Chinese characters (strataflow.textsearch.CJK): language detection, segmentation, intent
and the offline rules agree on every character."""

from __future__ import annotations

import pytest

from models.common import Intent
from strataflow.ingest.intent import classify_intent
from strataflow.llm.offline.text import is_chinese
from strataflow.textsearch import CJK_RUN, chinese_tokens, detect_lang


@pytest.mark.parametrize(
    ("char", "chinese"),
    [
        ("\u3400", True),  # Extension A
        ("中", True),
        ("\u9fff", True),
        ("\uf900", True),  # a compatibility ideograph (the offline rules and intent once left these out)
        ("\u4dc0", False),  # a Yijing hexagram symbol (intent once counted it as a word)
        ("。", False),
        ("a", False),
    ],
)
def test_every_rule_reads_the_same_characters_as_chinese(char: str, chinese: bool) -> None:
    assert bool(CJK_RUN.fullmatch(char)) is chinese
    assert is_chinese(char) is chinese
    assert (detect_lang(char * 3) == "zh") is chinese
    assert bool(chinese_tokens(char)) is chinese
    assert (classify_intent(char) is Intent.statement) is chinese
