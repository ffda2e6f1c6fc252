"""Enums shared across layers: message roles, intents, memory kinds."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"


class Intent(StrEnum):
    """Rule-based message intent at ingest (docs/ingest.md)."""

    question = "question"
    request = "request"
    statement = "statement"
    decision = "decision"
    status_update = "status_update"
    feedback = "feedback"
    greeting = "greeting"
    other = "other"


class MemoryKind(StrEnum):
    """The one L2 kind enum. Seed 000 FACT/PREFERENCE/INTENT; seed 001 meta/status/decision/preference;
    seed 003 user -> fact or preference, project -> meta, feedback, reference; seed 004 observation.
    hot_summary is internal: the nightly compact summary of a scope's last 50 messages (seed 001)."""

    fact = "fact"
    preference = "preference"
    intent = "intent"
    meta = "meta"
    status = "status"
    decision = "decision"
    feedback = "feedback"
    reference = "reference"
    observation = "observation"
    hot_summary = "hot_summary"


# Seed 000 default importance by kind; other kinds default to 50.
DEFAULT_IMPORTANCE: dict[MemoryKind, int] = {
    MemoryKind.fact: 70,
    MemoryKind.preference: 60,
    MemoryKind.intent: 80,
    MemoryKind.decision: 75,
    MemoryKind.status: 65,
    MemoryKind.feedback: 55,
}
