"""The `offline/rules` litellm provider: a deterministic rules engine behind litellm's custom provider hook.

It reads only its prompt: the <task> block names the stage, <messages> / <memories> carry the data as JSON
lines (strataflow.llm.prompt_blocks). It answers with the JSON of models/llm.py for that stage, and a usage
block (prompt tokens counted from the prompt, completion tokens from the answer) like any other model.
It answers under two model names with the same rules: `offline/rules` and `offline/rules-v2` (a second
name, so a model switch, e.g. a backfill reprocess, can be tried with no network); any other offline name
is refused by name.

    register_offline_provider()
    litellm.completion(model="offline/rules", messages=[...])
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from strataflow.llm import lazy
from strataflow.llm.prompt_blocks import json_block_lines, parse_blocks
from strataflow.llm.tokens import count_tokens

logger = logging.getLogger(__name__)

PROVIDER = "offline"
MODELS = ("rules", "rules-v2")  # offline/<name>: the same rules under each name
STAGES = ("extract", "rollup", "reflect", "hot_summary")
_LOCK = threading.Lock()


class OfflineProviderError(ValueError):
    """The prompt cannot be answered: no <task> block, an unknown stage, or the stage's data block missing."""


def prompt_text(messages: list[Any]) -> str:
    """All message contents of a chat request joined in order (string or text-part contents)."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "\n".join(parts)


def _records(body: str | None, block: str) -> list[dict[str, Any]]:
    """JSON-lines records of a block (lines split on "\n" only); a line that is not a JSON object is an
    error naming it, never skipped."""
    records: list[dict[str, Any]] = []
    for number, line in json_block_lines(body or ""):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise OfflineProviderError(
                f"offline/rules: <{block}> line {number} is not JSON ({error.msg})"
            ) from None
        if not isinstance(record, dict):
            raise OfflineProviderError(f"offline/rules: <{block}> line {number} is not a JSON object")
        records.append(record)
    return records


def answer(prompt: str) -> dict[str, Any]:
    """The stage's output (a dict matching models/llm.py) for one prompt."""
    from strataflow.llm.offline import extract, summarize

    blocks = parse_blocks(prompt)
    stage = (blocks.get("task") or "").strip()
    if stage not in STAGES:
        raise OfflineProviderError(
            f"offline/rules needs a <task> block naming one of {', '.join(STAGES)}; got {stage or 'none'!r}"
        )
    if stage == "reflect":
        if "memories" not in blocks:
            raise OfflineProviderError("offline/rules: the reflect prompt has no <memories> block")
        return summarize.reflect(_records(blocks["memories"], "memories"))
    if "messages" not in blocks:
        raise OfflineProviderError(f"offline/rules: the {stage} prompt has no <messages> block")
    messages = _records(blocks["messages"], "messages")
    if stage == "extract":
        existing = {key.strip() for key in (blocks.get("existing_keys") or "").split(",") if key.strip()}
        return {"items": extract.extract_items(messages, existing)}
    if stage == "rollup":
        return summarize.rollup(messages, blocks.get("week"))
    return summarize.hot_summary(messages)


def _handler_class() -> type:
    litellm = lazy.litellm()
    from litellm import CustomLLM

    class OfflineRulesLLM(CustomLLM):
        """litellm CustomLLM answering every stage with the offline rules."""

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            name = model.removeprefix(f"{PROVIDER}/")
            if name not in MODELS:
                raise OfflineProviderError(
                    f"model {PROVIDER}/{name}: the offline provider answers as "
                    + " or ".join(f"{PROVIDER}/{known}" for known in MODELS)
                )
            prompt = prompt_text(messages)
            content = json.dumps(answer(prompt), ensure_ascii=False, default=str)
            prompt_tokens, completion_tokens = count_tokens(prompt), count_tokens(content)
            response = litellm.ModelResponse(
                model=f"{PROVIDER}/{name}",
                choices=[
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                usage=litellm.Usage(
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    total_tokens=prompt_tokens + completion_tokens,
                ),
            )
            logger.debug("offline/rules answered in %.1f ms", (time.perf_counter() - started) * 1000)
            return response

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            return self.completion(model, messages, *args, **kwargs)

    return OfflineRulesLLM


def register_offline_provider() -> None:
    """Register the `offline` provider in litellm.custom_provider_map (idempotent; other entries kept)."""
    litellm = lazy.litellm()

    with _LOCK:
        if any(entry.get("provider") == PROVIDER for entry in litellm.custom_provider_map):
            return
        handler = _handler_class()()
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": PROVIDER, "custom_handler": handler},
        ]
