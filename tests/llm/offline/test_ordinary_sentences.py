"""Ordinary first-person sentences of durable facts become items (issue 45 part 4): where one lives and works,
name and job, family and pets with their names, allergies and diets, likes and dislikes, in English and
Chinese; and the same words in a question, a hypothetical or about someone else become none.

These are the phrasings the rules were developed on; ordinary_heldout.py holds others, written before the
rules and only measured. bench.extraction measures the rules on its own cases."""

from __future__ import annotations

import json
from typing import Any

import pytest

from strataflow.llm.offline.extract import extract_items


def items_of(*texts: str) -> list[dict[str, Any]]:
    messages = [
        {"id": index + 1, "role": "user", "time": f"2026-11-02T09:0{index}:00", "text": text}
        for index, text in enumerate(texts)
    ]
    return extract_items(messages)


def values_of(*texts: str) -> list[str]:
    return [json.dumps(item["value"], ensure_ascii=False).casefold() for item in items_of(*texts)]


STATED: list[tuple[str, list[str]]] = [
    # where one lives
    ("I live in Kraków.", ["kraków"]),
    ("I'm living in Porto these days.", ["porto"]),
    ("I've been living in Osaka since 2020.", ["osaka"]),
    ("I moved to Calgary last spring.", ["calgary"]),
    ("Moved to Leeds in June, loving it.", ["leeds"]),
    ("I moved again, now in Ghent.", ["ghent"]),
    ("I'm in Bergen now.", ["bergen"]),
    ("Currently based out of Denver.", ["denver"]),
    ("Home is Wellington these days.", ["wellington"]),
    ("Wellington is home now.", ["wellington"]),
    ("I just relocated to Hobart.", ["hobart"]),
    ("我住在洛阳。", ["洛阳"]),
    ("我现在在昆山。", ["昆山"]),
    ("现在住在宁波。", ["宁波"]),
    ("我又搬家了，现在在嘉兴。", ["嘉兴"]),
    ("我刚搬到常州。", ["常州"]),
    ("我定居在佛山。", ["佛山"]),
    ("我家住在温州。", ["温州"]),
    # where one works, and the job
    ("I work at Halden Labs.", ["halden labs"]),
    ("I work for a company called Norbridge.", ["norbridge"]),
    ("I left Varo and joined Pinecrest.", ["pinecrest"]),
    ("I'm a nurse.", ["nurse"]),
    ("I'm a welder at a shipyard.", ["welder"]),
    ("I work as a tram driver.", ["tram driver"]),
    ("By day I'm a radiographer.", ["radiographer"]),
    ("I'm a plumber by trade.", ["plumber"]),
    ("I teach maths at a primary school.", ["maths"]),
    ("My job is nursing.", ["nursing"]),
    ("I'm a nurse at Royal Infirmary.", ["nurse"]),
    ("我在网易上班。", ["网易"]),
    ("我在顺德一家工厂上班，做质检。", ["质检"]),
    ("我是一名消防员。", ["消防员"]),
    ("我是护士。", ["护士"]),
    ("我是做设计的。", ["设计"]),
    ("我在小米做硬件工程师。", ["小米", "硬件工程师"]),
    ("我离开了美的，去了格力。", ["格力"]),
    # names
    ("My name is Ines and I'm a nurse.", ["ines", "nurse"]),
    ("My name's Oluwaseun.", ["oluwaseun"]),
    ("I'm Hanna, nice to meet you.", ["hanna"]),
    ("Call me Teo.", ["teo"]),
    ("Everyone calls me Bex.", ["bex"]),
    ("我叫刘思远。", ["刘思远"]),
    ("我叫王芳，是一名律师。", ["王芳", "律师"]),
    ("大家都叫我小马。", ["小马"]),
    ("叫我阿飞就行。", ["阿飞"]),
    # family with names
    ("I've got two kids, Leo and Maya.", ["leo", "maya"]),
    ("I have two kids, Noor and Zain.", ["noor", "zain"]),
    ("My son Arlo just turned five.", ["arlo"]),
    ("My daughter's name is Ivy.", ["ivy"]),
    ("My husband Tom and I live in Cork.", ["tom", "cork"]),
    ("I have a daughter called Poppy.", ["poppy"]),
    ("We had a baby girl, Hazel.", ["hazel"]),
    ("我有两个孩子，一个叫果果，一个叫豆包。", ["果果", "豆包"]),
    ("我儿子叫乐乐。", ["乐乐"]),
    ("我女儿名叫悠悠。", ["悠悠"]),
    ("我有个女儿叫甜甜。", ["甜甜"]),
    ("我老公叫陈刚。", ["陈刚"]),
    # pets with names
    ("I have a dog named Rex.", ["rex"]),
    ("We have a dog called Pixel.", ["pixel"]),
    ("My cat is called Noodle.", ["noodle"]),
    ("My dog's name is Juno.", ["juno"]),
    ("We have two cats, Salt and Pepper.", ["salt", "pepper"]),
    ("I've got a hamster, his name is Nibbles.", ["nibbles"]),
    ("我养了一条狗，叫旺财。", ["旺财"]),
    ("我养了一只猫，名字叫橘子。", ["橘子"]),
    ("我家的猫叫年年。", ["年年"]),
    ("我们家有只狗叫球球。", ["球球"]),
    ("家里养了两只猫，一只叫花花，一只叫点点。", ["花花", "点点"]),
    ("我有一只柯基叫馒头。", ["馒头"]),
    # allergies
    ("I'm allergic to penicillin.", ["penicillin"]),
    ("I'm allergic to cats and dust.", ["cats", "dust"]),
    ("I'm allergic to latex, by the way.", ["latex"]),
    ("I have a peanut allergy.", ["peanut"]),
    ("I have a severe allergy to latex.", ["latex"]),
    ("I'm severely allergic to wasps.", ["wasps"]),
    ("我对青霉素过敏。", ["青霉素"]),
    ("我对猫毛过敏。", ["猫毛"]),
    ("我有花生过敏。", ["花生"]),
    ("我芒果过敏。", ["芒果"]),
    # diets
    ("I'm vegetarian.", ["vegetarian"]),
    ("I'm a vegan.", ["vegan"]),
    ("I've been pescatarian for years.", ["pescatarian"]),
    ("I keep kosher.", ["kosher"]),
    ("I only eat halal food.", ["halal"]),
    ("I'm gluten intolerant.", ["gluten"]),
    ("I don't eat meat.", ["meat"]),
    ("I never eat pork.", ["pork"]),
    ("I don't drink alcohol.", ["alcohol"]),
    ("我吃素。", ["素"]),
    ("我是素食主义者。", ["素食"]),
    ("我不吃香菜。", ["香菜"]),
    ("我从来不吃羊肉。", ["羊肉"]),
    ("我不喝牛奶。", ["牛奶"]),
    ("我不吃辣。", ["辣"]),
    # likes and dislikes
    ("I love hiking.", ["hiking"]),
    ("I'm a big fan of jazz.", ["jazz"]),
    ("I'm obsessed with sourdough baking.", ["sourdough baking"]),
    ("Not a fan of cilantro.", ["cilantro"]),
    ("I can't stand loud music.", ["loud music"]),
    ("I hate cilantro.", ["cilantro"]),
    ("My favourite food is ramen.", ["ramen"]),
    ("My favorite band is Blur.", ["blur"]),
    ("Sushi is my favourite.", ["sushi"]),
    ("我喜欢爬山。", ["爬山"]),
    ("我爱吃饺子。", ["饺子"]),
    ("我特别喜欢猫。", ["猫"]),
    ("我讨厌下雨天。", ["下雨天"]),
    ("我受不了烟味。", ["烟味"]),
    ("我最喜欢的水果是荔枝。", ["荔枝"]),
    ("我不喜欢吃甜食。", ["甜食"]),
]

NOT_STATED: list[tuple[str, list[str]]] = [
    # questions and hypotheticals
    ("Do you know anyone in Kraków?", ["kraków"]),
    ("Are there good vets in Porto?", ["porto"]),
    ("What if I moved to Calgary?", ["calgary"]),
    ("Should I get a dog named Rex?", ["rex"]),
    ("Can someone be allergic to penicillin?", ["penicillin"]),
    ("Is it hard to be vegetarian?", ["vegetarian"]),
    ("If I were a nurse I'd work nights.", ["nurse"]),
    ("Imagine I lived in Osaka.", ["osaka"]),
    ("If I had a cat I'd call her Luna.", ["luna"]),
    ("Would you eat pork?", ["pork"]),
    ("你对花生过敏吗？", ["花生"]),
    ("如果我住在厦门就好了。", ["厦门"]),
    ("要是我养狗，就叫它豆豆。", ["豆豆"]),
    ("素食健康吗？", ["素食"]),
    ("你喜欢爬山吗？", ["爬山"]),
    # someone else's facts
    ("My sister is allergic to shellfish.", ["shellfish"]),
    ("My brother lives in Dublin.", ["dublin"]),
    ("My friend has a dog named Rex.", ["rex"]),
    ("My mum is vegetarian.", ["vegetarian"]),
    ("My husband is a nurse.", ["nurse"]),
    ("Her cat is called Tiger.", ["tiger"]),
    ("My boss hates cilantro.", ["cilantro"]),
    ("我姐姐对芒果过敏。", ["芒果"]),
    ("我哥哥住在上海。", ["上海"]),
    ("我朋友养了一条狗，叫来福。", ["来福"]),
    ("我妈妈吃素。", ["素"]),
    ("我老公是医生。", ["医生"]),
    ("他不吃香菜。", ["香菜"]),
    # an aside is not an allergen
    ("I'm allergic to latex, by the way.", ["by the way"]),
    ("I don't eat pork, honestly.", ["honestly"]),
]


@pytest.mark.parametrize(("text", "wanted"), STATED)
def test_an_ordinary_first_person_statement_becomes_items(text: str, wanted: list[str]) -> None:
    values = values_of(text)
    assert all(any(word in value for value in values) for word in wanted), values


@pytest.mark.parametrize(("text", "forbidden"), NOT_STATED)
def test_a_question_a_hypothetical_or_someone_elses_fact_is_not_the_subjects(
    text: str, forbidden: list[str]
) -> None:
    values = values_of(text)
    assert not any(word in value for word in forbidden for value in values), values
