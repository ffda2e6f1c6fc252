"""The closed vocabulary of profile keys (snake_case) and the seed 000 profile sections they belong to.

Extraction (any model, the offline provider included) uses these keys for profile facts; other memory keys
are free lower snake_case (decision_<topic>, status_<topic>, preference_<topic>, person_<name>, ...).
"""

from __future__ import annotations

PROFILE_SECTIONS: dict[str, tuple[str, ...]] = {
    "basic": ("name", "age", "gender", "location", "hometown", "nationality", "phone", "email", "languages"),
    "career": (
        "education",
        "university",
        "major",
        "job_title",
        "company",
        "industry",
        "years_of_experience",
        "annual_income",
        "skills",
        "tools",
    ),
    "immigration": (
        "target_programs",
        "timeline",
        "budget",
        "target_city",
        "current_visa",
        "language_scores",
    ),
    "family": ("marital_status", "children", "spouse", "family_members"),
}

PROFILE_KEYS: frozenset[str] = frozenset(key for keys in PROFILE_SECTIONS.values() for key in keys)


def section_of(key: str) -> str | None:
    """The seed 000 section of a profile key, or None for a non-profile key."""
    for section, keys in PROFILE_SECTIONS.items():
        if key in keys:
            return section
    return None
