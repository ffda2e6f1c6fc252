"""Numbers as people write them: Chinese and English numerals, units as integers, ranges kept as strings."""

from __future__ import annotations

import pytest

from strataflow.llm.offline.numbers import Quantity, cn_to_int, decade_phrase, en_to_int, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("二十八", 28),  # tens + unit
        ("两", 2),  # colloquial two
        ("十二", 12),  # leading 十 means one ten
        ("一百零五", 105),  # 零 bridges a missing place
        ("两万五", 25000),  # colloquial tail digit counts in the unit below 万
        ("三千二", 3200),  # same for 千
        ("八十万", 800000),  # a numeral with a big unit
        ("百万", 1_000_000),  # a bare unit
        ("二零二六", 2026),  # digit-by-digit (years)
    ],
)
def test_chinese_numerals_become_integers(text: str, expected: int) -> None:
    assert cn_to_int(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("twelve", 12),  # a teen word
        ("thirty-four", 34),  # hyphenated tens
        ("thirty four", 34),  # spaced tens
        ("two hundred and five", 205),  # scale word with "and"
        ("a dozen", 12),  # idiom
    ],
)
def test_english_number_words_become_integers(text: str, expected: int) -> None:
    assert en_to_int(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("32", Quantity(32)),  # plain digits
        ("80万", Quantity(800000)),  # 万 unit on digits
        ("大概80万", Quantity(800000, True)),  # hedged: still a number, marked approximate
        ("80万左右", Quantity(800000, True)),  # hedge after the number
        ("1.5k", Quantity(1500)),  # decimal with k
        ("5w", Quantity(50000)),  # w is 万 in chat
        ("1,200", Quantity(1200)),  # thousands separator
        ("about 35", Quantity(35, True)),  # English hedge
        ("30多", Quantity("30+")),  # open bound stays a string, never 35
        ("三十多", Quantity("30+")),  # same with Chinese numerals
        ("二十几", Quantity("20-29")),  # unknown unit digit is a range
        ("二十七八", Quantity("27-28")),  # two neighbouring digits written together
        ("30-35", Quantity("30-35")),  # explicit range
        ("35 or 36", Quantity("35-36")),  # spoken range
        ("over 10", Quantity("10+")),  # lower bound
        ("不到30", Quantity("<30")),  # upper bound
        ("两三万", Quantity("20000-30000")),  # adjacent digits with a unit
    ],
)
def test_quantities_keep_ranges_and_hedges(text: str, expected: Quantity) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "hello", "几", "some"])  # no digits, no numeral: nothing to read
def test_non_numbers_give_none(text: str) -> None:
    assert parse_quantity(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("in my early thirties", "early 30s"),
        ("mid-40s", "mid 40s"),
        ("late twenties", "late 20s"),
        ("thirties", "30s"),
    ],
)
def test_decade_phrases_stay_phrases(text: str, expected: str) -> None:
    assert decade_phrase(text) == expected
