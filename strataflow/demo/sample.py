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

This module schedules the sessions, weaves the statements into timed dialogs and writes the files. What the
subjects say, with the facts each sentence states, is in strataflow.demo.sample_statements; the word tables
both draw from are in strataflow.demo.sample_vocabulary.
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

from strataflow.demo.sample_statements import client_statements, team_statements
from strataflow.demo.sample_vocabulary import (
    ASKS,
    COMPONENTS,
    CONSULTANT_NOTES,
    FILLER_EN,
    FILLER_ZH,
    GREETINGS_ZH,
    PEOPLE,
    PROGRAMS,
    PROJECTS,
    ROLES,
)


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


def _consulting(rng: random.Random, subjects: int, weeks: int, start: date, tz: ZoneInfo) -> Dialog:
    dialog = Dialog("consulting", tz)
    for number in range(1, subjects + 1):
        subject = f"client_{number:02d}"
        statements = client_statements(rng)
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


def _projects(rng: random.Random, subjects: int, weeks: int, start: date, tz: ZoneInfo) -> Dialog:
    dialog = Dialog("team", tz)
    for number in range(subjects):
        project = PROJECTS[number % len(PROJECTS)] + ("" if number < len(PROJECTS) else str(number))
        subject, team = f"proj_{project}", rng.sample(PEOPLE, 4)
        statements = team_statements(rng, project, team)
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


def first_day(last: date, weeks: int) -> date:
    """The first day of a sample of `weeks` weeks (7 x weeks days) that ends on `last`."""
    return last - timedelta(days=weeks * 7 - 1)


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
    start = first_day(last, weeks)
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
