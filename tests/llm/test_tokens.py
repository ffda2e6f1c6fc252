"""The one token counter: count_tokens equals litellm.token_counter(text=...) without importing litellm, and
the model-specific counts are litellm's own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from strataflow.llm import lazy
from strataflow.llm.tokens import (
    bundled_tokenizers_dir,
    count_completion_tokens,
    count_prompt_tokens,
    count_tokens,
    token_offsets,
)

ENGLISH = "Deploy the API on Friday; the migration (v2.1) needs 15 minutes of downtime.\n"
CHINESE = "我今年32岁，在浙江大学读完研究生，现在杭州做产品经理，年薪大概80万。\n"
SAMPLES = [
    "",
    "hello",
    ENGLISH,
    CHINESE,
    "Mixed: 我们用 PostgreSQL 16 和 pgvector 做检索 🙂 café <|endoftext|>",
    ENGLISH * 40,  # longer than one 1,024-character slice: slices must fall where litellm's do
    CHINESE * 60,
    (ENGLISH + CHINESE) * 25,
]


@pytest.mark.parametrize("text", SAMPLES, ids=[f"sample{i}" for i in range(len(SAMPLES))])
def test_count_tokens_equals_litellm_default_counter(text: str) -> None:
    assert count_tokens(text) == lazy.litellm().token_counter(text=text)


def test_counts_are_real_token_counts() -> None:
    assert count_tokens("") == 0
    assert count_tokens(ENGLISH * 3) > 2 * count_tokens(ENGLISH)
    assert count_tokens(CHINESE) >= len(CHINESE.strip()) // 2  # Chinese: about a token per character


def test_the_default_counter_needs_no_litellm_import_and_no_network(tmp_path) -> None:
    script = (
        "import sys\n"
        "from strataflow.llm.tokens import count_tokens\n"
        f"print(count_tokens({CHINESE!r}), 'litellm' in sys.modules)\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty"), "HTTPS_PROXY": "http://127.0.0.1:9"}
    env.pop("CUSTOM_TIKTOKEN_CACHE_DIR", None)
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(count_tokens(CHINESE)), "False"]
    assert bundled_tokenizers_dir() is not None


def test_token_offsets_cut_text_at_the_counted_tokens() -> None:
    text = (ENGLISH + CHINESE) * 30
    offsets = token_offsets(text)
    assert len(offsets) == count_tokens(text) and offsets == sorted(offsets) and offsets[0] == 0
    assert text[offsets[100] :].startswith(text[offsets[100] : offsets[101]])


def test_model_counts_are_litellms() -> None:
    litellm = lazy.litellm()
    messages = [{"role": "system", "content": ENGLISH}, {"role": "user", "content": CHINESE}]
    assert count_prompt_tokens("gpt-4o-mini", messages) == litellm.token_counter(
        model="gpt-4o-mini", messages=messages
    )
    assert count_completion_tokens("gpt-4o-mini", CHINESE) == litellm.token_counter(
        model="gpt-4o-mini", text=CHINESE
    )
    # framing: the prompt counts more than its texts
    assert count_prompt_tokens("gpt-3.5-turbo", messages) > count_tokens(ENGLISH) + count_tokens(CHINESE)
