"""Fit the offline relevance model (``offline/weights/relevance.json``), chosen on held-out sources.

Run: CONTEXTLENS_CACHE_DIR=/path/to/cache .venv/bin/python benchmarks/fit_relevance.py
     [--data DIR] [--folds 5] [--repeats 3] [--C 1.0] [--seed 0] [--no-write]

Target: whether a chunk *bears on* the input, DeepEval's contextual relevancy ("is this
statement relevant to the input?"): text on the input's topic is relevant whether or not it
states the answer; text about something else is not.

Data: pairs of an input and one chunk, from two public sources in ``--data``, both with
negatives of the same query:

* TREC DL 2020 graded passage judgements (``trec_dl20_passage_graded.jsonl``, 54 queries):
  every judged passage with its assessor's grade, label 1 = grade >= 1 (bears on the query),
  0 = grade 0. The grade-0 passages were retrieved for the same query by the runs that were
  judged, so they share its words: the hard negatives a retriever returns.
* HaluEval QA (``halueval_qa.jsonl``, 1,000 questions): a question's own knowledge is
  relevant; the knowledge of the other question that shares most of its terms (weighted by
  rarity) is not. The labels come from how the pairs are built: a few of those "other"
  passages do bear on the question (the same park or film named in both).

Held-out sources (each model is scored only on pairs it was not fitted on):

* TREC by query: ``--folds`` folds of queries; a fold's model is fitted on the other TREC
  queries and all of HaluEval.
* HaluEval, from a model fitted on TREC alone; and TREC, from a model fitted on HaluEval
  alone.

Measure: AUROC pooled over every pair of the held-out source (a score's level must mean the
same from one query to the next, as a threshold does), beside the raw cosine of input and
chunk (the bundled embedder). ECE: the model's probabilities, and the cosine's through a
logistic fitted on the same training pairs.

Selection: every set of the extractor's candidate features
(:data:`contextlens.offline.relevance.CANDIDATES`) that contains the cosine, scored on
``--repeats`` draws of the query folds and of HaluEval's tied negatives (seeds ``--seed``,
``--seed`` + 1, ...). A set is eligible when its pooled AUROC is above the raw cosine's on
every held-out source in every draw; the chosen set has the largest worst-source gain. When
no set is eligible, the cosine ships: a logistic on the cosine alone, whose ranking is the
cosine's.

The table of the chosen set (the first draw, on which the shipped model is fitted) gives per
held-out source: the AUROC of the cosine and of the model, the gain with a 95 % interval
(queries, or HaluEval questions, resampled) and its range over the draws; the ECE of both;
and the error of the metric's score on retrieval contexts of several chunks (up to 4 pairs of
one query, the truth being the share of their statements that are in relevant chunks, which
counts every statement of a relevant chunk as relevant; the score being the expected share
of relevant statements): mean absolute error, cosine beside model.

Features come from the library's own extractor
(:func:`contextlens.offline.relevance.chunk_features`) over the bundled embedder, through the
persistent embedding cache (set ``CONTEXTLENS_CACHE_DIR``). The shipped model is then
fitted on every pair of the first draw, both sources, and the held-out table recorded in the
weights file's ``meta``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from contextlens.calibration import auroc, expected_calibration_error, read_labelled
from contextlens.embeddings.base import embed_distinct
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.minilm import default_embedder
from contextlens.engine.cache import Cache
from contextlens.offline.model import LogisticModel
from contextlens.offline.query import profile, term_set
from contextlens.offline.relevance import (
    CANDIDATES,
    FEATURES,
    THRESHOLD,
    ChunkFeatures,
    RelevanceItem,
    chunk_features,
    relevance_texts,
    statement_relevance,
)

WEIGHTS = Path(__file__).resolve().parents[1] / "src/contextlens/offline/weights/relevance.json"
COSINE = ("similarity",)
#: Bootstrap replicates of the AUROC gain over the cosine.
BOOTSTRAP = 200
#: Chunks per retrieval context in the share check.
CONTEXT_SIZE = 4


def load(path: Path) -> list[dict[str, Any]]:
    """The rows of a labelled file, as ``calibrate`` reads them."""
    return [row.fields for row in read_labelled(path)]


@dataclass
class Pairs:
    """Input-chunk pairs: their label, source set, query and the query the chunk is from."""

    items: list[RelevanceItem]
    label: list[int]
    source: list[str]
    query: list[str]
    origin: list[str]

    def add(self, text: str, chunk: str, label: int, source: str, query: str, origin: str) -> None:
        self.items.append(RelevanceItem(text, [chunk]))
        self.label.append(label)
        self.source.append(source)
        self.query.append(query)
        self.origin.append(origin)


def shared_weight(question: str, terms: frozenset[str]) -> float:
    """The rarity weight of the question's terms that ``terms`` has."""
    prof = profile(question)
    return float(
        sum(w for t, w in zip(prof.terms, prof.weights.tolist(), strict=True) if t in terms)
    )


def trec_pairs(pairs: Pairs, rows: list[dict[str, Any]]) -> None:
    """Every judged passage with its label: grade >= 1 relevant, grade 0 not."""
    for r in rows:
        q = str(r["meta"]["query_id"])
        pairs.add(r["question"], r["contexts"][0], int(r["label"]), "trec", q, q)


def halueval_pairs(pairs: Pairs, rows: list[dict[str, Any]], seed: int) -> None:
    """Each question with its own knowledge (1) and the knowledge of the other question that
    shares most of its terms by rarity weight (0)."""
    rng = np.random.default_rng(seed)
    knowledge: dict[str, str] = {}
    for r in rows:
        knowledge.setdefault(r["question"].strip(), r["contexts"][0])
    questions = list(knowledge)
    passages = [knowledge[q] for q in questions]
    terms = [term_set(p)[0] for p in passages]
    for i, q in enumerate(questions):
        weight = np.array([shared_weight(q, t) if j != i else -1.0 for j, t in enumerate(terms)])
        j = int(rng.choice(np.flatnonzero(weight == weight.max())))
        pairs.add(q, passages[i], 1, "halueval", f"h{i}", f"h{i}")
        pairs.add(q, passages[j], 0, "halueval", f"h{i}", f"h{j}")


def features(items: list[RelevanceItem]) -> ChunkFeatures:
    embedder = CachedEmbedder(default_embedder(), Cache(None))
    vectors = asyncio.run(embed_distinct(embedder, relevance_texts(items)))
    feats = chunk_features(items, vectors)
    assert [k for k, _ in feats.keys] == list(range(len(items))), "a blank passage"
    return feats


def fit(x: np.ndarray, y: np.ndarray, c: float, names: tuple[str, ...]) -> LogisticModel:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    clf = LogisticRegression(C=c, max_iter=2000)
    clf.fit((x - mean) / scale, y)
    return LogisticModel(
        name="relevance",
        features=names,
        mean=mean,
        scale=scale,
        coef=clf.coef_[0].astype(np.float64),
        intercept=float(clf.intercept_[0]),
    )


@dataclass(frozen=True)
class Split:
    """One held-out source: the (train, test) masks of its fits, and what it was fitted on."""

    name: str
    fitted_on: str
    folds: list[tuple[np.ndarray, np.ndarray]]

    @property
    def test(self) -> np.ndarray:
        return np.logical_or.reduce([te for _, te in self.folds])


def splits(pairs: Pairs, folds: int, seed: int) -> list[Split]:
    source = np.array(pairs.source)
    trec, halu = source == "trec", source == "halueval"
    qids = sorted({q for q, s in zip(pairs.query, pairs.source, strict=True) if s == "trec"})
    perm = np.random.default_rng(seed).permutation(qids).tolist()
    fold_of = {q: i % folds for i, q in enumerate(perm)}
    fold = np.array([fold_of.get(q, -1) for q in pairs.query])
    src_fold = np.array([fold_of.get(q, -1) for q in pairs.origin])
    by_query = [((fold != k) & (src_fold != k), trec & (fold == k)) for k in range(folds)]
    return [
        Split(f"TREC by query ({folds} folds)", "other TREC queries + HaluEval", by_query),
        Split("HaluEval", "TREC", [(trec, halu)]),
        Split("TREC", "HaluEval", [(halu, trec)]),
    ]


def held_out(x: np.ndarray, y: np.ndarray, split: Split, c: float) -> np.ndarray:
    """Each test pair's probability from the fit that did not see it (NaN elsewhere)."""
    p = np.full(len(y), np.nan)
    names = tuple(f"f{i}" for i in range(x.shape[1]))
    for train, test in split.folds:
        p[test] = fit(x[train], y[train], c, names).predict(x[test])
    return p


def contexts(query: np.ndarray, rows: np.ndarray, seed: int) -> list[np.ndarray]:
    """Retrieval contexts of up to :data:`CONTEXT_SIZE` pairs of one query, each pair once."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    for q in np.unique(query[rows]):
        members = rng.permutation(np.flatnonzero(rows & (query == q)))
        out.extend(members[i : i + CONTEXT_SIZE] for i in range(0, len(members), CONTEXT_SIZE))
    return [c for c in out if len(c) > 1]


def share_error(
    p: np.ndarray,
    y: np.ndarray,
    similarities: list[np.ndarray],
    groups: list[np.ndarray],
    verdicts: bool = False,
) -> float:
    """Mean absolute error of the metric's score on the contexts ``groups`` against the share
    of their statements that are in relevant chunks; the score is the expected share of
    relevant statements, or with ``verdicts`` the share of "yes" verdicts."""
    errors = []
    for rows in groups:
        n = np.array([len(similarities[i]) for i in rows])
        if verdicts:
            yes = sum(
                int((statement_relevance(p[i], similarities[i]) >= THRESHOLD).sum()) for i in rows
            )
        else:
            yes = float((n * p[rows]).sum())
        errors.append(abs(yes / n.sum() - float((n * y[rows]).sum()) / n.sum()))
    return float(np.mean(errors))


def gain_interval(
    p: np.ndarray, base: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int
) -> tuple[float, float]:
    """95 % interval of ``AUROC(p) - AUROC(base)``, resampling whole groups (queries) with
    replacement, :data:`BOOTSTRAP` times."""
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    gains = []
    for _ in range(BOOTSTRAP):
        idx = np.concatenate([members[i] for i in rng.integers(len(members), size=len(members))])
        if 0 < y[idx].mean() < 1:
            gains.append(auroc(p[idx], y[idx]) - auroc(base[idx], y[idx]))
    low, high = np.percentile(gains, [2.5, 97.5])
    return float(low), float(high)


def within_query_auroc(p: np.ndarray, y: np.ndarray, q: np.ndarray) -> float:
    aucs = [auroc(p[q == k], y[q == k]) for k in np.unique(q) if 0 < y[q == k].mean() < 1]
    return float(np.mean(aucs)) if aucs else float("nan")


def _table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    print(" | ".join(h.ljust(n) for h, n in zip(header, widths, strict=True)))
    for line in lines:
        print(" | ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)))


@dataclass(frozen=True)
class Repeat:
    """One draw of the negatives and of the query folds, with the pairs' features."""

    seed: int
    pairs: Pairs
    feats: ChunkFeatures
    y: np.ndarray
    query: np.ndarray
    held: list[Split]

    @property
    def cosine(self) -> np.ndarray:
        return self.feats.columns(COSINE)[:, 0]

    def scores(self, names: tuple[str, ...], c: float) -> list[np.ndarray]:
        """The held-out probabilities of the model on ``names``, one array per source."""
        x = self.feats.columns(names)
        return [held_out(x, self.y, split, c) for split in self.held]


def draw(
    trec: list[dict[str, Any]], halu: list[dict[str, Any]], args: argparse.Namespace, seed: int
) -> Repeat:
    pairs = Pairs([], [], [], [], [])
    trec_pairs(pairs, trec)
    halueval_pairs(pairs, halu, seed)
    return Repeat(
        seed,
        pairs,
        features(pairs.items),
        np.array(pairs.label),
        np.array(pairs.query),
        splits(pairs, args.folds, seed),
    )


@dataclass(frozen=True)
class Candidate:
    """A feature set's held-out measures: one row per repeat, one column per source."""

    names: tuple[str, ...]
    gains: np.ndarray  # AUROC minus the raw cosine's AUROC
    eces: np.ndarray

    @property
    def eligible(self) -> bool:
        return self.names != COSINE and bool(self.gains.min() > 0)

    @property
    def worst_ece(self) -> float:
        return float(self.eces.max())


def candidate(names: tuple[str, ...], repeats: list[Repeat], c: float) -> Candidate:
    gains, eces = [], []
    for rep in repeats:
        ps = rep.scores(names, c)
        gains.append(
            [
                auroc(p[s.test], rep.y[s.test]) - auroc(rep.cosine[s.test], rep.y[s.test])
                for p, s in zip(ps, rep.held, strict=True)
            ]
        )
        eces.append(
            [
                expected_calibration_error(p[s.test], rep.y[s.test])
                for p, s in zip(ps, rep.held, strict=True)
            ]
        )
    return Candidate(names, np.array(gains), np.array(eces))


def select(candidates: list[Candidate]) -> Candidate | None:
    """The eligible set with the largest worst-source AUROC gain over the cosine (then fewer
    features); None when no set is eligible."""
    eligible = [c for c in candidates if c.eligible]
    if not eligible:
        return None
    return max(eligible, key=lambda c: (float(c.gains.min()), -len(c.names)))


def report(
    rep: Repeat, names: tuple[str, ...], c: float, gains: np.ndarray
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, ...]], float]:
    """The held-out table of ``names`` on one repeat: a dict per source for the weights file,
    the printed rows, and the AUROC within a TREC query."""
    y, query, sims = rep.y, rep.query, rep.feats.sentence_similarity
    model_p, base_p = rep.scores(names, c), rep.scores(COSINE, c)
    table: dict[str, dict[str, Any]] = {}
    lines: list[tuple[str, ...]] = []
    for k, (split, p, pb) in enumerate(zip(rep.held, model_p, base_p, strict=True)):
        test = split.test
        groups = contexts(query, test, rep.seed)
        low, high = gain_interval(p[test], rep.cosine[test], y[test], query[test], rep.seed)
        r = {
            "fitted_on": split.fitted_on,
            "pairs": int(test.sum()),
            "relevant": int(y[test].sum()),
            "cosine_auroc": auroc(rep.cosine[test], y[test]),
            "auroc": auroc(p[test], y[test]),
            "gain_interval": [round(low, 4), round(high, 4)],
            "gain_over_repeats": [
                round(float(gains[:, k].min()), 4),
                round(float(gains[:, k].max()), 4),
            ],
            "cosine_ece": expected_calibration_error(pb[test], y[test]),
            "ece": expected_calibration_error(p[test], y[test]),
            "contexts": len(groups),
            "cosine_share_error": share_error(pb, y, sims, groups),
            "share_error": share_error(p, y, sims, groups),
            "verdict_share_error": share_error(p, y, sims, groups, verdicts=True),
        }
        table[split.name] = {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
        lines.append(
            (
                split.name,
                split.fitted_on,
                f"{r['pairs']} ({r['relevant']} relevant)",
                f"{r['cosine_auroc']:.3f}",
                f"{r['auroc']:.3f}",
                f"{r['auroc'] - r['cosine_auroc']:+.4f} [{low:+.4f}, {high:+.4f}]",
                f"{gains[:, k].min():+.4f} to {gains[:, k].max():+.4f}",
                f"{r['cosine_ece']:.3f}",
                f"{r['ece']:.3f}",
                f"{r['cosine_share_error']:.3f}",
                f"{r['share_error']:.3f}",
                f"{r['verdict_share_error']:.3f}",
            )
        )
    first = rep.held[0].test
    within = within_query_auroc(model_p[0][first], y[first], query[first])
    return table, lines, within


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="draws of folds and ties")
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    trec = load(args.data / "trec_dl20_passage_graded.jsonl")
    halu = load(args.data / "halueval_qa.jsonl")
    repeats = [draw(trec, halu, args, args.seed + r) for r in range(args.repeats)]
    first = repeats[0]
    source = np.array(first.pairs.source)
    counts = {
        s: f"{int(((source == s) & (first.y == 1)).sum())} relevant / "
        f"{int(((source == s) & (first.y == 0)).sum())} not"
        for s in ("trec", "halueval")
    }
    print(
        f"pairs: TREC DL 2020 {counts['trec']} ({len(set(first.query[source == 'trec']))} "
        f"queries; the 0s are grade-0 passages of the same query), HaluEval {counts['halueval']}; "
        f"{args.repeats} draws of the folds and of HaluEval's tied negatives "
        f"(seeds {args.seed}..{args.seed + args.repeats - 1}); C={args.C}"
    )

    optional = [n for n in CANDIDATES if n not in COSINE]
    candidates = [
        candidate((*COSINE, *extra), repeats, args.C)
        for k in range(len(optional) + 1)
        for extra in itertools.combinations(optional, k)
    ]
    best = select(candidates)
    print(
        "\nselection over the sets of candidate features with the cosine: eligible = pooled "
        "AUROC above the raw cosine's on every held-out source in every draw; chosen (*) = the "
        "largest worst-source gain. Worst over the draws:"
    )
    short = ("TREC q", "HaluEval", "TREC")
    _table(
        (
            "features",
            *(f"AUROC gain {n}" for n in short),
            *(f"ECE {n}" for n in short),
            "eligible",
        ),
        [
            (
                ("* " if c is best else "  ") + ", ".join(c.names),
                *(f"{g:+.4f}" for g in c.gains.min(axis=0)),
                *(f"{e:.3f}" for e in c.eces.max(axis=0)),
                "yes" if c.eligible else "no",
            )
            for c in sorted(candidates, key=lambda c: (not c.eligible, -float(c.gains.min())))
        ],
    )
    if best is None:
        print("no feature set beats the raw cosine on every held-out source: the cosine ships")
        chosen = COSINE
        gains = next(c for c in candidates if c.names == COSINE).gains
    else:
        chosen, gains = best.names, best.gains

    table, lines, within = report(first, chosen, args.C, gains)
    print(f"\nheld-out table of the shipped features ({', '.join(chosen)}), draw {first.seed}:")
    _table(
        (
            "held-out source",
            "fitted on",
            "pairs",
            "AUROC cosine",
            "AUROC model",
            "gain [95% interval]",
            "gain, all draws",
            "ECE cosine",
            "ECE model",
            "share error cosine",
            "share error model",
            "share error, yes verdicts",
        ),
        lines,
    )
    print(
        f"within a TREC query (its judged passages against its negatives): AUROC {within:.3f}. "
        "Interval: queries (questions) resampled, 200 times. ECE cosine: a logistic on the "
        "cosine fitted on the same pairs. The metric's score of a one-chunk item is the "
        "model's probability; share error = mean absolute error of the metric's score (the "
        f"expected share of relevant statements) on contexts of up to {CONTEXT_SIZE} pairs of "
        "one query against the share of their statements in relevant chunks; 'yes verdicts': "
        "the share of statements whose verdict is yes instead."
    )

    model = fit(first.feats.columns(chosen), first.y, args.C, chosen)
    print(f"\nshipped model, fitted on every pair of draw {first.seed}; coefficients:")
    for name, coef, scale in zip(chosen, model.coef, model.scale, strict=True):
        print(f"  {name:16s} {coef:+.3f} standardised, {coef / scale:+.3f} per unit")
    print(f"  intercept        {model.intercept:+.3f}")
    if chosen != FEATURES:
        print(f"note: contextlens.offline.relevance.FEATURES is {FEATURES}; set it to {chosen}")
    if args.no_write:
        return
    if chosen != FEATURES:
        raise SystemExit("not written: set contextlens.offline.relevance.FEATURES first")
    by_query = first.held[0].name
    model = LogisticModel(
        name=model.name,
        features=model.features,
        mean=model.mean,
        scale=model.scale,
        coef=model.coef,
        intercept=model.intercept,
        meta={
            "what": "P(a chunk bears on the input: on its topic, whether or not it states "
            "the answer); see contextlens.offline.relevance",
            "data": f"TREC DL 2020 graded passages (grade >= 1 against grade 0 of the same "
            f"query): {counts['trec']}; HaluEval QA: {counts['halueval']}",
            "fitted": dt.date.today().isoformat(),
            "command": "benchmarks/fit_relevance.py "
            f"--folds {args.folds} --repeats {args.repeats} --C {args.C} --seed {args.seed}",
            "selection": {
                "candidates": list(CANDIDATES),
                "chosen": list(chosen),
                "rule": "pooled AUROC above the raw cosine's on every held-out source in every "
                "draw, the largest worst-source gain; the cosine alone when no set is",
            },
            "held_out": table,
            "grouped_cv": {
                "folds": args.folds,
                "auroc_pooled": table[by_query]["auroc"],
                "within_query_auroc": round(within, 4),
            },
        },
    )
    model.save(WEIGHTS)
    print(f"wrote {WEIGHTS}")


if __name__ == "__main__":
    main()
