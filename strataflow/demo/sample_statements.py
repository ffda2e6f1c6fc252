"""What the sample's subjects state (strataflow.demo.sample weaves these into dialogs and writes the files):
the sentences a consulting client or a project team says, each paired with the facts it states as
(kind, key, value), in the canonical form extraction must give (ints for numbers, "30+" for vague ages, full
school names for aliases, program abbreviations, decision/status/person objects for teams). These pairs are
the ground truth written to facts/facts.jsonl.

Phrasings and values are drawn from the word tables in strataflow.demo.sample_vocabulary with the caller's
seeded random generator, so the order of the draws here is part of the sample's determinism.
"""

from __future__ import annotations

import random
from typing import Any

from strataflow.demo.sample_vocabulary import (
    CITIES,
    CN_NUM,
    COMPONENTS,
    DECISIONS,
    JOBS,
    MAJORS,
    PROGRAMS,
    ROLES,
    SCHOOLS,
)


def client_statements(rng: random.Random) -> list[tuple[str, list[tuple[str, str, Any]]]]:
    """What one client states, as (text, facts) pairs, in random phrasings."""
    age = rng.randint(26, 45)
    vague = rng.random() < 0.5
    if vague:
        decade = age // 10 * 10
        text = rng.choice(
            [f"我{decade}多岁了", f"我今年{'三' if decade == 30 else '四' if decade == 40 else '二'}十几岁"]
        )
        age_value: Any = f"{decade}+" if "多" in text else f"{decade}-{decade + 9}"
    else:
        text, age_value = rng.choice([f"我今年{age}岁", f"我{age}岁了"]), age
    school_alias, school = rng.choice(SCHOOLS)
    major, job, city = rng.choice(MAJORS), rng.choice(JOBS), rng.choice(CITIES)
    degree = rng.choice(["本科", "硕士", "博士"])
    years = rng.randint(2, 15)
    salary = rng.choice([35, 50, 60, 80, 100, 120, 150])
    program_zh, program = rng.choice(PROGRAMS)
    statements = [
        (
            rng.choice([f"{text}。", f"{text}，想了解一下香港身份。", f"{text}，最近在考虑去香港发展。"]),
            [("fact", "age", age_value)],
        ),
        (
            rng.choice(
                [
                    f"我{degree}是{school_alias}毕业的，学的{major}。",
                    f"{degree}读的{school_alias}，专业是{major}。",
                ]
            ),
            [("fact", "education", degree), ("fact", "university", school), ("fact", "major", major)],
        ),
        (
            rng.choice(
                [f"现在在一家互联网公司做{job}，工作{years}年了。", f"我是{job}，已经工作{years}年。"]
            ),
            [("fact", "job_title", job), ("fact", "years_of_experience", years)],
        ),
        (
            rng.choice([f"年薪大概{salary}万。", f"收入的话，一年差不多{salary}万吧。"]),
            [("fact", "annual_income", salary * 10000)],
        ),
        (rng.choice([f"我现在在{city}生活。", f"目前常住{city}。"]), [("fact", "location", city)]),
    ]
    if rng.random() < 0.6:
        kids = rng.randint(1, 3)
        statements.append(
            (
                f"我已婚，有{CN_NUM[kids]}个孩子。",
                [("fact", "marital_status", "已婚"), ("fact", "children", kids)],
            )
        )
    else:
        statements.append(("我还没结婚。", [("fact", "marital_status", "未婚")]))
    statements.append(
        (
            rng.choice([f"我想申请{program_zh}。", f"比较想走{program_zh}这条路。"]),
            [("intent", "target_programs", [program])],
        )
    )
    statements.append(
        (rng.choice(["我希望尽快办下来，最好半年内。", "我更喜欢线上沟通，白天不太方便接电话。"]), [])
    )
    rng.shuffle(statements)
    return statements


def team_statements(rng: random.Random, project: str, team: list[str]) -> list[tuple[str, str, list]]:
    """(speaker, text, facts) a team states over the weeks."""
    out: list[tuple[str, str, list]] = []
    for person, role in zip(team, rng.sample(ROLES, len(team)), strict=False):
        out.append(
            (
                rng.choice(team),
                f"{person} is our {role} on {project.title()}.",
                [("fact", f"person_{person.lower()}", {"name": person, "role": role})],
            )
        )
    for topic, choice, reason in rng.sample(DECISIONS, 3):
        phrase = rng.choice(
            [
                f"We decided to use {choice} for {topic} because {reason}.",
                f"Decision: we'll go with {choice} for {topic}, since {reason}.",
            ]
        )
        out.append(
            (
                rng.choice(team),
                phrase,
                [("decision", f"decision_{topic}", {"decision": choice, "reason": reason})],
            )
        )
    for component in rng.sample(COMPONENTS, 3):
        progress = rng.choice([20, 40, 60, 75, 90])
        phrase = rng.choice(
            [
                f"Status update: the {component} is about {progress}% done.",
                f"The {component} is {progress}% complete, on track for Friday.",
            ]
        )
        key = "status_" + component.replace(" ", "_").lower()
        out.append(
            (rng.choice(team), phrase, [("status", key, {"status": "in_progress", "progress": progress})])
        )
    out.append(
        (
            team[0],
            rng.choice(
                [
                    "I prefer async standups in the channel over morning calls.",
                    "I'd rather keep pull requests under 300 lines.",
                ]
            ),
            [],
        )
    )
    out.append(
        (
            team[-1],
            rng.choice(
                [
                    "The new onboarding docs are really helpful, great job.",
                    "The staging deploy is too slow, it takes forty minutes.",
                ]
            ),
            [],
        )
    )
    rng.shuffle(out)
    return out
