"""What the ranking reads from a query: named speakers, when-questions, periods, set questions."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from strataflow.retrieval.query_reading import (
    has_time_expression,
    named_period,
    read_query,
    refers_to_subject,
    without_speakers,
    without_subject,
)

TZ = ZoneInfo("UTC")
NOW = datetime(2026, 3, 18, 15, 0, tzinfo=UTC)
SPEAKERS = ["Melanie", "Caroline", "Chen Wei"]


@pytest.mark.parametrize(
    ("query", "speakers"),
    [
        ("What does Melanie do to destress?", {"Melanie"}),  # a first name as a word
        ("what does melanie like", {"Melanie"}),  # any case
        ("What did Mel paint?", set()),  # a nickname is not the name
        ("What have Caroline and Melanie both painted?", {"Caroline", "Melanie"}),
        ("Where does Chen live?", {"Chen Wei"}),  # the first word of a two-word name
        ("How is the Melaniefield project going?", set()),  # a name inside another word does not count
    ],
)
def test_named_speakers(query, speakers):
    assert read_query(query, SPEAKERS, TZ, NOW).speakers == speakers


@pytest.mark.parametrize(
    ("query", "stripped"),
    [
        ("What are Melanie's pets' names?", "What are pets' names?"),  # the possessive goes with the name
        ("What did Chen Wei say?", "What did say?"),  # the whole name first, not "Chen" alone
        ("Melanie", "Melanie"),  # nothing would be left: keep the query
    ],
)
def test_without_speakers(query, stripped):
    assert without_speakers(query, ["Melanie", "Chen Wei"]) == stripped


@pytest.mark.parametrize(
    ("query", "subject", "stripped"),
    [
        ("Which city is Marek originally from?", "marek_oduya", "Which city is originally from?"),
        ("What is Priya's job?", "priya", "What is job?"),  # the possessive goes with the name
        ("What car does he own?", "u-17", "What car does own?"),  # a pronoun names the subject too
        ("她有宠物吗？", "zhao_ruoxi", "有宠物吗？"),
        ("她的饮食有什么讲究？", "zhao_ruoxi", "饮食有什么讲究？"),
        ("林晓雯老家在哪？", "林晓雯", "老家在哪？"),  # a CJK name is matched without word edges
        ("其他人怎么看？", "zhao_ruoxi", "其他人怎么看？"),  # 其他 ("other") is no pronoun
        ("Where did Dorothy go?", "dora", "Where did Dorothy go?"),  # a longer word is another name
        ("Dora", "dora", "Dora"),  # nothing would be left: keep the query
        ("What car does he own?", None, "What car does he own?"),  # no subject: the query as it is
    ],
)
def test_without_subject(query, subject, stripped):
    assert without_subject(query, subject) == stripped
    assert read_query(query, [], TZ, NOW, subject).names_subject == (stripped != query)


@pytest.mark.parametrize(
    ("query", "asks_when", "asks_for_set"),
    [
        ("When did Melanie run a charity race?", True, False),
        ("How long ago was Caroline's 18th birthday?", True, False),
        ("what year did they move?", True, False),
        ("他什么时候去的上海？", True, False),  # Chinese "when"
        ("What activities does Melanie partake in?", False, True),  # a plural head noun
        ("Which cities has Jon visited?", False, True),
        ("What subject have Caroline and Melanie both painted?", False, True),  # "both"
        ("How many times has Melanie gone to the beach?", False, True),
        ("What does Melanie do to destress?", False, False),  # "does" is not a plural noun
        ("What is Caroline's identity?", False, False),
    ],
)
def test_when_and_set_questions(query, asks_when, asks_for_set):
    reading = read_query(query, SPEAKERS, TZ, NOW)
    assert (reading.asks_when, reading.asks_for_set) == (asks_when, asks_for_set)


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=TZ)


@pytest.mark.parametrize(
    ("query", "inside", "outside"),
    [
        # a day covers the week before it (what was told that day about the days before) and the next day
        ("What did Maria share on 16 June, 2023?", [at(2023, 6, 16, 9), at(2023, 6, 10)], [at(2023, 6, 19)]),
        ("What painting did she show on October 13, 2023?", [at(2023, 10, 13)], [at(2023, 11, 13)]),
        # a month and year: that month and the next (a turn of July may tell of June)
        (
            "Which class did she start in December 2023?",
            [at(2023, 12, 5), at(2024, 1, 20)],
            [at(2023, 11, 30)],
        ),
        # a month alone: that month of any year
        ("When did Melanie go camping in June?", [at(2021, 6, 2), at(2023, 7, 1)], [at(2023, 5, 31)]),
        ("How many times has she gone to the beach in 2023?", [at(2023, 1, 1)], [at(2024, 1, 1)]),
        # relative to now (2026-03-18, a Wednesday)
        ("what did I say yesterday", [at(2026, 3, 17, 23)], [at(2026, 3, 18, 1)]),
        ("What did we decide last week?", [at(2026, 3, 9), at(2026, 3, 15, 23)], [at(2026, 3, 16)]),
        ("我上个月做了什么", [at(2026, 2, 1)], [at(2026, 3, 1)]),
        ("what happened 2 weeks ago", [at(2026, 3, 4)], [at(2026, 3, 18)]),
    ],
)
def test_named_period(query, inside, outside):
    period = named_period(query, TZ, NOW)
    assert period is not None
    assert all(period.contains(moment) for moment in inside)
    assert not any(period.contains(moment) for moment in outside)


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what you did?",  # "may" the verb
        "What is the capital of France?",
        "What did Melanie paint?",
    ],
)
def test_a_query_without_a_period(query):
    assert named_period(query, TZ, NOW) is None


@pytest.mark.parametrize(
    ("turn", "states_time"),
    [
        ("I ran a charity race last Saturday!", True),
        ("We went camping two weekends ago.", True),
        ("I painted that lake sunrise in 2022.", True),
        ("昨天我们去了医院", True),
        ("That sounds amazing, I love it!", False),
        ("Painting helps me express my feelings.", False),
    ],
)
def test_has_time_expression(turn, states_time):
    assert has_time_expression(turn) is states_time


def test_first_person_and_agent_phrasing_refer_to_an_opaque_subject() -> None:
    for query, dense in (
        ("What is my job?", "What is job?"),
        ("What is the customer's occupation?", "What is occupation?"),
        ("用户的职业是什么？", "职业是什么？"),
        ("我是做什么工作的？", "是做什么工作的？"),
    ):
        assert refers_to_subject(query)
        assert without_subject(query, "u48213") == dense
    # another person named, a how-to question's impersonal I: no reference to the subject
    for query in ("What is Priya's job?", "How do I configure BGP route reflectors on a core router?"):
        assert not refers_to_subject(query)
        assert without_subject(query, "u48213") == query
    # the subject named: the I is the asker's, kept in the embedding's text
    assert without_subject("What should I not offer Obi?", "obi_x") == "What should I not offer ?"
