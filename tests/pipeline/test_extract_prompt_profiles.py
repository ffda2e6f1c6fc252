"""The extraction prompt's profiles (strataflow/pipeline/extract_prompt.py): which model gets the small one,
its batch size, and that the offline provider reads its messages as it reads the full profile's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from strataflow.config import Settings
from strataflow.llm import lazy
from strataflow.llm.offline import register_offline_provider
from strataflow.pipeline.extract_prompt import FULL, SMALL, extract_prompt, is_small_model
from strataflow.pipeline.scopes import ScopeMessage


@pytest.mark.parametrize(
    ("model", "small"),
    [
        ("openai/qwen2.5-coder-0.5b-instruct", True),
        ("ollama/qwen2.5:1.5b-instruct", True),
        ("openai/llama3.2:3b", True),
        ("openai/Qwen/Qwen2.5-7B-Instruct", False),
        ("openai/gpt-4o-mini", False),
        ("anthropic/claude-3-5-haiku-20241022", False),
        ("openai/qwen2.5-14b", False),
        ("openai/my-model", False),
    ],
)
def test_a_model_whose_name_gives_at_most_4b_parameters_is_small(model: str, small: bool) -> None:
    assert is_small_model(model) is small


def test_the_profile_setting_wins_over_the_model_and_offline_keeps_the_full_prompt(
    settings: Settings,
) -> None:
    local = settings.model_copy(update={"extract_model": "openai/qwen2.5-coder-0.5b-instruct"})
    assert extract_prompt(local) is SMALL
    assert extract_prompt(local.model_copy(update={"extract_prompt_profile": "full"})) is FULL
    assert extract_prompt(settings) is FULL  # offline/rules
    assert extract_prompt(settings.model_copy(update={"extract_prompt_profile": "small"})) is SMALL
    assert SMALL.version != FULL.version, "their answers are cached and traced apart"


def test_the_small_profile_caps_the_batch_and_never_raises_it(settings: Settings) -> None:
    assert SMALL.batch_tokens(settings) == 800 and FULL.batch_tokens(settings) == 3000
    assert SMALL.batch_tokens(settings.model_copy(update={"extract_batch_tokens": 300})) == 300


def test_the_offline_provider_answers_the_small_profile_as_the_full_one() -> None:
    """It reads only the data blocks, which both profiles write alike."""
    register_offline_provider()
    at = datetime(2026, 11, 2, 9, tzinfo=UTC)
    batch = [
        ScopeMessage(1, "user", "I'm 34 and I live in Porto.", "h1", at, 1),
        ScopeMessage(2, "user", "我在杭州做产品经理。", "h2", at, 2),
    ]
    litellm = lazy.litellm()
    answers = [
        litellm.completion(model="offline/rules", messages=p.messages(batch, []), num_retries=0).choices[0]
        for p in (FULL, SMALL)
    ]
    assert answers[0].message.content == answers[1].message.content
    assert "杭州" in answers[0].message.content and '"value": 34' in answers[0].message.content
