"""Token counting, in one place.

- `count_tokens(text)`: the default tokenizer, tiktoken's cl100k_base, counted exactly as
  `litellm.token_counter(text=...)` counts it when no model is named (in slices of 1,024 characters, its
  TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS default; tests/llm/test_tokens.py holds the two equal). The context
  budget, extraction batches, asset chunks and the offline provider's usage are counted with it. It needs
  tiktoken only, never the litellm import (5-12 s): the encoding file is the copy litellm ships in
  litellm/litellm_core_utils/tokenizers, found on disk (importlib.util.find_spec, which imports nothing)
  and read through TIKTOKEN_CACHE_DIR, where litellm itself points tiktoken at import. No network.
- `count_prompt_tokens(model, messages)` and `count_completion_tokens(model, text)`: the model's own
  tokenizer and chat framing, through litellm.token_counter: what a call to that model costs (the gateway's
  fallback when a provider reports no usage, the backfill planner's estimate).
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

DEFAULT_ENCODING = "cl100k_base"
SLICE_CHARS = 1_024  # litellm's TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS default: it encodes long text slice by slice


def bundled_tokenizers_dir() -> Path | None:
    """litellm's bundled tiktoken files (litellm/litellm_core_utils/tokenizers), without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


@lru_cache(maxsize=1)
def _default_encoding() -> Any:
    folder = bundled_tokenizers_dir()
    if folder is not None:
        # What litellm's import does too (default_encoding.py), unless CUSTOM_TIKTOKEN_CACHE_DIR is set.
        os.environ["TIKTOKEN_CACHE_DIR"] = os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR") or str(folder)
    import tiktoken

    return tiktoken.get_encoding(DEFAULT_ENCODING)


def count_tokens(text: str) -> int:
    """Tokens of text with the default tokenizer (equal to litellm.token_counter(text=text))."""
    encode = _default_encoding().encode_ordinary
    return sum(len(encode(text[start : start + SLICE_CHARS])) for start in range(0, len(text), SLICE_CHARS))


def token_offsets(text: str) -> list[int]:
    """Where each token count_tokens counts starts in text (a character index; the tokens of one character
    share its index): text[offsets[i]:offsets[j]] holds tokens i to j - 1."""
    encoding = _default_encoding()
    offsets: list[int] = []
    for start in range(0, len(text), SLICE_CHARS):
        _, starts = encoding.decode_with_offsets(encoding.encode_ordinary(text[start : start + SLICE_CHARS]))
        offsets.extend(start + offset for offset in starts)
    return offsets


def count_prompt_tokens(model: str, messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of chat messages for model: its tokenizer and its per-message framing (litellm)."""
    from strataflow.llm import lazy

    return int(lazy.litellm().token_counter(model=model, messages=messages))


def count_completion_tokens(model: str, text: str) -> int:
    """Tokens of a reply's text for model, with its tokenizer (litellm)."""
    from strataflow.llm import lazy

    return int(lazy.litellm().token_counter(model=model, text=text))
