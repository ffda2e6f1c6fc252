"""The memories and questions of bench.peer: N distinct one-sentence memories of one user's world, as mem0
stores them (what an agent saved with `add(..., infer=False)`), and questions that each ask about one of them.

A memory is a (who, what) pair drawn without replacement, so every question has one right answer: who is a
person of the user's circle ("Maria Okafor") or one of their relatives ("Maria Okafor's sister"), what is one
of the TOPICS (where they live, their job, their pet...), with its values drawn at random. The question of a
memory asks for its value in other words ("Where does Maria Okafor's sister live?"), so a search must find the
memory by its subject and topic, not by the value it is asking for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def phrases(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(","))


FIRST = words(
    "Maria Ana Sofia Lucia Elena Ines Clara Nora Alice Grace Hannah Julia Laura Emma Olivia Chloe Mia Zoe "
    "Amara Nia Zara Leila Yasmin Aisha Fatima Priya Ananya Meera Mei Li Na Yuki Hana Sakura Min Ji Soo Kim "
    "Thi Linh Olga Irina Katya Marta Agnieszka Eva Petra Ingrid Freya Astrid Sigrid James John Michael "
    "David Daniel Thomas Lucas Leo Noah Liam Ethan Oliver Samuel Gabriel Mateo Diego Pablo Javier Luis "
    "Carlos Marco Luca Paolo Omar Karim Youssef Hassan Tariq Arjun Rohan Vikram Ravi Kenji Hiro Takeshi "
    "Jin Wei Chen Hao Jun Minh Duc Ivan Dmitri Pavel Jakub Tomas Lars Erik Nils Kwame Kofi Tunde Emeka"
)
LAST = words(
    "Okafor Adeyemi Mensah Diallo Nkosi Kamau Haddad Nasser Khoury Farouk Rahman Chowdhury Sharma Patel Iyer "
    "Reddy Nair Gupta Tanaka Sato Suzuki Takahashi Watanabe Kobayashi Park Choi Jung Kang Nguyen Tran Pham "
    "Wang Zhang Liu Chen Huang Zhao Wu Zhou Santos Oliveira Pereira Costa Almeida Ferreira Garcia Martinez "
    "Lopez Gonzalez Rodriguez Hernandez Moreno Romero Rossi Russo Bianchi Romano Colombo Ricci Marino Greco "
    "Muller Schmidt Schneider Fischer Weber Becker Hoffmann Wagner Dubois Laurent Lefebvre Moreau Fournier "
    "Girard Bonnet Kowalski Nowak Wisniewski Novak Svoboda Horvat Ivanov Petrov Sokolov Popescu Larsen "
    "Hansen Nielsen Johansson Lindqvist Virtanen Murphy Kelly Walsh Byrne Smith Johnson Brown Taylor Wilson "
    "Evans Thompson Walker Hughes Bennett Foster"
)
RELATIVES = ("", "sister", "brother", "mother", "father", "son", "daughter", "partner", "best friend")

CITIES = words(
    "Porto Lisbon Lyon Marseille Berlin Hamburg Munich Vienna Prague Krakow Warsaw Oslo Bergen Stockholm "
    "Helsinki Dublin Cork Leeds Glasgow Toronto Montreal Vancouver Seattle Denver Austin Boston Chicago "
    "Lagos Nairobi Accra Cairo Casablanca Istanbul Dubai Mumbai Pune Chennai Singapore Bangkok Hanoi Osaka "
    "Kyoto Seoul Busan Taipei Sydney Melbourne Auckland Santiago Lima Bogota Quito"
)
JOBS = phrases(
    "nurse, pilot, teacher, architect, data engineer, pharmacist, carpenter, lawyer, chef, dentist, "
    "journalist, electrician, accountant, physiotherapist, firefighter, translator, veterinarian, "
    "graphic designer, civil engineer, librarian, barista, photographer"
)
COMPANIES = phrases(
    "a small bakery, the city hospital, an airline, a law firm, a bank, a startup, the university, "
    "a logistics company, a game studio, a public school, an energy company, a museum, a hotel"
)
PETS = words("dog cat parrot rabbit tortoise hamster horse goldfish ferret iguana")
PET_NAMES = words(
    "Biscuit Pepper Luna Milo Ziggy Coco Mango Olive Rocky Nala Simba Toby Pixel Waffles Bean Juno Kiwi "
    "Oscar Poppy Rusty"
)
INSTRUMENTS = phrases("cello, violin, drums, bass guitar, piano, saxophone, trumpet, ukulele, flute")
SPORTS = phrases("tennis, badminton, squash, padel, table tennis, volleyball, basketball, rugby")
LANGUAGES = words("Japanese Portuguese Korean Arabic Italian German Swahili Mandarin Greek")
FOODS = phrases("peanuts, shellfish, gluten, dairy, eggs, soy, sesame, strawberries, kiwi fruit")
DRINKS = phrases("green tea, black coffee, oat milk lattes, espresso, chai, matcha, hot chocolate")
CUISINES = words("Thai Ethiopian Mexican Lebanese Korean Peruvian Georgian Sichuan Greek")
CARS = phrases("hatchback, pickup truck, electric sedan, vintage convertible, minivan, motorbike, SUV")
COLOURS = words("red blue silver black white green yellow grey")
SUBJECTS = phrases("physics, history, medicine, economics, marine biology, philosophy, chemistry, law")
BOOKS = phrases(
    "a biography of Marie Curie, a thriller set in Oslo, a history of the Silk Road, a cookbook about "
    "fermentation, a novel about a lighthouse keeper, a guide to bird watching, a memoir by a chef"
)
TEAMS = phrases("Benfica, Arsenal, the Lakers, Bayern, Juventus, the Yankees, Ajax, Celtic, Boca")
WEEKDAYS = words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
MONTHS = words("January February March April May June July August September October November December")
HOBBIES = phrases("pottery, rock climbing, chess, birdwatching, sourdough baking, salsa dancing, knitting")
GIFTS = phrases("a fountain pen, a board game, a plant, concert tickets, a scarf, a cookbook, a telescope")


@dataclass(frozen=True)
class Topic:
    """One thing a memory can say about someone: the sentence (with {who} and value slots) and the question
    that asks for it."""

    statement: str
    question: str
    values: dict[str, tuple[str, ...]]


def _years() -> tuple[str, ...]:
    return tuple(str(year) for year in range(2001, 2025))


TOPICS = (
    Topic("{who} lives in {city} now.", "Where does {who} live?", {"city": CITIES}),
    Topic("{who} works as a {job} at {company}.", "What does {who} do for a living?",
          {"job": JOBS, "company": COMPANIES}),
    Topic("{who} has a {pet} called {pet_name}.", "What is the name of {who_s} pet?",
          {"pet": PETS, "pet_name": PET_NAMES}),
    Topic("{who} plays the {instrument} in a band.", "Which instrument does {who} play?",
          {"instrument": INSTRUMENTS}),
    Topic("{who} is allergic to {food}.", "What is {who} allergic to?", {"food": FOODS}),
    Topic("{who} always orders {drink} in the morning.", "What does {who} drink in the morning?",
          {"drink": DRINKS}),
    Topic("{who_s} favourite cuisine is {cuisine} food.", "What kind of food does {who} like best?",
          {"cuisine": CUISINES}),
    Topic("{who} drives a {colour} {car}.", "What car does {who} drive?", {"colour": COLOURS, "car": CARS}),
    Topic("{who} studied {subject} at university.", "What did {who} study at university?",
          {"subject": SUBJECTS}),
    Topic("{who} is reading {book} at the moment.", "What book is {who} reading?", {"book": BOOKS}),
    Topic("{who} supports {team} and never misses a match.", "Which team does {who} support?",
          {"team": TEAMS}),
    Topic("{who} is learning {language} in evening classes.", "Which language is {who} learning?",
          {"language": LANGUAGES}),
    Topic("{who_s} birthday is on the {day} of {month}.", "When is {who_s} birthday?",
          {"day": tuple(f"{d}th" for d in range(4, 21)), "month": MONTHS}),
    Topic("{who} moved to {city} in {year}.", "When did {who} move to a new city?",
          {"city": CITIES, "year": _years()}),
    Topic("{who} plays {sport} every {weekday} evening.", "Which sport does {who} play?",
          {"sport": SPORTS, "weekday": WEEKDAYS}),
    Topic("{who} took up {hobby} last year.", "What hobby did {who} take up?", {"hobby": HOBBIES}),
    Topic("The user promised to give {who} {gift} for their birthday.", "What gift did I promise {who}?",
          {"gift": GIFTS}),
    Topic("{who} lent the user {amount} dollars in {month}.", "How much money did {who} lend me?",
          {"amount": tuple(str(a) for a in range(50, 1000, 50)), "month": MONTHS}),
    Topic("{who} is afraid of flying and takes the train instead.", "Is {who} afraid of anything?", {}),
    Topic("{who} ran the {city} marathon in {year}.", "Which marathon did {who} run?",
          {"city": CITIES, "year": _years()}),
)  # fmt: skip


@dataclass(frozen=True)
class Memory:
    text: str
    question: str


def people() -> list[str]:
    """Everyone a memory can be about: each person of FIRST x LAST, and each of their RELATIVES."""
    names = [f"{first} {last}" for first in FIRST for last in LAST]
    return [name if not relative else f"{name}'s {relative}" for name in names for relative in RELATIVES]


def _possessive(who: str) -> str:
    return f"{who}'" if who.endswith("s") else f"{who}'s"


def memories(count: int, seed: int = 49) -> list[Memory]:
    """`count` memories, each a distinct (who, topic) pair, with the question that asks for it."""
    who = people()
    pairs = len(who) * len(TOPICS)
    if count > pairs:
        raise ValueError(f"bench.peer makes at most {pairs:,} distinct memories; asked for {count:,}")
    rng = random.Random(seed)
    out = []
    for pair in rng.sample(range(pairs), count):
        person, topic = who[pair // len(TOPICS)], TOPICS[pair % len(TOPICS)]
        values = {slot: rng.choice(choices) for slot, choices in topic.values.items()}
        names = {"who": person, "who_s": _possessive(person)}
        text = topic.statement.format(**names, **values)
        out.append(Memory(text[0].upper() + text[1:], topic.question.format(**names)))
    return out
