"""Deterministic bilingual sample data: `strataflow sample --out DIR`.

Writes, from templates and one seeded random generator (same seed + end date => identical files; no real
personal data, every name and company is invented):
- DIR/consulting_zh.jsonl: Chinese immigration-consulting dialogs, namespace "consulting", one subject per
  client (client_NN), the client as role user and the consultant as role assistant. Clients state age
  (exact or vague: 30多岁, 二十几岁), education, school (often by alias: 浙大), major, job, years of work,
  salary (年薪大概80万), city, family, target programs (优才/QMAS, 高才通/TTPS, ...), preferences, intents.
- DIR/project_en.jsonl: English project-team chats, namespace "team", one subject per project (proj_<name>),
  members as role user (speaker in metadata.speaker), a bot as role assistant: decisions with reasons,
  status with progress, preferences, feedback, people and roles.
- DIR/facts/facts.jsonl: one line per stated fact {"subject_id", "conversation_id", "source_message_id",
  "kind", "key", "value"} with the canonical value extraction must give: ints for numbers (800000 for
  80万), "30+" / "20-29" for vague ages, full names for aliases (浙江大学), official program abbreviations,
  and for teams {"decision", "reason"}, {"status", "progress"}, {"name", "role"} values.
- DIR/assets/: programs.md (a markdown guide), team_roster.csv (a table), release_plan.json.

Messages span `weeks` weeks ending on `end_date` (default: yesterday in the configured zone), so with the
default six weeks the last 30 days stay in L1 after ingest.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel

SCHOOLS = [
    ("浙大", "浙江大学"),
    ("复旦", "复旦大学"),
    ("北大", "北京大学"),
    ("清华", "清华大学"),
    ("港大", "香港大学"),
    ("中科大", "中国科学技术大学"),
    ("武汉大学", "武汉大学"),
    ("同济", "同济大学"),
]
MAJORS = ["计算机科学", "金融", "电子工程", "市场营销", "数学", "会计", "软件工程", "生物医学"]
JOBS = ["前端开发工程师", "数据分析师", "产品经理", "投资经理", "算法工程师", "财务经理", "后端开发工程师"]
CITIES = ["杭州", "上海", "深圳", "北京", "广州", "成都", "南京"]
PROGRAMS = [
    ("优才计划", "QMAS"),
    ("高才通", "TTPS"),
    ("专才计划", "ASMTP"),
    ("IANG", "IANG"),
    ("投资移民", "CIES"),
]
CN_NUM = {1: "一", 2: "两", 3: "三"}
GREETINGS_ZH = [
    "您好，我想咨询一下香港身份的事情。",
    "你好，之前约了今天聊一下移民方案。",
    "顾问您好，又来打扰了。",
]
ASKS = {
    "age": "请问您今年多大？",
    "education": "方便说一下您的学历和毕业院校吗？",
    "job_title": "您现在做什么工作，工作几年了？",
    "annual_income": "大概的收入水平是多少？",
    "location": "目前在哪个城市生活？",
    "marital_status": "家庭情况方便介绍一下吗？",
    "target_programs": "您比较倾向哪个计划？",
    "": "您对办理时间或者沟通方式有什么要求吗？",
}
CONSULTANT_NOTES = [
    "好的，我记下了。",
    "明白，这个条件对申请很有帮助。",
    "收到，我稍后整理一份材料清单给您。",
    "根据您的情况，{program}的通过率会比较高。",
    "没问题，下次我们再细聊时间安排。",
]
FILLER_ZH = [
    "最近工作有点忙，周末才有空看材料。",
    "好的，谢谢您！",
    "材料大概需要准备多久？",
    "我再和家里人商量一下。",
]

PEOPLE = [
    "Avery",
    "Blake",
    "Casey",
    "Devon",
    "Emery",
    "Finley",
    "Harper",
    "Jordan",
    "Kendall",
    "Logan",
    "Morgan",
    "Parker",
    "Quinn",
    "Riley",
    "Rowan",
    "Sawyer",
]
PROJECTS = ["atlas", "beacon", "cobalt", "delta", "ember", "falcon"]
ROLES = ["tech lead", "product manager", "designer", "QA engineer", "backend engineer", "data engineer"]
DECISIONS = [
    ("database", "PostgreSQL", "it already runs our analytics"),
    ("ci", "GitHub Actions", "it is cheaper"),
    ("frontend", "React", "the team knows it best"),
    ("queue", "Redis", "it keeps the stack small"),
    ("deploys", "weekly releases", "QA needs a full day per release"),
    ("hosting", "Kubernetes", "we need autoscaling"),
]
COMPONENTS = ["login page", "billing API", "search service", "mobile app", "data pipeline", "admin dashboard"]
FILLER_EN = [
    "Morning all!",
    "Can someone share the meeting link?",
    "I'll look into it after lunch.",
    "Thanks, that helps.",
    "Any blockers today?",
    "Let's sync tomorrow at 10.",
]


class SampleSummary(BaseModel):
    messages: int
    subjects: int
    facts: int
    assets: int


@dataclass
class Dialog:
    """Messages and stated facts being built for one file."""

    namespace: str
    tz: ZoneInfo
    messages: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    turns: dict[str, int] = field(default_factory=dict)

    def say(
        self,
        subject: str,
        conversation: str,
        role: str,
        content: str,
        at: datetime,
        speaker: str | None = None,
        facts: list[tuple[str, str, Any]] | None = None,
    ) -> None:
        self.turns[conversation] = self.turns.get(conversation, 0) + 1
        message_id = f"{conversation}-{self.turns[conversation]:03d}"
        record: dict[str, Any] = {
            "namespace": self.namespace,
            "conversation_id": conversation,
            "subject_id": subject,
            "source_message_id": message_id,
            "role": role,
            "content": content,
            "created_at": at.astimezone(self.tz).isoformat(),
            "metadata": {"speaker": speaker} if speaker else {},
        }
        self.messages.append(record)
        for kind, key, value in facts or []:
            self.facts.append(
                {
                    "subject_id": subject,
                    "conversation_id": conversation,
                    "source_message_id": message_id,
                    "kind": kind,
                    "key": key,
                    "value": value,
                }
            )


def _session_times(
    rng: random.Random, start: date, weeks: int, per_week: int, tz: ZoneInfo
) -> list[datetime]:
    times = []
    for week in range(weeks):
        for day in sorted(rng.sample(range(7), per_week)):
            moment = time(rng.randint(9, 20), rng.choice([0, 10, 20, 30, 40, 50]))
            times.append(datetime.combine(start + timedelta(days=week * 7 + day), moment, tzinfo=tz))
    return times


def _client_statements(rng: random.Random) -> list[tuple[str, list[tuple[str, str, Any]]]]:
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


def _consulting(rng: random.Random, subjects: int, weeks: int, start: date, tz: ZoneInfo) -> Dialog:
    dialog = Dialog("consulting", tz)
    for number in range(1, subjects + 1):
        subject = f"client_{number:02d}"
        statements = _client_statements(rng)
        sessions = _session_times(rng, start, weeks, 2, tz)
        for index, at in enumerate(sessions):
            conversation = f"{subject}-s{index + 1:02d}"
            dialog.say(subject, conversation, "user", rng.choice(GREETINGS_ZH), at)
            for _ in range(rng.randint(2, 4)):
                at += timedelta(minutes=rng.randint(1, 4))
                if statements and rng.random() < 0.7:
                    text, facts = statements.pop()
                    dialog.say(subject, conversation, "assistant", ASKS[facts[0][1] if facts else ""], at)
                    at += timedelta(minutes=1)
                    dialog.say(subject, conversation, "user", text, at, facts=facts)
                else:
                    dialog.say(subject, conversation, "user", rng.choice(FILLER_ZH), at)
                at += timedelta(minutes=1)
                note = rng.choice(CONSULTANT_NOTES).format(program=rng.choice(PROGRAMS)[0])
                dialog.say(subject, conversation, "assistant", note, at)
    return dialog


def _team_statements(rng: random.Random, project: str, team: list[str]) -> list[tuple[str, str, list]]:
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


def _projects(rng: random.Random, subjects: int, weeks: int, start: date, tz: ZoneInfo) -> Dialog:
    dialog = Dialog("team", tz)
    for number in range(subjects):
        project = PROJECTS[number % len(PROJECTS)] + ("" if number < len(PROJECTS) else str(number))
        subject, team = f"proj_{project}", rng.sample(PEOPLE, 4)
        statements = _team_statements(rng, project, team)
        for index, at in enumerate(_session_times(rng, start, weeks, 3, tz)):
            conversation = f"{subject}-c{index + 1:02d}"
            for _ in range(rng.randint(3, 6)):
                at += timedelta(minutes=rng.randint(1, 6))
                if statements and rng.random() < 0.5:
                    speaker, text, facts = statements.pop()
                    dialog.say(subject, conversation, "user", text, at, speaker=speaker, facts=facts)
                else:
                    dialog.say(
                        subject, conversation, "user", rng.choice(FILLER_EN), at, speaker=rng.choice(team)
                    )
            if rng.random() < 0.3:
                dialog.say(
                    subject,
                    conversation,
                    "assistant",
                    "Noted, I added this to the project log.",
                    at + timedelta(minutes=1),
                )
    return dialog


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def _write_assets(directory: Path, rng: random.Random) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    programs = "\n".join(
        f"## {zh} ({code})\n\n{zh}（{code}）是香港的人才入境计划之一。申请人需要准备学历证明、"
        f"工作证明和收入证明。一般审批时间为{rng.randint(3, 9)}个月。\n"
        for zh, code in PROGRAMS
    )
    (directory / "programs.md").write_text(
        f"# 香港人才计划简介\n\n本文件为示例资料，内容为虚构。\n\n{programs}", encoding="utf-8"
    )
    with (directory / "team_roster.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["name", "role", "project", "since"])
        for index, person in enumerate(PEOPLE[:10]):
            writer.writerow(
                [
                    person,
                    ROLES[index % len(ROLES)],
                    PROJECTS[index % 3],
                    f"202{rng.randint(1, 5)}-0{rng.randint(1, 9)}",
                ]
            )
    plan = {
        "project": "atlas",
        "milestones": [{"name": c, "target_week": rng.randint(1, 12)} for c in COMPONENTS[:4]],
    }
    (directory / "release_plan.json").write_text(
        json.dumps(plan, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return 3


def write_sample(
    out: Path,
    subjects: int = 3,
    weeks: int = 6,
    seed: int = 7,
    end_date: date | None = None,
    tz: ZoneInfo | None = None,
) -> SampleSummary:
    """Write the sample into `out` (see the module docstring); deterministic for its arguments."""
    tz = tz or ZoneInfo("UTC")
    last = end_date or (datetime.now(tz).date() - timedelta(days=1))
    start = last - timedelta(days=weeks * 7 - 1)
    rng = random.Random(f"{seed}:{last.isoformat()}:{subjects}:{weeks}")
    out.mkdir(parents=True, exist_ok=True)
    consulting = _consulting(rng, subjects, weeks, start, tz)
    projects = _projects(rng, subjects, weeks, start, tz)
    _write_jsonl(out / "consulting_zh.jsonl", consulting.messages)
    _write_jsonl(out / "project_en.jsonl", projects.messages)
    (out / "facts").mkdir(exist_ok=True)
    facts = consulting.facts + projects.facts
    _write_jsonl(out / "facts" / "facts.jsonl", facts)
    assets = _write_assets(out / "assets", rng)
    return SampleSummary(
        messages=len(consulting.messages) + len(projects.messages),
        subjects=subjects * 2,
        facts=len(facts),
        assets=assets,
    )
