"""Held-out ordinary sentences for the offline rules (issue 45 part 4), written BEFORE the rules for ordinary
first-person facts and never used to tune them: run it only to measure.

    python -m tests.llm.offline.ordinary_heldout

Each case is one user message, the values its items must hold (case-folded, inside some item's value) and
the values no item may hold (another person's fact, a question, a hypothetical). Prints recall (wanted values
found / wanted values) and the violations. Not collected by pytest (no test_ prefix); the phrasings the rules
were developed on are in test_ordinary_sentences.py.
"""

from __future__ import annotations

import json
import sys

from strataflow.llm.offline.extract import extract_items

# (message, values that must be in some item's value, values no item's value may hold)
CASES: list[tuple[str, list[str], list[str]]] = [
    # where one lives
    ("These days I'm living in Tallinn.", ["tallinn"], []),
    ("I recently relocated to Leipzig for good.", ["leipzig"], []),
    ("My home is in Valparaíso.", ["valparaíso"], []),
    ("We settled in Adelaide two years ago.", ["adelaide"], []),
    ("我目前定居在威海。", ["威海"], []),
    ("我家在扬州。", ["扬州"], []),
    ("我搬到了绍兴，已经住了半年。", ["绍兴"], []),
    # work and job
    ("I'm employed by Hollis Freight as a dispatcher.", ["hollis freight", "dispatcher"], []),
    ("I teach biology at a secondary school.", ["biology"], []),
    ("By profession I'm a pharmacist.", ["pharmacist"], []),
    ("我在一家医院当药剂师。", ["药剂师"], []),
    ("我是做会计的。", ["会计"], []),
    ("我在比亚迪上班。", ["比亚迪"], []),
    # names
    ("The name's Rohan, by the way.", ["rohan"], []),
    ("Hi, I'm Beatriz.", ["beatriz"], []),
    ("我的名字叫周晓梅。", ["周晓梅"], []),
    ("朋友们都叫我阿宁。", ["阿宁"], []),
    # family with names
    ("I have a son, Mateo, and a daughter, Lucia.", ["mateo", "lucia"], []),
    ("My little girl is called Freya.", ["freya"], []),
    ("We've got three boys: Sam, Alfie and Jack.", ["sam", "alfie", "jack"], []),
    ("我女儿叫思思。", ["思思"], []),
    ("我有个儿子，名叫天天。", ["天天"], []),
    ("我家老大叫壮壮，老二叫妞妞。", ["壮壮", "妞妞"], []),
    # pets with names
    ("Our dog is a border collie called Skye.", ["skye"], []),
    ("I've got a cat named Mochi.", ["mochi"], []),
    ("We keep two rabbits, Bean and Clover.", ["bean", "clover"], []),
    ("我家有只猫叫咪咪。", ["咪咪"], []),
    ("我养了只鹦鹉，它叫小蓝。", ["小蓝"], []),
    ("家里有两条狗，一条叫大黄，一条叫小黑。", ["大黄", "小黑"], []),
    # allergies and diets
    ("I'm allergic to bee stings.", ["bee sting"], []),
    ("Shellfish gives me a bad allergic reaction.", ["shellfish"], []),
    ("I can't eat nuts, I'm allergic.", ["nuts"], []),
    ("I eat a vegan diet.", ["vegan"], []),
    ("I don't eat beef.", ["beef"], []),
    ("我对海鲜过敏。", ["海鲜"], []),
    ("我花粉过敏。", ["花粉"], []),
    ("我是吃素的。", ["素"], []),
    ("我不吃牛肉。", ["牛肉"], []),
    ("我不能吃辣的。", ["辣"], []),
    # likes and dislikes
    ("I really enjoy gardening.", ["gardening"], []),
    ("I'm really into bouldering.", ["bouldering"], []),
    ("I absolutely hate mushrooms.", ["mushrooms"], []),
    ("My favourite sport is tennis.", ["tennis"], []),
    ("我超级喜欢看动漫。", ["动漫"], []),
    ("我很讨厌香水味。", ["香水"], []),
    ("我最爱吃火锅。", ["火锅"], []),
    ("我最喜欢的运动是游泳。", ["游泳"], []),
    # nothing of the subject's: questions, hypotheticals, someone else
    ("Do you live in Berlin?", [], ["berlin"]),
    ("Is it normal to be allergic to cats?", [], ["cat"]),
    ("If I had a dog I would call him Rocket.", [], ["rocket"]),
    ("My brother is allergic to peanuts.", [], ["peanut"]),
    ("My wife's name is Sofia and she's a dentist.", [], ["dentist"]),
    ("Would a vegan diet be healthy for me?", [], ["vegan"]),
    ("你住在哪里？", [], []),
    ("如果我养猫，我会叫它团子。", [], ["团子"]),
    ("我同事对芒果过敏。", [], ["芒果"]),
    ("我老公叫李强，是个警察。", [], ["警察"]),
    ("吃素对身体好吗？", [], ["素"]),
    ("要是我住在大理就好了。", [], ["大理"]),
]


def main() -> None:
    found = wanted = 0
    violations: list[str] = []
    misses: list[str] = []
    for index, (text, want, forbidden) in enumerate(CASES):
        items = extract_items(
            [{"id": index + 1, "role": "user", "time": "2026-11-02T09:00:00", "text": text}]
        )
        values = [json.dumps(item["value"], ensure_ascii=False).casefold() for item in items]
        for value in want:
            wanted += 1
            if any(value.casefold() in v for v in values):
                found += 1
            else:
                misses.append(f"{text!r}: {value}")
        violations += [f"{text!r}: {bad}" for bad in forbidden if any(bad.casefold() in v for v in values)]
    print(f"recall {found}/{wanted} = {found / wanted:.3f}; violations {len(violations)}")
    for line in misses + [f"VIOLATION {v}" for v in violations]:
        print("  " + line, file=sys.stderr)


if __name__ == "__main__":
    main()
