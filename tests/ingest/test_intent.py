"""Rule-based intent at ingest, Chinese and English."""

from __future__ import annotations

import random

import pytest

from models.common import Intent
from strataflow.ingest.intent import _WORDS, _words, classify_intent


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hi", Intent.greeting),  # a bare salutation
        ("Good morning everyone!", Intent.greeting),  # salutation + audience words only
        ("您好！", Intent.greeting),  # Chinese salutation
        ("Can you review the deploy before Friday?", Intent.request),  # "can you" + verb asks for an action
        ("Please send me the report", Intent.request),  # opens with please
        ("麻烦帮我看一下材料", Intent.request),  # 麻烦/帮我
        ("我想申请高才通", Intent.statement),  # 申请 contains 请 but is not a request
        ("请问优才需要什么材料", Intent.question),  # 请问 asks a question
        ("What time is the standup", Intent.question),  # question word without a question mark
        ("香港身份要多久能办下来？", Intent.question),  # full-width question mark
        ("We decided to postpone the release because tests failed.", Intent.decision),
        ("我们决定先做前端", Intent.decision),
        ("Status: the API is 80% done", Intent.status_update),
        ("前端已经完成了一半", Intent.status_update),
        ("Thanks Bob, the dashboard looks good to me.", Intent.feedback),
        ("这个方案不错", Intent.feedback),
        ("I prefer smaller pull requests.", Intent.statement),
        ("👍 ...", Intent.other),  # no words at all
    ],
)
def test_classify_intent_follows_the_documented_rules(text: str, expected: Intent) -> None:
    assert classify_intent(text) is expected


def test_word_splitting_matches_the_pattern_on_awkward_text() -> None:
    """_words is a faster _WORDS.findall: apostrophes anywhere, digits, non-ASCII letters that lowercase to
    ASCII (the Kelvin sign) or to a letter plus a combining mark (dotted I), curly quotes, CJK, emoji and a
    lone surrogate, in random mixes."""
    rng = random.Random(17)
    alphabet = "abzXYZ'’ \t\n.,-_09İKéß中文\u212a😀\ud800"
    texts = ["we'll", "'quoted'", "rock'n'roll", "a''b", "l'", "it's 5 o'clock", "Let's go with it"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(20_000)]
    for text in texts:
        lower = text.lower()
        assert _words(lower) == _WORDS.findall(lower), text
