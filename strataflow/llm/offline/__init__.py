"""The offline provider `offline/rules`: a deterministic, honest rules engine (regex + jieba) for Chinese and
English, registered with litellm's custom provider hook so the default settings, the demo and the tests make
real litellm calls with no key and no network.

Modules: numbers (numerals, units, ranges), aliases (the documented abbreviation dictionary), text (clauses,
guards, key slugs), rules_zh / rules_en / rules_team (one function per field; patterns_en holds the English
regex fragments and word tables), extract (the extract stage), summarize (rollup, reflect, hot_summary),
provider (the litellm CustomLLM and its registration).
Importing this package is cheap: litellm and jieba load on first use.
"""

from __future__ import annotations

from strataflow.llm.offline.provider import answer, register_offline_provider

__all__ = ["answer", "register_offline_provider"]
