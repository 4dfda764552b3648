"""Fit the offline relevance models (``offline/weights/relevance.json``, ``relevance_answer.json``),
chosen and measured leave-one-source-out on TREC Deep Learning 2019 and 2020.

Run: CONTEXTLENS_CACHE_DIR=/path/to/cache .venv/bin/python benchmarks/fit_relevance.py
     [--data DIR] [--C 1.0] [--seed 0] [--no-write]

Target: whether a retrieved chunk *bears on* the input (contextual relevancy: is it about
what the input asks, whether or not it states the answer). TREC DL passage grades say it:
grade >= 1 ("related", "highly" or "perfectly relevant") bears on the query.

Data. Each source is made a knowledge base of a few topics and read through a retriever, as
a RAG pipeline reads a company's documents:

* a query's knowledge base holds a random :data:`KEEP` share of the passages judged grade
  >= 1 for it (a few chunks on the question asked; drawn anew for each list) and every
  passage judged for the :data:`NEAR` queries most similar to it (its neighbouring topics:
  the rest of the documents, about the same domain);
* a list is the top 4 to 6 passages of that base by cosine to the query plus Gaussian noise
  (sd :data:`SIGMA`: a retriever that is not the embedder), in that order, :data:`LISTS`
  lists per query; a passage bears on the query when it is judged grade >= 1 for it, and
  not when it is another topic's;
* the answer, for the model that reads one: the sentence of the list's first passage most
  similar to the query (an answer restates what its best chunk says); TREC has no answers.

Both sources are built alike. DL 2019's copy has no grade-0 passages, so DL 2020's (the
passages the judged runs retrieved that "have nothing to do with the query") are not in the
lists either: they are scored after the fit, in lists built the same way with them in each
query's base, to show how often a passage that shares the query's words but does not bear
on it is called relevant (the embedder cannot tell; a judge can).

Selection, for each model: every set of the embedding features (:data:`SEARCHED`) with the
cosine (and, with the answer, the answer's cosine), fitted on one source and scored on the
other, both ways. The word features (``rarest``, ``coverage``, ``answer_coverage``, ...) are
not searched: here the other topics are other TREC queries, which rarely share the query's
words, so word overlap looks decisive, and it is not where off-topic text shares the
input's words (DL 2020's grade-0 passages, which lexical runs retrieved; a company's
documents, where a shipping policy shares "policy" with a question on returns: chosen here,
they raised the off-topic share of ``benchmarks/relevance_internal_docs.py`` from 13% to
17%, which is how they came to be left out).
Eligible: held-out ECE at most :data:`MAX_ECE` on both. Chosen: the smallest worst-source
held-out log loss, then the fewest features. The table gives the chosen set's held-out
AUROC and ECE per source beside the cosine's alone (a logistic on it fitted on the same
lists). The shipped model is then fitted on both sources and the table written into its
``meta``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from contextlens.calibration import auroc, expected_calibration_error, read_labelled
from contextlens.embeddings.base import TextVectors, embed_distinct
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.minilm import default_embedder
from contextlens.engine.cache import Cache
from contextlens.offline.model import LogisticModel
from contextlens.offline.relevance import (
    ANSWER_MODEL,
    CANDIDATES,
    INPUT_FEATURES,
    MODEL,
    THRESHOLD,
    RelevanceItem,
    chunk_features,
    relevance_texts,
)
from contextlens.offline.text import sentences

WEIGHTS = Path(__file__).resolve().parents[1] / "src/contextlens/offline/weights"
FILES = {"DL 2019": "trec_dl19_passage.jsonl", "DL 2020": "trec_dl20_passage_graded.jsonl"}
#: The source whose grade-0 passages are scored after the fit.
GRADED = "DL 2020"
#: Share of a query's relevant passages in the knowledge base of each of its lists.
KEEP = 0.1
#: Neighbouring topics whose passages are in a query's knowledge base.
NEAR = 8
#: Noise of the retriever's score (sd, on the cosine).
SIGMA = 0.08
#: Lists per query.
LISTS = 12
#: The features searched, beside the cosine (and the answer's cosine).
SEARCHED = ("gap", "to_best", "answer_gap")
#: The largest held-out ECE a chosen feature set may have.
MAX_ECE = 0.10


@dataclass(frozen=True)
class Passage:
    text: str
    grade: int


@dataclass
class Lists:
    """Retrieved lists: each an item (query, chunks, answer), each chunk's grade for the
    query (-1: another topic's) and the list's query."""

    items: list[RelevanceItem]
    grades: list[list[int]]

    def answerless(self) -> list[RelevanceItem]:
        return [RelevanceItem(i.input, i.chunks) for i in self.items]


def load(path: Path) -> dict[str, list[Passage]]:
    """Each query's judged passages, as ``calibrate`` reads the file."""
    pools: dict[str, list[Passage]] = {}
    for row in read_labelled(path):
        f = row.fields
        passage = Passage(f["contexts"][0], int(f["meta"]["grade"]))
        pools.setdefault(f["question"], []).append(passage)
    return pools


def vectors_of(texts: Sequence[str]) -> TextVectors:
    embedder = CachedEmbedder(default_embedder(), Cache(None))
    return asyncio.run(embed_distinct(embedder, texts))


def build(
    pools: dict[str, list[Passage]], vectors: TextVectors, seed: int, grade_zero: bool = False
) -> Lists:
    """The retrieved lists of one source (see the module); with ``grade_zero`` a query's
    grade-0 passages are in its base too, each with the :data:`KEEP` share."""
    rng = np.random.default_rng(seed)
    queries = list(pools)
    qmat = vectors.of(queries).astype(np.float64)
    out = Lists([], [])
    for qi, q in enumerate(queries):
        near = [queries[j] for j in np.argsort(-(qmat @ qmat[qi])) if j != qi][:NEAR]
        own = [p for p in pools[q] if p.grade >= 1 or grade_zero]
        texts = [p.text for p in own] + [p.text for n in near for p in pools[n]]
        grades = [p.grade for p in own] + [-1] * (len(texts) - len(own))
        sims = vectors.of(texts).astype(np.float64) @ vectors[q].astype(np.float64)
        is_own = np.arange(len(texts)) < len(own)
        for _ in range(LISTS):
            keep = ~is_own | (rng.random(len(texts)) < KEEP)
            k = int(rng.integers(4, 7))
            noisy = np.where(keep, sims + rng.normal(0, SIGMA, len(texts)), -np.inf)
            top = [int(j) for j in np.argsort(-noisy)[:k]]
            out.items.append(RelevanceItem(q, [texts[j] for j in top]))
            out.grades.append([grades[j] for j in top])
    return out


def with_answers(lists: Lists) -> Lists:
    """The lists, each with its answer: the first chunk's sentence most similar to the query."""
    firsts = [item.chunks[0] for item in lists.items]
    pieces = {s for text in firsts for s in (sentences(text) or [text])}
    vectors = vectors_of([*pieces, *(i.input for i in lists.items)])
    items = []
    for item, first in zip(lists.items, firsts, strict=True):
        q = vectors[item.input]
        answer = max(sentences(first) or [first], key=lambda s: float(vectors[s] @ q))
        items.append(RelevanceItem(item.input, item.chunks, answer))
    return Lists(items, lists.grades)


@dataclass(frozen=True)
class Table:
    """The :data:`CANDIDATES` of every chunk of a source's lists, with each chunk's grade
    and its list's query."""

    x: np.ndarray
    grade: np.ndarray
    query: np.ndarray

    @property
    def y(self) -> np.ndarray:
        return (self.grade >= 1).astype(int)


def table(items: list[RelevanceItem], lists: Lists) -> Table:
    feats = chunk_features(items, vectors_of(relevance_texts(items)))
    assert len(feats.keys) == sum(len(i.chunks) for i in items), "a blank passage"
    return Table(
        feats.matrix,
        np.array([g for gs in lists.grades for g in gs]),
        np.array([item.input for item in items for _ in item.chunks]),
    )


def fit(x: np.ndarray, y: np.ndarray, c: float, names: tuple[str, ...], name: str) -> LogisticModel:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    clf = LogisticRegression(C=c, max_iter=2000)
    clf.fit((x - mean) / scale, y)
    return LogisticModel(
        name=name,
        features=names,
        mean=mean,
        scale=scale,
        coef=clf.coef_[0].astype(np.float64),
        intercept=float(clf.intercept_[0]),
    )


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    q = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))


def cols(names: Sequence[str]) -> list[int]:
    return [CANDIDATES.index(n) for n in names]


def held_out(
    tables: dict[str, Table], names: tuple[str, ...], c: float
) -> dict[str, tuple[str, np.ndarray]]:
    """Each source's probabilities from the model fitted on the other source."""
    out = {}
    for test in tables:
        [train] = [s for s in tables if s != test]
        t = tables[train]
        model = fit(t.x[:, cols(names)], t.y, c, names, "held-out")
        out[test] = (train, model.predict(tables[test].x[:, cols(names)]))
    return out


def figures(p: np.ndarray, t: Table) -> dict[str, Any]:
    y = t.y
    out = {
        "chunks": len(y),
        "relevant": int(y.sum()),
        "auroc": auroc(p, y),
        "ece": expected_calibration_error(p, y),
        "log_loss": log_loss(p, y),
        "relevant_called_relevant": float((p[y == 1] >= THRESHOLD).mean()),
        "other_topic_called_relevant": float((p[t.grade == -1] >= THRESHOLD).mean()),
    }
    if (t.grade == 0).any():
        out["grade_0_called_relevant"] = float((p[t.grade == 0] >= THRESHOLD).mean())
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


@dataclass(frozen=True)
class Candidate:
    names: tuple[str, ...]
    losses: tuple[float, ...]  # per held-out source
    eces: tuple[float, ...]

    @property
    def eligible(self) -> bool:
        return max(self.eces) <= MAX_ECE

    @property
    def worst_loss(self) -> float:
        return max(self.losses)


def _print_table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    print(" | ".join(h.ljust(n) for h, n in zip(header, widths, strict=True)))
    print("-|-".join("-" * n for n in widths))
    for line in lines:
        print(" | ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)))


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    pools = {name: load(args.data / file) for name, file in FILES.items()}
    texts = [
        t for pool in pools.values() for q, ps in pool.items() for t in (q, *(p.text for p in ps))
    ]
    vectors = vectors_of(texts)
    tables: dict[bool, dict[str, Table]] = {False: {}, True: {}}
    for name, pool in pools.items():
        lists = with_answers(build(pool, vectors, args.seed))
        tables[False][name] = table(lists.answerless(), lists)
        tables[True][name] = table(lists.items, lists)
    for name, t in tables[False].items():
        print(
            f"{name}: {len(t.y)} chunks in {len(set(t.query.tolist())) * LISTS} lists; "
            f"{int(t.y.sum())} judged grade >= 1 for the query, {int((t.grade == -1).sum())} "
            "of neighbouring topics"
        )
    print(
        f"lists: top 4-6 of a knowledge base holding {KEEP:.0%} of the query's relevant "
        f"passages and every passage of its {NEAR} nearest queries, retriever noise sd {SIGMA}, "
        f"{LISTS} per query; seed {args.seed}; C={args.C}"
    )
    graded = with_answers(build(pools[GRADED], vectors, args.seed, grade_zero=True))
    graded_tables = {
        False: table(graded.answerless(), graded),
        True: table(graded.items, graded),
    }

    shipped: dict[str, tuple[LogisticModel, dict[str, Any]]] = {}
    specs = (
        (False, MODEL, ("similarity",), tuple(f for f in INPUT_FEATURES if f in SEARCHED)),
        (
            True,
            ANSWER_MODEL,
            ("similarity", "answer_similarity"),
            tuple(f for f in CANDIDATES if f in SEARCHED),
        ),
    )
    for answered, model_name, fixed, optional in specs:
        by_source = tables[answered]
        candidates = []
        for k in range(len(optional) + 1):
            for extra in itertools.combinations(optional, k):
                names = (*fixed, *extra)
                ps = held_out(by_source, names, args.C)
                candidates.append(
                    Candidate(
                        names,
                        tuple(log_loss(ps[s][1], t.y) for s, t in by_source.items()),
                        tuple(
                            expected_calibration_error(ps[s][1], t.y) for s, t in by_source.items()
                        ),
                    )
                )
        pool = [c for c in candidates if c.eligible] or candidates
        best = min(pool, key=lambda c: (round(c.worst_loss, 4), len(c.names)))
        kind = "with the answer" if answered else "without an answer"
        print(
            f"\n{model_name} ({kind}): {len(candidates)} feature sets, "
            f"{sum(c.eligible for c in candidates)} with held-out ECE <= {MAX_ECE} on both "
            "sources; the five best by worst-source held-out log loss (* chosen):"
        )
        ranked = sorted(candidates, key=lambda c: (not c.eligible, c.worst_loss, len(c.names)))
        _print_table(
            ("features", "worst log loss", "worst ECE"),
            [
                (
                    ("* " if c is best else "  ") + ", ".join(c.names),
                    f"{c.worst_loss:.4f}",
                    f"{max(c.eces):.3f}",
                )
                for c in ranked[:5]
            ],
        )
        model_p, base_p = (
            held_out(by_source, best.names, args.C),
            held_out(by_source, fixed, args.C),
        )
        rows = {
            s: (model_p[s][0], figures(model_p[s][1], t), figures(base_p[s][1], t))
            for s, t in by_source.items()
        }
        model = fit(
            np.vstack([t.x[:, cols(best.names)] for t in by_source.values()]),
            np.concatenate([t.y for t in by_source.values()]),
            args.C,
            best.names,
            model_name,
        )
        g = graded_tables[answered]
        check = figures(model.predict(g.x[:, cols(best.names)]), g)
        print(f"\nheld-out table of {model_name} ({', '.join(best.names)}):")
        cosine = "cosine" + (" + answer cosine" if answered else "")
        _print_table(
            (
                "held-out source",
                "fitted on",
                "chunks",
                "AUROC",
                "ECE",
                f"AUROC {cosine}",
                f"ECE {cosine}",
                "relevant called relevant",
                "other topic called relevant",
            ),
            [
                (
                    where,
                    fitted_on,
                    f"{r['chunks']} ({r['relevant']} relevant)",
                    f"{r['auroc']:.3f}",
                    f"{r['ece']:.3f}",
                    f"{b['auroc']:.3f}",
                    f"{b['ece']:.3f}",
                    _pct(r["relevant_called_relevant"]),
                    _pct(r["other_topic_called_relevant"]),
                )
                for where, (fitted_on, r, b) in rows.items()
            ],
        )
        print(
            f"{GRADED} with its grade-0 passages in each base (never fitted), shipped model: "
            f"{int((g.grade == 0).sum())} of {check['chunks']} chunks are grade 0, "
            f"{_pct(check['grade_0_called_relevant'])} of them called relevant; AUROC "
            f"{check['auroc']:.3f}, ECE {check['ece']:.3f}"
        )
        print("shipped model, fitted on both sources; coefficients (standardised):")
        for name, coef in zip(best.names, model.coef, strict=True):
            print(f"  {name:18s} {coef:+.3f}")
        print(f"  intercept          {model.intercept:+.3f}")
        meta = {
            "what": "P(a retrieved chunk bears on the input), "
            + ("reading the answer too; " if answered else "")
            + "see contextlens.offline.relevance",
            "data": "TREC DL 2019 and 2020 passage judgements (grade >= 1 bears on the query) "
            "as retrieved lists over a knowledge base of neighbouring topics; see "
            "benchmarks/fit_relevance.py",
            "fitted": dt.date.today().isoformat(),
            "command": f"benchmarks/fit_relevance.py --C {args.C} --seed {args.seed}",
            "selection": {
                "candidates": list(fixed + optional),
                "chosen": list(best.names),
                "rule": f"held-out ECE <= {MAX_ECE} on both sources; the smallest "
                "worst-source held-out log loss, then the fewest features",
            },
            "held_out": {
                where: {"fitted_on": fitted_on, **r, "cosine": b}
                for where, (fitted_on, r, b) in rows.items()
            },
            "grade_0_check": check,
        }
        shipped[model_name] = (model, meta)

    if args.no_write:
        return
    for name, (model, meta) in shipped.items():
        out = LogisticModel(
            name=model.name,
            features=model.features,
            mean=model.mean,
            scale=model.scale,
            coef=model.coef,
            intercept=model.intercept,
            meta=meta,
        )
        path = WEIGHTS / f"{name}.json"
        out.save(path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
