"""The closed vocabulary of profile keys (snake_case), the seed 000 profile sections they belong to, and the
one key normaliser every writer of keys uses.

Extraction (any model, the offline provider included) uses these keys for profile facts; other memory keys
are free lower snake_case (decision_<topic>, status_<topic>, preference_<topic>, person_<name>, ...).
`normalize_key` turns any spelling of a key into that form: camelCase and seed 000's field names map to
the vocabulary (`currentJobTitle` -> `job_title`, `hasHongKongEmployer` -> `has_hk_employer`), other text
to lower snake_case (`Job Title` -> `job_title`). docs/offline-provider.md lists the vocabulary.
"""

from __future__ import annotations

import re

PROFILE_SECTIONS: dict[str, tuple[str, ...]] = {
    "basic": (
        "name",
        "age",
        "birth_year",
        "gender",
        "location",
        "hometown",
        "nationality",
        "phone",
        "email",
        "languages",
    ),
    "career": (
        "education",
        "university",
        "major",
        "job_title",
        "company",
        "industry",
        "years_of_experience",
        "annual_income",
        "monthly_income",
        "income_currency",
        "has_tech_background",
        "skills",
        "tools",
    ),
    "immigration": (
        "target_programs",
        "timeline",
        "budget",
        "budget_currency",
        "investment_amount",
        "has_hk_employer",
        "target_city",
        "current_visa",
        "language_scores",
    ),
    "family": ("marital_status", "children", "spouse", "family_members", "family_support"),
}

PROFILE_KEYS: frozenset[str] = frozenset(key for keys in PROFILE_SECTIONS.values() for key in keys)

# Seed 000's field names (and their usual variants) after snake-casing -> the vocabulary key.
KEY_ALIASES: dict[str, str] = {
    "current_job_title": "job_title",
    "current_industry": "industry",
    "current_company": "company",
    "total_years_of_experience": "years_of_experience",
    "annual_salary": "annual_income",
    "monthly_salary": "monthly_income",
    "target_category": "target_programs",
    "target_categories": "target_programs",
    "target_program": "target_programs",
    "immigration_timeline": "timeline",
    "has_hong_kong_employer": "has_hk_employer",
    "hk_employer": "has_hk_employer",
    "tech_background": "has_tech_background",
    "investment_capacity": "investment_amount",
    "current_location": "location",
    "highest_education": "education",
    "has_children": "children",
    "language_skills": "languages",
    "birthyear": "birth_year",
    "year_of_birth": "birth_year",
}

# The seed 000 program category enum (save_user_memory's `category`), stored as spelled here.
PROGRAM_CATEGORIES: tuple[str, ...] = ("QMAS", "GEP", "IANG", "TTPS", "CIES", "TECHTAS")

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
SNAKE_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def normalize_key(key: str) -> str:
    """The snake_case key of any spelling: 'currentJobTitle' -> job_title, 'Job Title' -> job_title,
    'hasHKEmployer' -> has_hk_employer. Raises ValueError naming the key when no letter is left."""
    spaced = _CAMEL_BOUNDARY.sub("_", key.strip())
    name = re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")
    name = KEY_ALIASES.get(name, name)
    if not SNAKE_KEY.match(name):
        raise ValueError(
            f"memory key {key!r}: use lower snake_case letters and digits starting with a letter"
        )
    return name


def program_category(value: str | None) -> str | None:
    """A seed 000 program category from any spelling ('TechTAS', 'ttps'), or None when it is not one."""
    if not value:
        return None
    upper = value.strip().upper()
    return upper if upper in PROGRAM_CATEGORIES else None


def section_of(key: str) -> str | None:
    """The seed 000 section of a profile key, or None for a non-profile key."""
    for section, keys in PROFILE_SECTIONS.items():
        if key in keys:
            return section
    return None
