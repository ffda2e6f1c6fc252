"""The mean direction of questions about a person: a statement's inner product with it (its hubness) is taken
off the statement's similarity to every query.

A small sentence embedder puts every question of one form close together: "What does he do for a living?"
and "What does he do at weekends?" share most of their vector, so a statement that lies along the shared
direction gains on every question, whatever it says. The centroid of generic questions (`PROBE_QUESTIONS`,
written for this purpose and not taken from any benchmark) is that direction, and a statement's similarity
becomes  cosine(row, query) - row . centroid + typical,  where `typical` is the mean hubness of plain answers
(`PROBE_ANSWERS`), so a typical statement keeps its score. This is the document side of cross-domain
similarity local scaling (Conneau et al., 2018) over a fixed probe set: a function of the row alone, it never
depends on what else is stored. The search computes it in SQL (strataflow.retrieval.layer_sql.similarity_sql)
for items, reports and document chunks; dialog turns keep the plain cosine (in a dialog the person-fact
direction marks the informative turns: centring them cost LoCoMo 1.6 points at k = 5).

Applied to the bundled English model (all-MiniLM-L6-v2): bench.facts' English top-1 0.911 -> 0.935, with the
same gain on its fit and holdout subjects; not to multilingual-e5-small, whose vectors all share one direction
(the probe centroid's norm is 0.93, MiniLM's 0.43) and whose Chinese top-1 went down on the fit subjects
(docs/retrieval-quality.md). The probes are embedded as a subject search embeds its query (without pronouns:
query_reading.without_subject), once per process and model.
"""

from __future__ import annotations

import threading

import numpy as np

from strataflow.config import Settings
from strataflow.llm.embeddings import get_embedder, is_local_model
from strataflow.retrieval.query_reading import without_subject

# Generic questions an assistant asks about the person whose memory it reads: work, home, family, food,
# health, pastimes, travel, plans, habits. Their mean is the direction every such question shares.
PROBE_QUESTIONS = (
    "What does he do for a living?",
    "Where does she work?",
    "What is her job title?",
    "Where does he live now?",
    "Where did she grow up?",
    "Which school did he go to?",
    "What did she study at university?",
    "Is he married?",
    "Does she have children?",
    "What are his parents like?",
    "Does she have any brothers or sisters?",
    "Who are his close friends?",
    "What does she like to eat?",
    "Is there any food he cannot eat?",
    "What does she usually drink?",
    "Does he have any allergies?",
    "Does she have a health condition?",
    "Which medicine does he take?",
    "What are her hobbies?",
    "What does he do on weekends?",
    "Which sports does she play?",
    "What music does he listen to?",
    "What kind of books does she read?",
    "Which films does he enjoy?",
    "Does she have a pet?",
    "What car does he drive?",
    "How does she get to work?",
    "Where did he travel last year?",
    "Where is she planning to go on holiday?",
    "Which languages does he speak?",
    "What is she afraid of?",
    "What does he dislike?",
    "What is her favourite colour?",
    "When is his birthday?",
    "How old is she?",
    "What are his plans for next year?",
    "What is she saving money for?",
    "What is he learning at the moment?",
    "Which instrument does she play?",
    "What time does he get up?",
    "What does she do in the evenings?",
    "Who does he live with?",
    "What is her daily routine?",
    "What does he care about most?",
    "What projects is she working on?",
    "Has he changed jobs recently?",
    "What did she do before her current job?",
    "What gift would he like?",
)

# One plain answer to each probe question, as a memory would state it: their mean hubness (inner product with
# the centroid) is what a typical statement has, and is given back, so that centring reorders statements
# without moving the score of a typical one (docs/retrieval.md, "Scores").
PROBE_ANSWERS = (
    "He works as a nurse at the city hospital.",
    "She works at a small design studio downtown.",
    "Her title is senior data analyst.",
    "He lives in a flat in Leeds.",
    "She grew up on a farm near Cork.",
    "He went to a state school in Lyon.",
    "She studied chemistry.",
    "He has been married for ten years.",
    "She has two daughters.",
    "His parents are retired teachers.",
    "She has one older brother.",
    "His closest friend is a man he met at school.",
    "She loves spicy noodles.",
    "He is allergic to peanuts.",
    "She drinks green tea every morning.",
    "He gets hay fever in spring.",
    "She has type 1 diabetes.",
    "He takes a blood pressure pill every day.",
    "She knits and does crosswords.",
    "He goes hiking on Saturdays.",
    "She plays volleyball.",
    "He listens mostly to old soul records.",
    "She reads crime novels.",
    "He likes science fiction films.",
    "She has a tabby cat.",
    "He drives a blue hatchback.",
    "She cycles to the office.",
    "He spent two weeks in Vietnam last year.",
    "She wants to visit Iceland in the summer.",
    "He speaks Spanish and some German.",
    "She is scared of spiders.",
    "He hates loud restaurants.",
    "Her favourite colour is green.",
    "His birthday is on 3 May.",
    "She is 34.",
    "He hopes to start his own business next year.",
    "She is saving for a house deposit.",
    "He is taking an evening course in Italian.",
    "She plays the cello.",
    "He gets up at six.",
    "She watches quiz shows in the evening.",
    "He lives with his sister.",
    "She starts work at eight and walks the dog after lunch.",
    "Family matters most to him.",
    "She is building a garden shed.",
    "He moved to a new employer in March.",
    "She used to be a bank clerk.",
    "He would like a good pair of headphones.",
)
_CENTROIDS: dict[str, tuple[np.ndarray, float]] = {}
_LOCK = threading.Lock()


def is_centred(model: str | None) -> bool:
    """Whether rows of `model` have their hubness taken off (the bundled English model only)."""
    return model is not None and is_local_model(model)


def question_centroid(settings: Settings, model: str) -> tuple[np.ndarray, float]:
    """The mean of PROBE_QUESTIONS' query embeddings under `model` and the mean inner product of
    PROBE_ANSWERS' embeddings with it (a typical statement's hubness), computed once per process; a zero
    vector and 0 for a model that is not centred (its rows' similarity stays the plain cosine)."""
    with _LOCK:
        found = _CENTROIDS.get(model)
    if found is not None:
        return found
    if is_centred(model):
        embedder = get_embedder(settings, model)
        probes = [without_subject(question, "someone") for question in PROBE_QUESTIONS]
        centroid = np.asarray(embedder.encode_queries(probes), dtype=np.float32).mean(axis=0)
        answers = np.asarray(embedder.encode(list(PROBE_ANSWERS)), dtype=np.float32)
        typical = float((answers @ centroid).mean())
    else:
        centroid, typical = np.zeros(settings.embedding_dim, dtype=np.float32), 0.0
    centroid.setflags(write=False)
    with _LOCK:
        return _CENTROIDS.setdefault(model, (centroid, typical))
