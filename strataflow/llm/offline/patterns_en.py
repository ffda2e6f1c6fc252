"""The English patterns and word tables of the offline rules: regex fragments for quantities (HEDGE, Q), job
titles, organisations and places, degrees and majors, the cues of a school or a job, and the contact channels,
intent and holding cues and timelines of plans.

strataflow.llm.offline.rules_en (age, education, university, major, job, company, location, experience),
rules_en_life (family, tools, immigration, intents, preferences) and rules_people (job titles) compose these
into their rules; names go through the alias dictionary (aliases.py), never through these tables.
"""

from __future__ import annotations

import re

from strataflow.llm.offline.numbers import EN_NUMBER

IGNORE = re.IGNORECASE
HEDGE = (
    r"(?:(?:about|around|roughly|approximately|almost|nearly|over|more than|at least|close to|under|"
    r"less than)\s+)?"
)
Q = rf"{HEDGE}(?:\d+(?:\.\d+)?|{EN_NUMBER})(?:-?ish)?(?:\+|\s*(?:-|to|or)\s*(?:\d+|{EN_NUMBER}))?"
TITLE_NOUN = (
    r"engineer|developer|designer|manager|nurse|teacher|doctor|lawyer|accountant|analyst|scientist|consultant|"
    r"architect|researcher|professor|student|writer|editor|journalist|chef|cook|driver|pharmacist|therapist|"
    r"director|officer|executive|specialist|coordinator|administrator|admin|programmer|founder|co-founder|owner|"
    r"freelancer|contractor|lead|intern|assistant|technician|salesperson|marketer|recruiter|physician|dentist|"
    r"surgeon|pilot|mechanic|electrician|plumber|artist|photographer|musician|tutor|lecturer|economist|banker|"
    r"trader|auditor|paralegal|secretary|clerk|cashier|firefighter|soldier|farmer|carpenter|veterinarian|"
    r"psychologist|counselor|counsellor|social worker|caregiver|homemaker|retiree|PM|CTO|CEO|CFO|COO|VP|"
    r"president|strategist|investor|entrepreneur|tester|QA|SRE|devops|representative|agent|broker|supervisor|"
    r"illustrator|translator|interpreter|librarian|optometrist|physiotherapist|chiropractor|realtor|attorney|"
    r"judge|chemist|biologist|physicist|mathematician|statistician|actuary|underwriter|paramedic|midwife|nanny|"
    r"barista|bartender|waiter|waitress|receptionist|cleaner|janitor|welder|machinist|operator|postdoc|"
    r"animator|copywriter|producer|filmmaker|videographer|chef|baker|butcher|coach|trainer|instructor|"
    r"professional|associate|partner|principal|clinician|dietitian|nutritionist|pharmacist|teacher"
)
# A job named by its ending (radiographer, dermatologist, beautician, florist), not a trait (optimist).
TITLE_BY_SUFFIX = (
    r"(?!(?:optim|pessim|perfection|real|ideal|minimal|femin|tour|cycl|rac|pur|extrem|ego|narciss|conform|"
    r"nonconform|hypochondri|nudi)ist\b)[a-z]{2,}(?:grapher|ologist|ician|iatrist|ist)"
)
TITLE = rf"(?P<t>(?:[A-Za-z/+&-]+\s+){{0,3}}?(?:{TITLE_NOUN}|{TITLE_BY_SUFFIX})s?)"
ORG = r"(?P<c>[A-Z][\w&.'-]*(?:\s+(?:[A-Z][\w&.'-]*|&|of|and)){0,4})"
UPPER = "A-ZÀ-ÖØ-ÞĀ-Ž"  # a capital, Latin-1 and Extended-A included (Kraków, Łódź, Malmö)
LETTER = "a-zA-ZÀ-ÖØ-öø-ÿĀ-ž"
PLACE = (
    rf"(?P<p>[{UPPER}][{LETTER}.'-]+(?:\s+[{UPPER}][{LETTER}.'-]+){{0,3}}"
    rf"(?:,\s*[{UPPER}][{LETTER}]+(?:\s+[{UPPER}][{LETTER}]+)?)?)"
)
NOT_PLACES = frozenset(
    "I The My Our A An It This That Home Monday Tuesday Wednesday Thursday Friday Saturday "
    "Sunday January February March April May June July August September October November "
    "December English Chinese".split()
)
DEGREE = re.compile(
    r"\b(?P<d>PhD|Ph\.D\.?|doctorate|doctoral degree|master'?s|masters|MBA|MSc|MEng|MPhil|bachelor'?s|"
    r"bachelors|"
    r"BSc|BEng|undergrad(?:uate)? degree|associate'?s degree|high school diploma)(?![\w])|"
    r"\b(?:an?|my)\s+(?P<d2>MS|M\.S\.|MA|M\.A\.|BS|B\.S\.|BA|B\.A\.)\b",
    IGNORE,
)
DEGREE_VALUE = (
    ("phd", "PhD"),
    ("ph.d", "PhD"),
    ("doctor", "PhD"),
    ("master", "Master"),
    ("mba", "Master"),
    ("msc", "Master"),
    ("meng", "Master"),
    ("mphil", "Master"),
    ("ms", "Master"),
    ("m.s", "Master"),
    ("ma", "Master"),
    ("m.a", "Master"),
    ("bachelor", "Bachelor"),
    ("bsc", "Bachelor"),
    ("beng", "Bachelor"),
    ("bs", "Bachelor"),
    ("b.s", "Bachelor"),
    ("ba", "Bachelor"),
    ("b.a", "Bachelor"),
    ("undergrad", "Bachelor"),
    ("associate", "Associate"),
    ("high school", "High school"),
)
MAJOR_ALIASES = {
    "cs": "Computer Science",
    "ee": "Electrical Engineering",
    "econ": "Economics",
    "ece": "Electrical and Computer Engineering",
    "me": "Mechanical Engineering",
    "compsci": "Computer Science",
}
SCHOOL_CONTEXT = re.compile(
    r"\b(graduat\w*|studied|study|studying|degree|alum\w*|went to|attended|attend|major\w*|"
    r"class of|master'?s|phd|bachelor'?s|mba|msc|bsc|meng|beng|mphil|ma|ms|ba|bs|school|college|"
    r"university|undergrad|grad school)\b",
    IGNORE,
)
WORK_CONTEXT = re.compile(
    r"\b(work|working|works|employed|job|teach|teaching|faculty|professor|staff)\b", re.I
)
CHANNELS = (
    "email",
    "e-mail",
    "phone",
    "call",
    "calls",
    "text",
    "texts",
    "sms",
    "whatsapp",
    "wechat",
    "slack",
    "zoom",
    "video",
    "teams",
    "telegram",
    "signal",
    "in person",
    "messages",
)
INTENT_CUE = re.compile(
    r"\b(apply|applying|application|plan|planning|want|would like|'d like|interested|"
    r"considering|thinking about|target|go for|aim|hoping|intend)\b",
    IGNORE,
)
HOLD_CUE = re.compile(
    r"\b(I'm on|I am on|I have an?|I hold|I got|holding|approved|granted|currently on|"
    r"already have)\b",
    IGNORE,
)
TIMELINE = re.compile(
    r"\b(next year|this year|next month|later this year|early next year|by the end of (?:the year|20\d\d|"
    r"next year)|"
    r"(?:with)?in (?:a|one|two|three|six|\d+) (?:years?|months?)|in \d+ months?|by (?:20\d\d|next year|this "
    r"year)|"
    r"in 20\d\d|ASAP|as soon as possible|in (?:Q[1-4]|spring|summer|fall|autumn|winter)(?: of)?(?: 20\d\d| "
    r"next year)?)",
    IGNORE,
)
