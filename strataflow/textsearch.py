"""Language detection and full-text search text, shared by every layer.

PostgreSQL's parsers do not segment Chinese, so Chinese runs are segmented with jieba here and indexed
with the 'simple' configuration; everything else goes through 'english' (stemming, stopwords). Queries
are segmented the same way and OR-ed together (plainto_tsquery ANDs every word, which loses most recall
on natural-language questions); ts_rank then orders the matches.

SQL side, for a row with python-computed (english_text, chinese_tokens):
    to_tsvector('english', :fts_en) || to_tsvector('simple', :fts_zh)     -- see TSVECTOR_SQL
and for a query:
    to_tsquery('english', :q_en) || to_tsquery('simple', :q_zh)          -- see TSQUERY_SQL
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

# The Chinese (CJK ideograph) characters, as the body of a regular-expression character class: Extension A,
# the unified block, the compatibility ideographs. The one definition: every rule that looks for Chinese
# text (language detection, segmentation, intent, the offline rules) builds on it.
CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_RUN = re.compile(f"[{CJK}]+")
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
TSVECTOR_SQL = "(to_tsvector('english', {en}) || to_tsvector('simple', {zh}))"
TSQUERY_SQL = "(to_tsquery('english', {en}) || to_tsquery('simple', {zh}))"


def detect_lang(text: str) -> str:
    """'zh' when Chinese characters make up a fair share of the letters, else 'en'."""
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "zh" if cjk and cjk * 2 >= latin * 0.5 else "en"


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def chinese_tokens(text: str, for_index: bool = True) -> list[str]:
    """jieba tokens of the Chinese runs in text (search mode when indexing: whole words and their parts)."""
    runs = CJK_RUN.findall(text)
    if not runs:
        return []
    jieba = _jieba()
    tokens: list[str] = []
    for run in runs:
        pieces = jieba.cut_for_search(run) if for_index else jieba.cut(run)
        tokens.extend(piece for piece in pieces if piece.strip())
    return tokens


def fts_parts(text: str) -> tuple[str, str]:
    """(english_text, chinese_tokens) to bind into TSVECTOR_SQL for one document."""
    english = CJK_RUN.sub(" ", text)
    return english, " ".join(chinese_tokens(text, for_index=True))


def or_query_parts(query: str) -> tuple[str, str]:
    """(english_or_query, chinese_or_query) to bind into TSQUERY_SQL; empty parts match nothing.

    Words are reduced to [a-z0-9] lexemes so user text can never inject tsquery operators.
    """
    english_words = [w.replace("'", "") for w in WORD.findall(CJK_RUN.sub(" ", query).lower())]
    chinese = [t for t in chinese_tokens(query, for_index=False) if len(t) > 1 or CJK_RUN.fullmatch(t)]
    return " | ".join(dict.fromkeys(english_words)), " | ".join(dict.fromkeys(chinese))
