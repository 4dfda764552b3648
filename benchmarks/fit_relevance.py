"""Fit the offline relevance model (``offline/weights/relevance.json``), chosen on held-out sources.

Run: CONTEXTLENS_CACHE_DIR=/path/to/cache .venv/bin/python benchmarks/fit_relevance.py
     [--data DIR] [--folds 5] [--repeats 3] [--hard 1.0] [--random 0.25] [--C 1.0]
     [--seed 0] [--no-write]

Target: whether a chunk *bears on* the input, DeepEval's contextual relevancy ("is this
statement relevant to the input?"): text on the input's topic is relevant whether or not it
states the answer; text about something else is not.

Data: pairs of an input and one chunk, from two public sources in ``--data``:

* TREC DL 2019 passage judgements (``trec_dl19_passage.jsonl``, 43 queries): every judged
  passage (grades 1 to 3; this copy has no grade 0) is relevant to its query (label 1).
  Negatives (label 0) look judged too: passages judged for *other* queries that share at
  least one of the query's terms (hard negatives, drawn at random among them, ``--hard``
  times as many as the query's judged passages), and a few passages of other queries drawn
  at random (``--random`` times as many).
* HaluEval QA (``halueval_qa.jsonl``, 1,000 questions): a question's own knowledge is
  relevant; the knowledge of the other question that shares most of its terms (weighted by
  rarity) is not. The labels come from how the pairs are built: a few of those "other"
  passages do bear on the question (the same park or film named in both).

Held-out sources (each model is scored only on pairs it was not fitted on):

* TREC by query: ``--folds`` folds of queries; a fold's model is fitted without the fold's
  queries and without every pair that involves them (as the query, or as the source of a
  negative passage), on the other TREC queries and all of HaluEval.
* HaluEval, from a model fitted on TREC alone; and TREC, from a model fitted on HaluEval
  alone.

Baseline: the raw cosine of input and chunk (the bundled embedder). Its AUROC is that of the
raw cosine; its ECE is that of a logistic on the cosine alone, fitted on the same training
pairs as the model, so that both are probabilities.

Selection: every set of the extractor's candidate features
(:data:`contextlens.offline.relevance.CANDIDATES`) that contains the cosine, scored on
``--repeats`` draws of the negatives and of the query folds (seeds ``--seed``, ``--seed`` +
1, ...). A set is eligible when its AUROC is above the raw cosine's on every held-out source
in every draw. The chosen set has the fewest features among the eligible sets whose
worst-source ECE (over sources and draws) is within ``ECE_TOLERANCE`` of the lowest: the AUROC
gains over the cosine are a few thousandths for every eligible set, while how well the
probabilities carry from one source to the other (the metric's verdict is the probability at
0.5) differs twofold, and a feature that only fits one source is left out.

The table of the chosen set (the first draw, on which the shipped model is fitted) gives per
held-out source: the AUROC of the cosine and of the model, the gain with a 95 % interval
(queries, or HaluEval questions, resampled) and its range over the draws; the ECE of both;
the AUROC and ECE of the metric's score for the one-chunk item (the share of "yes"
statements); and the error of the metric's score on retrieval contexts of several chunks (up
to 4 pairs of one query, the truth being the share of their statements that are in relevant
chunks, which counts every statement of a relevant chunk as relevant): mean absolute error,
cosine beside model.

Features come from the library's own extractor
(:func:`contextlens.offline.relevance.chunk_features`) over the bundled embedder, through the
persistent embedding cache (set ``CONTEXTLENS_CACHE_DIR``; the first run embeds ~20k texts,
several minutes on 2 cores). The shipped model is then fitted on every pair of the first
draw, both sources, and the held-out table recorded in the weights file's ``meta``.

Not a candidate any more: the answer cue (whether the best sentence has what the question word
asks for), made for a target this model no longer has (does the passage *answer* the query).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from contextlens.calibration import auroc, expected_calibration_error
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
#: Sets whose worst held-out ECE is within this of the lowest count as equally calibrated.
ECE_TOLERANCE = 0.01
#: Bootstrap replicates of the AUROC gain over the cosine.
BOOTSTRAP = 200
#: Chunks per retrieval context in the share check.
CONTEXT_SIZE = 4


def load(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


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


def trec_pairs(
    pairs: Pairs, rows: list[dict[str, Any]], hard: float, rand: float, seed: int
) -> None:
    """Every judged passage relevant to its query; hard and random other-query negatives."""
    rng = np.random.default_rng(seed)
    text = {r["meta"]["query_id"]: r["question"] for r in rows}
    qid = [r["meta"]["query_id"] for r in rows]
    passage = [r["contexts"][0] for r in rows]
    terms = [term_set(p)[0] for p in passage]
    for r, q, p in zip(rows, qid, passage, strict=True):
        pairs.add(r["question"], p, 1, "trec", q, q)
    for q in sorted(text):
        judged = qid.count(q)
        others = [i for i, k in enumerate(qid) if k != q]
        sharing = [i for i in others if shared_weight(text[q], terms[i]) > 0]
        picked = rng.choice(sharing, size=min(round(hard * judged), len(sharing)), replace=False)
        rest = sorted(set(others) - set(picked.tolist()))
        randoms = rng.choice(rest, size=min(max(1, round(rand * judged)), len(rest)), replace=False)
        for i in [*picked.tolist(), *randoms.tolist()]:
            pairs.add(text[q], passage[i], 0, "trec", q, qid[i])


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


def metric_scores(p: np.ndarray, similarities: list[np.ndarray]) -> np.ndarray:
    """The metric's score of each one-chunk item: its share of "yes" statements."""
    return np.array(
        [
            float(np.mean(statement_relevance(pi, sims) >= THRESHOLD))
            for pi, sims in zip(p, similarities, strict=True)
        ]
    )


def contexts(query: np.ndarray, rows: np.ndarray, seed: int) -> list[np.ndarray]:
    """Retrieval contexts of up to :data:`CONTEXT_SIZE` pairs of one query, each pair once."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    for q in np.unique(query[rows]):
        members = rng.permutation(np.flatnonzero(rows & (query == q)))
        out.extend(members[i : i + CONTEXT_SIZE] for i in range(0, len(members), CONTEXT_SIZE))
    return [c for c in out if len(c) > 1]


def share_error(
    p: np.ndarray, y: np.ndarray, similarities: list[np.ndarray], groups: list[np.ndarray]
) -> float:
    """Mean absolute error of the metric's score on the contexts ``groups`` against the share
    of their statements that are in relevant chunks."""
    errors = []
    for rows in groups:
        n = np.array([len(similarities[i]) for i in rows])
        yes = sum(
            int((statement_relevance(p[i], similarities[i]) >= THRESHOLD).sum()) for i in rows
        )
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
    trec_pairs(pairs, trec, args.hard, args.random, seed)
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
    """The eligible set with the fewest features within :data:`ECE_TOLERANCE` of the lowest
    worst-source ECE (then the lower ECE); None when no set is eligible."""
    eligible = [c for c in candidates if c.eligible]
    if not eligible:
        return None
    lowest = min(c.worst_ece for c in eligible)
    close = [c for c in eligible if c.worst_ece <= lowest + ECE_TOLERANCE]
    return min(close, key=lambda c: (len(c.names), c.worst_ece))


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
        share = metric_scores(p[test], [sims[i] for i in np.flatnonzero(test)])
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
            "metric_auroc": auroc(share, y[test]),
            "metric_ece": expected_calibration_error(share, y[test]),
            "contexts": len(groups),
            "cosine_share_error": share_error(pb, y, sims, groups),
            "share_error": share_error(p, y, sims, groups),
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
                f"{r['metric_auroc']:.3f}",
                f"{r['metric_ece']:.3f}",
                f"{r['cosine_share_error']:.3f}",
                f"{r['share_error']:.3f}",
            )
        )
    first = rep.held[0].test
    within = within_query_auroc(model_p[0][first], y[first], query[first])
    return table, lines, within


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="draws of negatives and folds")
    parser.add_argument("--hard", type=float, default=1.0, help="hard negatives per judged")
    parser.add_argument("--random", type=float, default=0.25, help="random negatives per judged")
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    trec = load(args.data / "trec_dl19_passage.jsonl")
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
        f"pairs: TREC {counts['trec']} ({len(set(first.query[source == 'trec']))} queries), "
        f"HaluEval {counts['halueval']}; {args.repeats} draws of the negatives and folds "
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
        "\nselection over the sets of candidate features with the cosine: eligible = AUROC "
        "above the raw cosine's on every held-out source in every draw; chosen (*) = fewest "
        f"features within {ECE_TOLERANCE} of the lowest worst-source ECE. Worst over the draws:"
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
            for c in sorted(candidates, key=lambda c: (not c.eligible, c.worst_ece, len(c.names)))
        ],
    )
    if best is None:
        raise SystemExit("no feature set beats the raw cosine on every held-out source")
    chosen = best.names

    table, lines, within = report(first, chosen, args.C, best.gains)
    print(f"\nheld-out table of the chosen features ({', '.join(chosen)}), draw {first.seed}:")
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
            "metric AUROC",
            "metric ECE",
            "share error cosine",
            "share error model",
        ),
        lines,
    )
    print(
        f"within a TREC query (its judged passages against its negatives): AUROC {within:.3f}. "
        "Interval: queries (questions) resampled, 200 times. ECE cosine: a logistic on the "
        "cosine fitted on the same pairs. metric = the share of 'yes' statements of the "
        "one-chunk item; share error = mean absolute error of the metric's score on contexts "
        f"of up to {CONTEXT_SIZE} pairs of one query against the share of their statements in "
        "relevant chunks."
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
            "data": f"TREC DL 2019 passages: {counts['trec']}; HaluEval QA: {counts['halueval']}",
            "fitted": dt.date.today().isoformat(),
            "command": "benchmarks/fit_relevance.py "
            f"--folds {args.folds} --repeats {args.repeats} --hard {args.hard} "
            f"--random {args.random} --C {args.C} --seed {args.seed}",
            "selection": {
                "candidates": list(CANDIDATES),
                "chosen": list(chosen),
                "rule": "AUROC above the raw cosine's on every held-out source in every "
                f"draw; fewest features within {ECE_TOLERANCE} of the lowest worst-source ECE",
            },
            "held_out": table,
            "grouped_cv": {
                "folds": args.folds,
                "auroc_pooled": table[by_query]["auroc"],
                "within_query_auroc": round(within, 4),
                "metric_auroc": table[by_query]["metric_auroc"],
            },
        },
    )
    model.save(WEIGHTS)
    print(f"wrote {WEIGHTS}")


if __name__ == "__main__":
    main()
