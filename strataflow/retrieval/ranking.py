"""Ranking for hybrid retrieval: pure functions over the rows of one search (no database).

Every row gets one absolute score in 0..1, a function of the query and the row alone (with, for a
conversation turn, its window: the turns around it). It never depends on which other rows were found, so a
memory scores the same for a query whatever else is stored, and one threshold means the same on every
search (docs/retrieval.md, "Scores"); the one exception is the ``cross_check`` part across languages, at
most 0 (below). Meaning first: the score starts from the dense similarity and adds
bounded evidence, each term in logit units:

    z = dense [+ cross_check] + lexical x coverage + speaker + time + period + lineage
    score = 1 / (1 + e^-z)

Every weight is in logit units and lives in one frozen object, ``WEIGHTS`` (`RankingWeights`); every number
in it but the subject reference, and every calibration, is the output of a function over labelled scores
(bench.fit_ranking, which tests/retrieval/test_fit_ranking.py holds the code to).

- dense: the cosine similarity to the query's embedding (for a statement, an item, report or chunk, less
  its hubness: strataflow.retrieval.question_centroid), calibrated per embedding model
  (`DenseCalibration`: the cosine at which a memory alone scores 0.5, and the logit per unit of cosine;
  a model with compressed cosines gets a steeper slope). A query that names the subject searched is
  embedded without the name, and ``WEIGHTS.subject_reference`` (what the name adds to every row) is added
  back, so the name never decides between the subject's rows and the score keeps its scale. For a turn,
  ``DENSE_NEIGHBOUR`` of the mean of the adjacent turns' similarities (same session) is added first: a
  short reply borrows the meaning of the turn it answers;
- cross_check, for a row compared with the query across languages only: a second multilingual model
  (strataflow.retrieval.cross_check) reads the cross_check.HEAD rows of a layer with the best multilingual
  similarity, as a reranker reads a first stage's best, and each loses ``WEIGHTS.cross_check`` x how much
  less that model likes it than the one it likes best (cosines; a row below the HEAD counts as the least
  liked one read). The part is at most 0: it reorders and lowers scores, never raises one (an unrelated
  query scores no higher than before, and the row the second model prefers keeps its score), so a
  threshold can drop a row it finds unrelated. This is the one part that depends on the other rows read:
  a row can lose when a memory the second model likes better is added;
- coverage: the share of the query's lexemes (English stems, Chinese words; each counts the same, but the
  name of a speaker the query names counts ``SPEAKER_NAME_TERM``) that the row's text holds, worth at most
  ``WEIGHTS.lexical`` for a conversation turn and ``WEIGHTS.entry_lexical`` for an item, report or chunk
  (dialog turns need their words, a stored statement's embedding already says what it means); a turn's
  neighbours within ``WINDOW`` count ``NEIGHBOUR_TERM`` for a lexeme the turn itself lacks ("Yes, last
  Saturday!" holds the words of the question it answers). No corpus statistic: a BM25 IDF over the
  candidate set moved a memory's score when unrelated memories were added;
- evidence from the query's reading (strataflow.retrieval.query_reading), each bounded by its weight:
  the turn's speaker is the one person the query names (``WEIGHTS.speaker``); a *when* question and a turn
  that states a time (``WEIGHTS.time``); the query names a period and the row's event time is in it
  (``WEIGHTS.period``);
- lineage: an L2 item or L3 report that matches lifts the turns it came from (`Candidate.lift`, computed
  by strataflow.retrieval.layered from their scores and ``WEIGHTS.item`` / ``WEIGHTS.report``, at most
  ``WEIGHTS.lift_max``).

Every boost together is at most ``WEIGHTS.boost_max`` (9.2 logits), and words at most ``WEIGHTS.lexical``
(4.8; an item's ``entry_lexical``, 0.8). That is the true bound: evidence and words reorder only rows whose
dense logits (the parts ``dense`` + ``neighbours`` + ``subject`` + ``cross_check``) differ by less than
lexical + boost_max (14 logits); a row ahead by more stays ahead whatever the other's evidence
(tests/retrieval/test_ranking_bound.py sweeps it). The bound is wide: a turn at cosine 0.20 with the
speaker, a time, the period and full lineage can pass a related turn at 0.50 that has none of them, so
evidence can lift an unrelated turn over a related one; it cannot lift one over a clearly closer answer that
shares its words.
Rows are returned by score: the list's order is its scores' order on every surface.

Why a row was recalled: `rank` keeps, per row, its logit's parts (`Candidate.parts`: ``dense``, the
adjacent turns' ``neighbours``, the ``subject`` reference, ``cross_check``, ``lexical``, ``speaker``,
``time``, ``period``, ``lineage`` and, were the evidence ever clipped at boost_max, a negative
``boost_cap``), which add up to z; the surfaces show them on request (`explain`, docs/retrieval.md "Why it
was recalled").

The weights were fitted on two benchmarks (the paraphrased facts of bench.facts and the dialogs of
bench.locomo, on one half of each) and checked on the other halves (docs/retrieval-quality.md).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from strataflow.retrieval.query_reading import QueryReading, has_time_expression


@dataclass(frozen=True)
class DenseCalibration:
    """How one embedding model's cosine becomes logit units: (cosine - center) x slope."""

    center: float  # the cosine at which a row with no other evidence scores 0.5
    slope: float  # logit units per unit of cosine
    words: float = 1.0  # share of the word weight (coverage) its rows get


DEFAULT_MODEL = "all-MiniLM-L6-v2"
# The center of a model lies, on bench.facts' fit subjects, between the best cosine an unrelated query reached
# and the lowest a right answer had (with the subject reference), so that 0.5 separates them; the holdout
# subjects check it. The slope is the spread of the model's cosines: what a clear difference in meaning is
# worth. Both are outputs of `python -m bench.fit_ranking` (bench/fit_facts.py, fit_cross.py), which
# tests/retrieval/test_fit_ranking.py holds these to (docs/retrieval-quality.md, "Re-fitting the ranking").
CALIBRATION: dict[str, DenseCalibration] = {
    # MiniLM: paraphrased right answers 0.45-0.8 (with their words: 0.8 and up), unrelated queries below 0.4
    # (statements centred: strataflow.retrieval.question_centroid). The midpoint is 0.42; 0.4 is kept, inside
    # the gap: 0.42 lowered the items' lineage lift and cost LoCoMo (bench.fit_ranking.default_center).
    DEFAULT_MODEL: DenseCalibration(center=0.4, slope=8.0),
    # multilingual-e5-small (the CJK embedder): compressed, right answers 0.81-0.90 on the Chinese facts,
    # unrelated queries up to 0.86. Centre by the margin rule above on bench.facts' fit subjects
    # (bench.fit_ranking); slope set by hand (bench.fit_ranking.E5_SLOPE says why the spread rule's 45.3 is
    # not taken). Jieba's words (她, 什么) cost top-1 on the Chinese facts: its rows rank by meaning alone.
    "multilingual-e5-small": DenseCalibration(center=0.87, slope=40.0, words=0.0),
    # multilingual-e5-small between a question and a memory in different languages (a Chinese question about
    # an English fact, or the reverse: strataflow.retrieval.layer_sql's multilingual space): right answers
    # 0.74-0.84 (0.88 within one language), unrelated queries up to 0.78. Fitted by `python -m
    # bench.fit_ranking` on bench.facts' fit subjects (slope: e5's times the ratio of the right answers'
    # spreads within and across languages; centre: the margin rule above, nine right answers in ten) and
    # checked on the holdout ones (docs/retrieval-quality.md); tests/retrieval/test_fit_ranking.py fails when
    # these are not the fit's.
    "multilingual-e5-small:cross": DenseCalibration(center=0.801, slope=36.8, words=0.0),
}
CROSS_LANGUAGE = ":cross"  # a model's name + this: its cosines between texts of different languages
WINDOW = 2  # neighbouring turns on each side that share a turn's words
SESSION_GAP = timedelta(hours=1)  # adjacent turns further apart than this are different sessions
# How two features are computed (shares, not weights): a turn's dense feature adds this share of the mean of
# its adjacent turns' similarities (same session); a lexeme the turn lacks but a neighbour within WINDOW holds
# counts NEIGHBOUR_TERM in its coverage, and the name of the speaker the query names SPEAKER_NAME_TERM.
DENSE_NEIGHBOUR = 0.25
NEIGHBOUR_TERM = 0.5
SPEAKER_NAME_TERM = 0.5


@dataclass(frozen=True)
class RankingWeights:
    """The ranking's weights, every one in logit units: what its signal adds to a row's z at most (a share
    in 0..1, the coverage or an item's score, times the weight; a flag, once). bench.fit_ranking computes
    all but subject_reference from labelled scores, and tests/retrieval/test_fit_ranking.py holds these
    values to its output.
    """

    lexical: float = 4.8  # x a conversation turn's coverage (0..1): dialog turns need their words
    entry_lexical: float = 0.8  # x the coverage of an item, report or chunk: a statement's meaning says more
    speaker: float = 1.6  # the turn's speaker is the one person the query names
    time: float = 0.8  # a when-question and a turn that states a time
    period: float = 1.6  # the turn's event time is in the period the query names
    item: float = 0.8  # lineage: x the score of each of the best ITEM_TOP items, to each of its source turns
    report: float = 1.2  # lineage: x the score of the best report, to each turn behind its key events
    lift_max: float = 5.2  # lineage at most (layered.py: 5 items x item + 1 report x report)
    # A query that refers to the subject searched (their name, or he / she / 她 within their memory) is about
    # them: every row of the subject gets this much, whatever the model. It is what the name adds to a row's
    # similarity when it is left in the query, measured on bench.facts' English fit subjects: 3.1 logits
    # under MiniLM (0.38 of cosine), 2.7 under multilingual-e5-small (0.068); a pronoun, which names the
    # subject as surely, adds almost nothing to either embedding (0.015 of e5 cosine in Chinese) and counts
    # the same as a name. Set at MiniLM's earlier 0.35 of cosine.
    subject_reference: float = 2.8
    # Across languages, x how much less the second model (strataflow.retrieval.cross_check) likes a row than
    # the row of its layer it likes best (cosines): the `cross_check` part, at most 0.
    cross_check: float = 9.0

    @property
    def boost_max(self) -> float:
        """All the evidence besides the words together: speaker + time + period + lift_max."""
        return self.speaker + self.time + self.period + self.lift_max


WEIGHTS = RankingWeights()


@dataclass
class Candidate:
    """One row under consideration: its scores' inputs and, after `rank`, its score."""

    id: int
    group: str  # conversation id (messages) or anything that says which rows are neighbours
    event_at: datetime | None
    similarity: float | None
    doc_len: int
    tf: dict[str, int]
    payload: dict[str, object] = field(default_factory=dict)
    speaker: str | None = None
    text: str = ""  # read for a time expression on when-questions
    lift: float = 0.0  # lineage evidence from L2 items and L3 reports (strataflow.retrieval.layered)
    model: str | None = None  # the embedding model of `similarity` (None: the default model)
    second: float | None = None  # across languages, the second model's cosine (cross_check): its own part
    score: float = 0.0
    coverage: float = 0.0
    dense: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)  # the logit's parts, set by `rank` (they add to z)


@functools.lru_cache(maxsize=256)  # asked once per ranked row: a context ranks a few hundred
def canonical_model(model: str | None) -> str:
    """The calibration's name for a model: its aliases folded (an organisation prefix such as intfloat/ or
    sentence-transformers/, case), so `intfloat/multilingual-e5-small` is `multilingual-e5-small`."""
    name = (model or DEFAULT_MODEL).strip().rsplit("/", 1)[-1].lower()
    return next((known for known in CALIBRATION if known.lower() == name), name)


def cross_language(model: str) -> str:
    """The calibration's name for `model`'s cosine between texts of different languages."""
    return f"{model}{CROSS_LANGUAGE}"


_UNCALIBRATED: set[str] = set()


def uncalibrated(model: str | None) -> str | None:
    """None for a model with a calibration (or the default), else what a threshold on its rows must be
    told: "uncalibrated model X: scored as all-MiniLM-L6-v2" (explain shows it: docs/retrieval.md)."""
    if model is None or canonical_model(model) in CALIBRATION:
        return None
    return f"uncalibrated model {model}: scored as {DEFAULT_MODEL}"


def calibration(model: str | None) -> DenseCalibration:
    """The model's calibration, by its canonical name; a model without one is treated as the default model
    (logged once per process: its scores mean less than docs/retrieval.md says)."""
    name = canonical_model(model)
    found = CALIBRATION.get(name)
    if found is None:
        if name not in _UNCALIBRATED:
            _UNCALIBRATED.add(name)
            logging.getLogger(__name__).warning(
                "embedding model %r has no calibration: scored as %s, thresholds are approximate",
                model, DEFAULT_MODEL,
            )  # fmt: skip
        return CALIBRATION[DEFAULT_MODEL]
    return found


def absolute_score(
    similarity: float | None,
    coverage: float = 0.0,
    boost: float = 0.0,
    model: str | None = None,
    lexical_weight: float = WEIGHTS.lexical,
) -> float:
    """The score of one row (see the module docstring): `similarity` in the model's cosine, `coverage`
    the share of the query's lexemes the row holds (worth `lexical_weight` logits), `boost` the other
    evidence in logits. In (0, 1), increasing in each argument."""
    return sigmoid(sum(logit_parts(similarity, coverage, {"boost": boost}, model, lexical_weight).values()))


def sigmoid(z: float) -> float:
    """1 / (1 + e^-z): a logit as a score."""
    return 1.0 / (1.0 + math.exp(-z))


def logit_parts(
    similarity: float | None,
    coverage: float = 0.0,
    boosts: dict[str, float] | None = None,
    model: str | None = None,
    lexical_weight: float = WEIGHTS.lexical,
    boost_max: float = WEIGHTS.boost_max,
) -> dict[str, float]:
    """The parts of one row's logit z (they add up to it): ``dense`` from `similarity` (the model's
    cosine), ``lexical`` from `coverage`, one part per boost of `boosts` (logits, each >= 0) and, when they
    sum past `boost_max`, ``boost_cap``: the (negative) amount clipped."""
    cal = calibration(model)
    dense = -cal.slope * cal.center if similarity is None else (similarity - cal.center) * cal.slope
    parts = {"dense": dense, "lexical": lexical_weight * cal.words * min(max(coverage, 0.0), 1.0)}
    total = 0.0
    for name, value in (boosts or {}).items():
        value = max(value, 0.0)
        parts[name] = value
        total += value
    if total > boost_max:
        parts["boost_cap"] = boost_max - total
    return parts


def neighbour_order(rows: Sequence[Candidate]) -> tuple[list[Candidate], np.ndarray]:
    """Rows sorted by (group, time, id) and, for each, the index of its session (a run of close turns)."""
    ordered = sorted(rows, key=lambda r: (r.group, r.event_at or datetime.min, r.id))
    session = np.zeros(len(ordered), dtype=np.int64)
    for i in range(1, len(ordered)):
        prev, cur = ordered[i - 1], ordered[i]
        same = prev.group == cur.group and (
            prev.event_at is None or cur.event_at is None or cur.event_at - prev.event_at <= SESSION_GAP
        )
        session[i] = session[i - 1] if same else session[i - 1] + 1
    return ordered, session


def coverage(present: np.ndarray, session: np.ndarray, width: int, weights: np.ndarray) -> np.ndarray:
    """Per row, the weighted share of the query's lexemes it holds (present: rows x lexemes, 0/1); within
    `width` turns of the same session, a neighbour's lexeme counts NEIGHBOUR_TERM where the row lacks it."""
    if present.shape[1] == 0 or weights.sum() <= 0:
        return np.zeros(present.shape[0])
    near = np.zeros_like(present)
    for shift in range(1, width + 1):
        if shift >= len(present):
            break
        same = (session[shift:] == session[:-shift])[:, None]
        near[shift:] = np.maximum(near[shift:], present[:-shift] * same)
        near[:-shift] = np.maximum(near[:-shift], present[shift:] * same)
    return (np.maximum(present, NEIGHBOUR_TERM * near) @ weights) / weights.sum()


def lexeme_weights(lexemes: Sequence[str], reading: QueryReading | None) -> np.ndarray:
    """Each query lexeme counts 1, but the name of the one speaker the query names SPEAKER_NAME_TERM: the
    speaker evidence already counts that person, and every one of their turns holds the name."""
    names = [name.lower() for name in reading.speakers] if reading is not None else []
    return np.array(
        [SPEAKER_NAME_TERM if any(n.startswith(lexeme) for n in names) else 1.0 for lexeme in lexemes],
        dtype=np.float64,
    )


def adjacent_mean(values: np.ndarray, session: np.ndarray) -> np.ndarray:
    """Per row, the mean of the values of the rows just before and after it in its session (0 alone)."""
    total, count = np.zeros(len(values)), np.zeros(len(values))
    if len(values) > 1:
        same = (session[1:] == session[:-1]).astype(np.float64)
        total[1:] += values[:-1] * same
        count[1:] += same
        total[:-1] += values[1:] * same
        count[:-1] += same
    return total / np.maximum(count, 1.0)


def evidence(
    rows: Sequence[Candidate], reading: QueryReading | None, weights: RankingWeights = WEIGHTS
) -> np.ndarray:
    """Per row, the evidence added to its dense logit, in logits (see the module docstring)."""
    return sum(evidence_parts(rows, reading, weights).values(), np.zeros(len(rows)))


def evidence_parts(
    rows: Sequence[Candidate], reading: QueryReading | None, weights: RankingWeights = WEIGHTS
) -> dict[str, np.ndarray]:
    """Per kind of evidence (lineage, speaker, time, period), each row's, in logits."""
    lifts = np.array([r.lift for r in rows], dtype=np.float64)
    parts = {"lineage": np.minimum(lifts, weights.lift_max)}  # bounded
    if reading is None:
        return parts
    if len(reading.speakers) == 1:
        parts["speaker"] = weights.speaker * np.array(
            [r.speaker in reading.speakers for r in rows], dtype=float
        )
    if reading.asks_when:
        parts["time"] = weights.time * np.array([has_time_expression(r.text) for r in rows], dtype=np.float64)
    if reading.period is not None:
        period = reading.period
        parts["period"] = weights.period * np.array(
            [period.contains(r.event_at) for r in rows], dtype=np.float64
        )
    return parts


def rank(
    rows: Sequence[Candidate],
    lexemes: Sequence[str],
    windowed: bool,
    reading: QueryReading | None = None,
    weights: RankingWeights = WEIGHTS,
) -> list[Candidate]:
    """Score every row (see the module docstring) and return them best first. `lexemes` are the query's
    own (not those the rows happen to hold: the coverage of a row must not depend on the others); `weights`
    are the code's unless a fit tries others (bench.fit_ranking)."""
    if not rows:
        return []
    if windowed:
        ordered, session = neighbour_order(rows)
    else:
        ordered, session = list(rows), np.arange(len(rows))
    present = np.array(
        [[1.0 if r.tf.get(lexeme, 0) > 0 else 0.0 for lexeme in lexemes] for r in ordered], dtype=np.float64
    ).reshape(len(ordered), len(lexemes))
    covered = coverage(present, session, WINDOW if windowed else 0, lexeme_weights(lexemes, reading))
    # Each row's cosine in the default model's units, so that neighbours of different models can be mixed.
    # A query that names the subject searched is embedded without the name (query_reading.without_subject:
    # left in, it decides between the subject's rows by who names them); the match it made with every row
    # is given back as weights.subject_reference, the same for each row, so the score keeps its meaning.
    named = reading is not None and reading.names_subject
    reference = weights.subject_reference if named else 0.0
    plain = np.array([_in_default_units(r.similarity, r.model) for r in ordered], dtype=np.float64)
    dense = np.array([_in_default_units(r.similarity, r.model, reference) for r in ordered], dtype=np.float64)
    near = DENSE_NEIGHBOUR * adjacent_mean(plain, session) if windowed else np.zeros(len(ordered))
    if windowed:
        dense = dense + DENSE_NEIGHBOUR * adjacent_mean(dense, session)
    kinds = evidence_parts(ordered, reading, weights)
    # Across languages: the second model's shortfall from its favourite; a row compared across languages
    # that it did not read (below its HEAD) counts as the least liked one it read, so it cannot pass a
    # row that was read and lost for it.
    read = [r.second for r in ordered if r.second is not None]
    best_second, least_second = (max(read), min(read)) if read else (0.0, 0.0)
    lexical = weights.lexical if windowed else weights.entry_lexical
    slope = CALIBRATION[DEFAULT_MODEL].slope
    for i, (row, d, c) in enumerate(zip(ordered, dense, covered, strict=True)):
        row.dense, row.coverage = float(d), float(c)
        words = lexical * calibration(row.model).words  # d is in the default model's units already
        boosts = {name: float(values[i]) for name, values in kinds.items() if values[i]}
        parts = logit_parts(float(d), float(c), boosts, lexical_weight=words, boost_max=weights.boost_max)
        # The dense part, told apart: the row's own cosine, its neighbours' share, the subject reference.
        own = (plain[i] - CALIBRATION[DEFAULT_MODEL].center) * slope
        if row.similarity is not None and (near[i] or named):
            subject = parts.pop("dense") - own - near[i] * slope
            parts = {"dense": own, "neighbours": near[i] * slope, "subject": subject, **parts}
        if read and (row.second is not None or _across_languages(row.model)):
            second = least_second if row.second is None else row.second
            parts["cross_check"] = weights.cross_check * (second - best_second)
        row.parts = parts
        row.score = sigmoid(sum(parts.values()))
    return sorted(ordered, key=lambda r: (-r.score, r.id))


def _across_languages(model: str | None) -> bool:
    """Whether a row's similarity is a cosine across languages (its model's name is cross_language's)."""
    return model is not None and model.endswith(CROSS_LANGUAGE)


def _in_default_units(similarity: float | None, model: str | None, reference: float = 0.0) -> float:
    """A model's cosine (plus `reference` logits: the subject reference when the query named the subject)
    mapped onto the default model's scale (same logit), or 0 without an embedding."""
    if similarity is None:
        return 0.0
    cal, default = calibration(model), CALIBRATION[DEFAULT_MODEL]
    similarity += reference / cal.slope if reference else 0.0
    return default.center + (similarity - cal.center) * cal.slope / default.slope
