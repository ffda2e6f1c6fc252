"""bench.facts' agent shapes: the data covers what issue 44 asks of it."""

import re

from bench.facts import DATA
from bench.facts_shapes import SHAPES, load_shape_subjects
from strataflow.llm.embeddings import is_cjk_text


def test_every_shape_has_thirty_cases_in_both_languages_with_held_back_subjects() -> None:
    subjects = load_shape_subjects("all", DATA)
    for shape in SHAPES:
        assert sum(len(s.questions[shape]) for s in subjects) >= 30
    assert {s.lang for s in subjects} == {"en", "zh"}
    assert {s.lang for s in load_shape_subjects("holdout", DATA)} == {"en", "zh"}
    for s in subjects:
        assert not re.fullmatch(r"[a-z]+(_[a-z]+)?", s.subject)  # opaque, not a person's name
        assert all(is_cjk_text(f) == (s.lang == "zh") for f in s.facts)
        # cross: the user's question in the other language than the facts
        assert all(is_cjk_text(q) != (s.lang == "zh") for q in s.questions["cross"])
        assert all(is_cjk_text(q) == (s.lang == "zh") for q in s.questions["self"])
