"""The documented alias dictionary: abbreviations -> full names / official program abbreviations."""

from __future__ import annotations

import pytest

from strataflow.llm.offline.aliases import city_name, company_name, programs_in, tech_in, university_name


@pytest.mark.parametrize(
    ("alias", "full"),
    [
        ("浙大", "浙江大学"),  # the seed 000 example
        ("北大", "北京大学"),
        ("清华", "清华大学"),
        ("复旦", "复旦大学"),
        ("上交", "上海交通大学"),
        ("港大", "香港大学"),
        ("MIT", "Massachusetts Institute of Technology"),
        ("HKUST", "The Hong Kong University of Science and Technology"),
        ("浙江大学", "浙江大学"),  # a full name passes through
    ],
)
def test_university_abbreviations_map_to_full_names(alias: str, full: str) -> None:
    assert university_name(alias) == full


@pytest.mark.parametrize(
    ("alias", "full"),
    [("魔都", "上海"), ("杭州市", "杭州"), ("鹏城", "深圳"), ("NYC", "New York"), ("SF", "San Francisco")],
)
def test_city_nicknames_map_to_city_names(alias: str, full: str) -> None:
    assert city_name(alias) == full


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我想申请优才", ["QMAS"]),  # short Chinese name
        ("高才通和专才都可以考虑", ["TTPS", "ASMTP"]),  # two programs, in order
        ("资本投资者入境计划", ["CIES"]),  # long official Chinese name
        ("投资移民", ["CIES"]),  # colloquial name
        ("I might go for the Top Talent Pass Scheme", ["TTPS"]),  # English name
        ("already on IANG, thinking about qmas", ["IANG", "QMAS"]),  # case-insensitive abbreviations
        ("the Giang family", []),  # only a whole word counts
    ],
)
def test_programs_map_to_official_abbreviations(text: str, expected: list[str]) -> None:
    assert programs_in(text) == expected


def test_technologies_get_canonical_names_and_go_needs_a_capital() -> None:
    assert tech_in("we use Postgres, k8s and Go; I go to python meetups") == [
        "PostgreSQL",
        "Kubernetes",
        "Go",
        "Python",
    ]


def test_company_nicknames_map_to_names() -> None:
    assert company_name("鹅厂") == "腾讯"
