"""English extraction rules over many phrasings: what is stated comes out, vague stays vague, nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from models.llm import ExtractionOutput
from strataflow.llm.offline.extract import extract_items


def extracted(text: str) -> dict[str, Any]:
    """key -> value of everything extracted from one user message (checked against the LLM output schema)."""
    items = extract_items([{"id": 1, "role": "user", "text": text}])
    ExtractionOutput.model_validate({"items": items})
    return {item["key"]: item["value"] for item in items}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'm 34", {"age": 34}),  # shortest form
        ("I'm thirty-ish", {"age": 30}),  # "-ish" is a hedge: a number marked approximate
        ("34 y/o, living in Austin", {"age": 34, "location": "Austin"}),  # chat shorthand, no subject
        ("I earn $8k/month", {"monthly_income": 8000}),  # per month is not annual
        ("Salary: 120k USD", {"annual_income": 120000}),  # a labelled amount
        ("I've got 15 years in banking", {"years_of_experience": 15}),
        ("My IELTS score is 7.5", {"language_scores": {"IELTS": 7.5}}),
        ("Hey, Jordan here.", {"name": "Jordan"}),
        ("I've been at Microsoft for three years", {"company": "Microsoft", "years_of_experience": 3}),
        ("I'm a freelance illustrator", {"job_title": "freelance illustrator"}),
        ("I'm self-employed", {"job_title": "self-employed"}),
        ("We're engaged and getting married next spring", {"marital_status": "engaged"}),
        ("I've got twin boys", {"children": 2}),  # twins are two
        ("I'm hoping to get my PR in three years", {"intent_get_pr_three": "get my PR in three years"}),
        (
            "I'm Emily, 31, a pharmacist in Manchester.",
            {"name": "Emily", "age": 31, "job_title": "pharmacist"},
        ),
        ("I live with my parents in Toronto", {"location": "Toronto"}),  # parents are not the subject
        (
            "I'm a software engineer with 8 years of experience",
            {"job_title": "software engineer", "company": None, "years_of_experience": 8},
        ),
        (
            "I hold an MBA from Wharton",
            {"education": "Master", "university": "The Wharton School of the University of Pennsylvania"},
        ),
        ("I am thirty-four years old.", {"age": 34}),  # number words + "years old"
        ("I'm about 35, give or take", {"age": 35}),  # hedged stays a number
        ("I'm in my early thirties", {"age": "early 30s"}),  # decade phrase, never 32
        ("I'm a 41-year-old teacher", {"age": 41}),  # compound adjective
        ("I just turned 29 last month", {"age": 29}),  # "turned"
        ("I'm 35 or 36, not sure", {"age": "35-36"}),  # spoken range
        (
            "I work at Google as a senior data engineer.",
            {"company": "Google", "job_title": "senior data engineer"},
        ),
        ("I've been a nurse for twelve years", {"job_title": "nurse", "years_of_experience": 12}),
        (
            "I am a registered nurse at Mercy Hospital",
            {"job_title": "registered nurse", "company": "Mercy Hospital"},
        ),
        (
            "Currently working as a product designer for Spotify",
            {"job_title": "product designer", "company": "Spotify"},
        ),
        ("I have over 10 years of experience in marketing", {"years_of_experience": "10+"}),
        ("I've worked in finance for about 7 years", {"years_of_experience": 7}),
        (
            "I have a master's in computer science from MIT",
            {
                "education": "Master",
                "major": "computer science",
                "university": "Massachusetts Institute of Technology",
            },
        ),
        ("I did my PhD at Stanford University", {"education": "PhD", "university": "Stanford University"}),
        (
            "I graduated from the University of Toronto with a BSc",
            {"education": "Bachelor", "university": "University of Toronto"},
        ),
        ("I majored in economics at NYU", {"major": "economics", "university": "New York University"}),
        ("I make about $150k a year", {"annual_income": 150000}),  # k unit, hedged
        ("My salary is 95,000", {"annual_income": 95000}),  # separator; "salary" means per year
        ("I earn 1.2 million annually", {"annual_income": 1200000}),  # million unit
        ("Our budget is around $500k", {"budget": 500000}),
        ("I'm married with two kids", {"marital_status": "married", "children": 2}),
        ("I have a son and a daughter", {"children": 2}),  # counted
        ("We don't have any kids yet", {"children": 0}),
        ("I got divorced last year", {"marital_status": "divorced"}),
        (
            "My name is Sarah Lee, reach me at sarah.lee@example.com or +1 415-555-0134",
            {"name": "Sarah Lee", "email": "sarah.lee@example.com", "phone": "+14155550134"},
        ),
        ("Hi, I'm Daniel.", {"name": "Daniel"}),
        ("I live in Boston.", {"location": "Boston"}),
        ("I'm based in SF", {"location": "San Francisco"}),  # city abbreviation
        ("I'm originally from Ohio but I live in Austin now", {"hometown": "Ohio", "location": "Austin"}),
        (
            "I used to live in Chicago, but I moved to Denver last year",
            {"location": "Denver"},
        ),  # newest place
        ("I'd like to apply for TTPS next year", {"target_programs": ["TTPS"], "timeline": "next year"}),
        ("We're considering the Quality Migrant Admission Scheme", {"target_programs": ["QMAS"]}),
        ("I'm on an IANG visa right now", {"current_visa": "IANG"}),
        ("I mostly use Python, Terraform and dbt", {"tools": ["Python", "Terraform", "dbt"]}),
        ("I prefer email over phone", {"preference_contact_method": {"prefers": "email", "over": "phone"}}),
        (
            "I'd rather have meetings in the morning",
            {"preference_contact_time": {"prefers": "have meetings in the morning"}},
        ),
        ("I plan to move to Canada within two years", {"timeline": "within two years"}),
    ],
)
def test_stated_facts_are_extracted(text: str, expected: dict[str, Any]) -> None:
    got = extracted(text)
    assert {key: got.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("My wife is a doctor", {"job_title"}),  # about the wife
        ("Can I apply for TTPS with a master's?", {"target_programs", "education"}),  # a question
        ("I'm not a nurse anymore", {"job_title"}),  # negated
        ("I want to get a PhD someday", {"education"}),  # a plan, not a degree
        ("I used to work at IBM", {"company"}),  # the past
        ("I'm 5 minutes away", {"age"}),  # a number that is not an age
        ("I'm turning 40 next month", {"age"}),  # a future age is not the current one
        ("I studied at Peking University", {"major"}),  # "at ..." is the school, not a major
        (
            "Can you send everything by email? I prefer that.",
            {"preference_general"},
        ),  # "that" is not explicit
        ("I'm 100% sure", {"age"}),  # a percentage
        ("How old are you?", {"age"}),
        ("I don't want to apply for QMAS", {"target_programs"}),  # negated intent
        ("My sister has two kids", {"children"}),  # someone else's children
        (
            "I'll look into it after lunch",
            {"intent_look_after_lunch"},
        ),  # a passing promise is not a durable intent
    ],
)
def test_what_is_not_stated_is_not_extracted(text: str, absent: set[str]) -> None:
    assert not absent & set(extracted(text))


def test_an_assistant_question_is_not_a_fact() -> None:
    assert extract_items([{"id": 1, "role": "assistant", "text": "So you're 34 and live in Boston?"}]) == []
