"""Numbers as people write them, in Chinese and English, for the offline rules engine.

Handles Arabic digits (full-width too, thousands separators, decimals), Chinese numerals (二十八, 两,
一百零五,
两万五), English number words ("twelve", "thirty-four", "a dozen"), units as integers (万, 千, 亿, k, m,
"thousand", "million": 80万 -> 800000, 1.5k -> 1500), adjacent-digit ranges (二十七八 -> 27-28) and
open bounds (30多 -> "30+", 二十几 -> "20-29"). Nothing here guesses a midpoint: a range stays a string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "俩": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
CN_SMALL_UNITS = {"十": 10, "百": 100, "千": 1000}
CN_BIG_UNITS = {"万": 10_000, "亿": 100_000_000}
CN_NUMERAL_CHARS = "零〇一二两俩三四五六七八九十百千万亿"

EN_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "a dozen": 12,
    "dozen": 12,
}
EN_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
EN_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
# Multipliers written after a number (case-insensitive for the Latin ones).
UNIT_MULTIPLIERS = {
    "万": 10_000,
    "千": 1000,
    "亿": 100_000_000,
    "k": 1000,
    "m": 1_000_000,
    "mm": 1_000_000,
    "thousand": 1000,
    "million": 1_000_000,
    "grand": 1000,
    "w": 10_000,
    "bn": 1_000_000_000,
    "billion": 1_000_000_000,
}

_en_word = "|".join(sorted([*EN_UNITS, *EN_TENS, *EN_SCALES], key=len, reverse=True))
# An English number phrase: "thirty-four", "one hundred and five", "twelve".
EN_NUMBER = rf"(?:(?:{_en_word})(?:[\s-]+(?:and\s+)?(?:{_en_word}))*)"
# A Chinese or Arabic number (digits may carry separators and a decimal part).
DIGITS = r"[0-9０-９]+(?:[,，][0-9]{3})*(?:\.[0-9]+)?"
CN_NUMBER = rf"[{CN_NUMERAL_CHARS}]+"
NUMBER = rf"(?:{DIGITS}|{CN_NUMBER})"

APPROX_ZH = re.compile(r"(大概|大约|约|差不多|左右|上下|将近|接近|近|快|估计|大致|大于?概|约莫)")
APPROX_EN = re.compile(
    r"\b(about|around|roughly|approximately|approx\.?|nearly|almost|close to|some|circa|give or take|"
    r"or so|-?ish)\b|~",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Quantity:
    """A number read from text: an int (or float), or a range/bound string; approximate when hedged."""

    value: int | float | str
    approximate: bool = False


def _fullwidth_to_ascii(text: str) -> str:
    return text.translate({code: code - 0xFEE0 for code in range(0xFF10, 0xFF1A)})


def cn_to_int(text: str) -> int | None:
    """Chinese numeral -> int: 二十八 -> 28, 一百零五 -> 105, 两万五 -> 25000; None if not one."""
    if not text or any(ch not in CN_NUMERAL_CHARS for ch in text):
        return None
    if all(ch in CN_DIGITS for ch in text) and len(text) > 1:
        # Digit by digit, as in years or phone numbers: 二零二六 -> 2026.
        return int("".join(str(CN_DIGITS[ch]) for ch in text))
    total, section, digit = 0, 0, None
    last_unit = 1
    for ch in text:
        if ch in CN_DIGITS:
            digit = CN_DIGITS[ch]
        elif ch in CN_SMALL_UNITS:
            unit = CN_SMALL_UNITS[ch]
            section += (1 if digit is None else digit) * unit
            digit, last_unit = None, unit
        else:
            unit = CN_BIG_UNITS[ch]
            section += digit or 0
            total += (section or 1) * unit
            section, digit, last_unit = 0, None, unit
    if digit is not None:
        # Colloquial tail: 两万五 = 25000, 三千二 = 3200 (the digit counts in the unit below the last one).
        section += digit * (last_unit // 10 if last_unit >= 100 and text[-2] in "万千百亿" else 1)
    return total + section


def en_to_int(text: str) -> int | None:
    """English number words -> int: "twelve" -> 12, "thirty-four" -> 34, "two hundred and five" -> 205."""
    words = re.split(r"[\s-]+", text.lower().strip())
    words = [w for w in words if w and w != "and"]
    if words[:2] == ["a", "dozen"]:
        words = ["dozen", *words[2:]]
    if not words:
        return None
    total, current = 0, 0
    for word in words:
        if word in EN_UNITS:
            current += EN_UNITS[word]
        elif word in EN_TENS:
            current += EN_TENS[word]
        elif word == "hundred":
            current = (current or 1) * 100
        elif word in EN_SCALES:
            total += (current or 1) * EN_SCALES[word]
            current = 0
        else:
            return None
    return total + current


def to_number(text: str) -> int | float | None:
    """One number in any of the supported spellings (no unit): "32", "1.5", "1,200", "三十二", "twelve"."""
    text = _fullwidth_to_ascii(text.strip()).replace("，", ",")
    if re.fullmatch(r"[0-9]+(?:,[0-9]{3})*", text):
        return int(text.replace(",", ""))
    if re.fullmatch(r"[0-9]*\.[0-9]+|[0-9]+\.[0-9]*", text):
        return float(text)
    value = cn_to_int(text)
    if value is not None:
        return value
    return en_to_int(text)


def _as_int(value: float) -> int | float:
    return int(round(value)) if abs(value - round(value)) < 1e-9 else value


def with_unit(number: str, unit: str | None) -> int | float | None:
    """A number times its written unit: ("80", "万") -> 800000, ("1.5", "k") -> 1500."""
    base = to_number(number)
    if base is None:
        return None
    if not unit:
        return _as_int(base) if isinstance(base, float) else base
    multiplier = UNIT_MULTIPLIERS.get(unit.lower().strip())
    if multiplier is None:
        return None
    return _as_int(base * multiplier)


def adjacent_range(text: str) -> tuple[int, int] | None:
    """二十七八 -> (27, 28), 三四十 -> (30, 40), 七八 -> (7, 8): two neighbouring digits written together."""
    match = re.fullmatch(
        rf"([{CN_NUMERAL_CHARS}]*?)([一二两三四五六七八九])([一二三四五六七八九])(十|百|千|万)?", text
    )
    if not match:
        return None
    prefix, first, second, unit = match.groups()
    a, b = CN_DIGITS[first], CN_DIGITS[second]
    if b != a + 1:
        return None
    if unit:  # 三四十 -> 30-40, 两三万 -> 20000-30000
        scale = (CN_SMALL_UNITS | CN_BIG_UNITS)[unit]
        base = cn_to_int(prefix) if prefix else 0
        return (base or 0) + a * scale, (base or 0) + b * scale
    base = cn_to_int(prefix) if prefix else 0
    if prefix and base is None:
        return None
    return (base or 0) + a, (base or 0) + b


def parse_quantity(text: str) -> Quantity | None:
    """A quantity phrase -> Quantity. Ranges and open bounds stay strings, never a midpoint.

    "32" -> 32; "大概80万" -> 800000 approx; "二十七八" -> "27-28"; "30多" -> "30+"; "二十几" -> "20-29";
    "1.5k" -> 1500; "about 35" -> 35 approx; "30-35" -> "30-35"; "over 10" -> "10+".
    """
    raw = _fullwidth_to_ascii(text.strip())
    approximate = bool(APPROX_ZH.search(raw) or APPROX_EN.search(raw))
    core = APPROX_EN.sub(" ", APPROX_ZH.sub("", raw)).strip()
    if re.search(r"\d-?ish$|[a-z]-ish$", core):  # 35ish, thirty-ish
        core, approximate = re.sub(r"-?ish$", "", core), True
    core = re.sub(r"^(一共|总共|有|了)+", "", core)
    tail = re.fullmatch(r"(.+?)(万|千)([0-9一二两三四五六七八九])", core)
    if tail:  # colloquial 3万5 = 35000, 2千5 = 2500
        head = with_unit(tail.group(1), tail.group(2))
        digit = to_number(tail.group(3))
        if isinstance(head, int) and isinstance(digit, int):
            return Quantity(head + digit * UNIT_MULTIPLIERS[tail.group(2)] // 10, approximate)
    unit_pattern = r"\s*(万|千|亿|k|K|m|M|mm|w|W|thousand|million|grand|bn|billion)?"
    # Open bounds: 30多, 三十多, 30+, 30来, over 30, more than 30.
    match = re.fullmatch(rf"({NUMBER})\s*(?:多|来|余|\+|plus)" + unit_pattern, core)
    if match:
        low = with_unit(match.group(1), match.group(2))
        return Quantity(f"{low}+", False) if low is not None else None
    match = re.fullmatch(
        rf"(?:over|more than|above|at least|upwards of|超过|超|不止|不少于)\s*({NUMBER}|{EN_NUMBER})"
        + unit_pattern,
        core,
        re.IGNORECASE,
    )
    if match:
        low = with_unit(match.group(1), match.group(2))
        return Quantity(f"{low}+", False) if low is not None else None
    match = re.fullmatch(
        rf"(?:under|less than|below|不到|不满|少于)\s*({NUMBER}|{EN_NUMBER})" + unit_pattern,
        core,
        re.IGNORECASE,
    )
    if match:
        high = with_unit(match.group(1), match.group(2))
        return Quantity(f"<{high}", False) if high is not None else None
    # 二十几 / 20几 -> 20-29 (the tens digit is known, the unit digit is not).
    match = re.fullmatch(rf"({NUMBER})\s*几(十)?" + unit_pattern, core)
    if match:
        tens = to_number(match.group(1))
        if isinstance(tens, int) and not match.group(2):
            step = 10 if tens % 10 == 0 else 1
            low, high = tens, tens + step - 1
            scale = UNIT_MULTIPLIERS.get((match.group(3) or "").lower(), 1)
            return Quantity(f"{low * scale}-{high * scale}", False)
    match = re.fullmatch(
        rf"({NUMBER}|{EN_NUMBER})\s*(?:-|~|–|到|至|or|to)\s*({NUMBER}|{EN_NUMBER})" + unit_pattern,
        core,
        re.IGNORECASE,
    )
    if match:
        low, high = with_unit(match.group(1), match.group(3)), with_unit(match.group(2), match.group(3))
        if low is not None and high is not None and low < high:
            return Quantity(f"{low}-{high}", False)
    match = re.fullmatch(rf"({CN_NUMBER})" + unit_pattern, core)
    if match:
        pair = adjacent_range(match.group(1))
        if pair:
            scale = UNIT_MULTIPLIERS.get((match.group(2) or "").lower(), 1)
            return Quantity(f"{pair[0] * scale}-{pair[1] * scale}", False)
    match = re.fullmatch(rf"({NUMBER}|{EN_NUMBER})" + unit_pattern, core, re.IGNORECASE)
    if match:
        value = with_unit(match.group(1), match.group(2))
        return Quantity(value, approximate) if value is not None else None
    return None


def decade_phrase(text: str) -> str | None:
    """English decade phrases: "early thirties" -> "early 30s", "mid-40s" -> "mid 40s", "40s" stays."""
    match = re.search(
        r"\b(early|mid|late)?[\s-]*(twenties|thirties|forties|fifties|sixties|seventies|"
        r"[2-9]0s|[2-9]0's)\b",
        text,
        re.IGNORECASE,
    )
    if not match:
        return None
    decade_word = match.group(2).lower()
    decade = {
        "twenties": "20s",
        "thirties": "30s",
        "forties": "40s",
        "fifties": "50s",
        "sixties": "60s",
        "seventies": "70s",
    }.get(decade_word, decade_word.replace("'", ""))
    return f"{match.group(1).lower()} {decade}" if match.group(1) else decade
