"""Amounts of money in Chinese and English: incomes per year or month, budgets, investment capacity and
prices, with 万 / 千 / k / w / million units as integers and the currency kept.

Keys: annual_income, monthly_income (+ income_currency), budget, investment_amount (+ budget_currency),
price_<topic> {"amount", "currency", "per"}. Currency codes: CNY, HKD, USD, GBP, EUR, SGD, CAD, AUD, JPY;
no currency is assumed when none is written. Salary slang: 年包120个 = 120万 (个 means 万 after a pay word).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strataflow.llm.offline.numbers import NUMBER, Quantity, parse_quantity
from strataflow.llm.offline.text import Finding, slug

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE

CURRENCY_WORDS: dict[str, str] = {
    "人民币": "CNY", "元": "CNY", "块": "CNY", "rmb": "CNY", "cny": "CNY", "¥": "CNY", "￥": "CNY",
    "yuan": "CNY", "港币": "HKD", "港元": "HKD", "港纸": "HKD", "hkd": "HKD", "hk$": "HKD",
    "美元": "USD", "美金": "USD", "刀": "USD", "usd": "USD", "us$": "USD", "$": "USD", "dollars": "USD",
    "英镑": "GBP", "gbp": "GBP", "£": "GBP", "pounds": "GBP", "欧元": "EUR", "eur": "EUR", "€": "EUR",
    "euros": "EUR", "新币": "SGD", "新加坡元": "SGD", "sgd": "SGD", "s$": "SGD", "加币": "CAD",
    "cad": "CAD", "c$": "CAD", "澳币": "AUD", "澳元": "AUD", "aud": "AUD", "a$": "AUD", "日元": "JPY",
    "jpy": "JPY",
}  # fmt: skip
_codes = sorted(CURRENCY_WORDS, key=len, reverse=True)
CUR_BEFORE = "|".join(re.escape(c) for c in _codes if not c.isalpha() or c in ("rmb", "hkd", "usd"))
CUR_AFTER = "|".join(re.escape(c) for c in _codes)

# A Chinese amount: hedge, number (3万5, 45w, 两万八, 90个 after a pay word), hedge after.
PRE_ZH = r"(?:大概|大约|约|差不多|将近|接近|快|近|估计|大致|不到|超过|超|不止|少于)?"
AMOUNT_ZH = (
    rf"(?P<q>{PRE_ZH}\s*(?:{NUMBER})(?:多|来|余)?(?:\s*(?:-|~|到|至)\s*(?:{NUMBER}))?\s*(?:万|千|k|K|w|W|个)?"
    r"(?:(?<=[万千])[0-9一二两三四五六七八九](?![0-9万千]))?)"
    rf"\s*(?P<cur>(?i:{CUR_AFTER}))?\s*(?P<post>左右|上下)?"
)
PERIOD_ZH = (
    (
        "annual_income",
        r"(?:税前|税后)?(?:年薪|年收入|年入|年包|年总包|总包|package|"
        r"一年(?:能|大概|大约|差不多|可以|也就|税前|税后)*(?:赚|挣|收入|拿|有))(?:税前|税后)?",
    ),
    (
        "monthly_income",
        r"(?:税前|税后)?(?:月薪|月收入|月入|到手|一个月(?:能|大概|大约|差不多|可以|也就|税前|税后)*(?:赚|挣|拿|有)|"
        r"每个?月(?:能)?(?:赚|挣|收入|拿))(?:税前|税后)?",
    ),
    ("budget", r"预算"),
    ("investment_amount", r"可投资金额|可投资资产|投资金额|投资额|可以投资|能投资|能投|可以投|拿出|投入"),
)
LINK_ZH = r"(?:是|有|在|能有|为|大概是|大概有|了|:|：)?"
PRICE_ZH = {
    "学费": "tuition", "房租": "rent", "租金": "rent", "房价": "home_price", "月供": "mortgage_payment",
    "首付": "down_payment", "费用": "fee", "价格": "price", "报价": "quote", "中介费": "agency_fee",
    "律师费": "legal_fee", "服务费": "service_fee", "生活费": "living_costs",
}  # fmt: skip
MONEY_EN = (
    rf"(?P<q>(?:(?:about|around|roughly|approximately|nearly|over|almost|close to|under|some)\s+|~)?"
    rf"(?P<cur1>(?i:{CUR_BEFORE}))?\s*\d[\d,]*(?:\.\d+)?\s*(?:k|K|m|M|mm|million|thousand|grand|bn|billion)?)"
    rf"(?![\w%])(?:\s*(?P<cur2>(?i:{CUR_AFTER}))\b)?"
)
PER_EN = (
    r"\s*(?P<per>(?:a|per|each|every|/)\s*(?:year|yr|annum|month|mo)\b|annually|yearly|monthly|"
    r"a\s+year|p\.?a\.?)?"
)
PRICE_EN = r"rent|tuition|fees?|price|cost|costs|mortgage|down payment|deposit|quote|premium"


def _currency(*words: str | None) -> str | None:
    for word in words:
        if word:
            code = CURRENCY_WORDS.get(word.strip().lower())
            if code:
                return code
    return None


def _quantity(text: str, pay_word: bool) -> Quantity | None:
    text = re.sub(r"(\d|[一二两三四五六七八九十])个$", r"\1万", text) if pay_word else text
    if not pay_word and text.endswith("个"):
        return None
    return parse_quantity(text)


def money_zh(sentence: str) -> Iterator[Finding]:
    periods: tuple[tuple[str, str], ...] = PERIOD_ZH
    if re.search(r"(收入|薪水|工资|薪资|薪酬|待遇)", sentence):  # 收入的话，一年差不多150万
        periods += (("annual_income", r"(?:一年|每年)"), ("monthly_income", r"(?:一个月|每个?月)"))
    for key, marker in periods:
        pattern = rf"(?:{marker}){LINK_ZH}\s*(?:(?P<cur0>(?i:{CUR_BEFORE}))\s*)?{AMOUNT_ZH}"
        for match in re.finditer(pattern, sentence):
            if key == "investment_amount" and "投" not in sentence:
                continue  # 拿出100万买房 is money for a home, not an investment
            quantity = _quantity(match.group("q") + (match.group("post") or ""), key.endswith("income"))
            if quantity is None or (isinstance(quantity.value, int | float) and quantity.value < 1000):
                continue
            category = "career" if key.endswith("income") else "immigration"
            yield Finding("fact", key, quantity.value, match.span(), quantity.approximate, category=category)
            currency = _currency(match.group("cur0"), match.group("cur"))
            if currency:
                currency_key = "income_currency" if key.endswith("income") else "budget_currency"
                yield Finding("fact", currency_key, currency, match.span(), category=category)
            break
    words = "|".join(sorted(PRICE_ZH, key=len, reverse=True))
    for match in re.finditer(
        rf"(?P<w>{words})(?:是|要|大概|大约|一年|每年|一个月|每月|:|：)*\s*{AMOUNT_ZH}", sentence
    ):
        quantity = parse_quantity(match.group("q") + (match.group("post") or ""))
        if quantity is None or not isinstance(quantity.value, int | float) or quantity.value < 100:
            continue
        per = (
            "year"
            if re.search(r"一年|每年|年", match.group(0)[:6])
            else "month"
            if "月" in match.group(0)
            else None
        )
        value = {"amount": quantity.value, "currency": _currency(match.group("cur")), "per": per}
        yield Finding(
            "fact",
            f"price_{PRICE_ZH[match.group('w')]}",
            value,
            match.span(),
            quantity.approximate,
            guards=frozenset({"question", "negation"}),
        )


def money_en(sentence: str) -> Iterator[Finding]:
    marker = (
        r"\b(?:make|making|earn|earning|earns|bring in|take[- ]home|paid|get paid|salary|income|comp|"
        r"compensation|pay|package|TC|total comp|base)\b:?(?:\s+(?:is|of|was|at|about|around|roughly))*\s*"
    )
    on = r"\b(?:I'm|I am|I'm currently|we're|I was)\s+on\s+"
    for match in re.finditer(rf"(?:{marker}|{on}){MONEY_EN}{PER_EN}", sentence, IGNORE):
        period = (match.group("per") or "").lower()
        if "mo" in period or re.search(r"\bmonthly\b|\ba month\b|\bper month\b", sentence, IGNORE):
            key = "monthly_income"
        elif period or re.search(
            r"\b(salary|annual|annually|yearly|a year|per year|package|TC|comp|compensation)\b",
            sentence,
            IGNORE,
        ):
            key = "annual_income"
        else:
            continue
        yield from _amount("fact", key, match, "income_currency", "career")
        return
    for match in re.finditer(
        r"\bbudget\b(?:\s+(?:is|of|was|around|about|roughly|:))*\s*" + MONEY_EN, sentence, IGNORE
    ):
        yield from _amount("fact", "budget", match, "budget_currency", "immigration")
    invest = (
        r"\b(?:invest|investing|put in|investment (?:budget|capacity|amount) (?:is|of)|(?:have|got)\s+)\s*"
        rf"(?:up to\s+)?{MONEY_EN}(?:\s+(?:to|for)\s+invest(?:ment)?)?"
    )
    for match in re.finditer(invest, sentence, IGNORE):
        if match.group(0).lower().startswith(("have", "got")) and "invest" not in match.group(0).lower():
            continue
        yield from _amount("fact", "investment_amount", match, "budget_currency", "immigration")
    for match in re.finditer(
        rf"\b(?P<w>{PRICE_EN})\b(?:\s+(?:is|are|was|of|about|around|runs?|comes? to))*\s*"
        + MONEY_EN
        + PER_EN,
        sentence,
        IGNORE,
    ):
        quantity = parse_quantity(_strip_currency(match.group("q")))
        if quantity is not None and isinstance(quantity.value, int | float):
            per = (match.group("per") or "").lower()
            value = {
                "amount": quantity.value,
                "currency": _currency(match.group("cur1"), match.group("cur2")),
                "per": "month" if "mo" in per else "year" if per else None,
            }
            yield Finding(
                "fact",
                f"price_{slug(match.group('w'), 2)}",
                value,
                match.span(),
                quantity.approximate,
                guards=frozenset({"question", "negation"}),
            )


def _strip_currency(text: str) -> str:
    return re.sub(rf"(?i:{CUR_BEFORE})", "", text).strip()


def _amount(kind: str, key: str, match: re.Match[str], currency_key: str, category: str) -> Iterator[Finding]:
    quantity = parse_quantity(_strip_currency(match.group("q")))
    if quantity is None:
        return
    yield Finding(kind, key, quantity.value, match.span(), quantity.approximate, category=category)
    currency = _currency(match.group("cur1"), match.group("cur2"))
    if currency:
        yield Finding(kind, currency_key, currency, match.span(), category=category)


ZH_RULES: tuple[Rule, ...] = (money_zh,)
EN_RULES: tuple[Rule, ...] = (money_en,)
