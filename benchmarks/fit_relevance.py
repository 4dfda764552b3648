"""Fit the offline relevance model (``offline/weights/relevance.json``) and cross-validate it.

Run: CONTEXTLENS_CACHE_DIR=/path/to/cache .venv/bin/python benchmarks/fit_relevance.py
     [--data FILE] [--folds 5] [--offtopic 1.0] [--offtopic-weight 0.25] [--C 1.0]
     [--calibrate] [--no-write]

Data: TREC DL 2019 passage judgements (``trec_dl19_passage.jsonl``): label 1 = grade >= 2
("answers the query"), 0 = grade 1 ("on topic but does not answer"), 43 queries. Off-topic
pairs are added for training: each query with passages of other queries, labelled 0 (about
``--offtopic`` times as many as the judged passages, weighted ``--offtopic-weight``), so
that the model still rejects text about something else.

Features come from the library's own extractor
(:func:`contextlens.offline.relevance.chunk_features`) over the bundled embedder, through the
persistent embedding cache (set ``CONTEXTLENS_CACHE_DIR``; the first run embeds ~14k texts,
several minutes on 2 cores).

Protocol: cross-validation grouped by query (``meta.query_id``): each fold's model is fitted
without the fold's queries (neither their judged passages nor any off-topic pair that
involves them), and scores them. The table gives, per fold and pooled over the out-of-fold
scores, the AUROC of the answers-or-not task (on-topic passages only), the mean AUROC within
a query, the ECE (raw, and after a Platt map cross-fitted on the other folds), and the
AUROC and ECE of the metric score (share of "yes" statements) derived from the out-of-fold
chunk relevance; single-feature AUROCs for reference. The shipped model is then fitted on
every query; ``--calibrate`` also ships the Platt map (better ECE on on-topic text, but it
squeezes the scores towards the base rate, so the share of "yes" statements has fewer
distinct values and a lower AUROC: not the default).

Tried and left out, as they did not raise the grouped-CV AUROC (or raised it only across
queries while lowering it within a query): rarity-weighted coverage of the question's terms,
BM25, proximity of the terms, novelty (content beyond the question's words), the answer cue
over the whole passage instead of the best sentence, similarity to the question's topic
words alone, soft-max pooled sentence similarity, query-only features, gradient boosting,
and raw embedding dimensions (those overfit the 43 queries badly). Also tried, on the
embedder's per-token states: late interaction (each query word piece's best cosine with the
passage's word pieces, plain or weighted by rarity), encoding query and passage together in
one sequence, and the passage's vector pooled without the query's word pieces (the best of
them, by under 0.02 pooled AUROC, at the price of caching every passage's token states). None
comes near 0.70: the "query levels" line shows why. A query's mean score does not follow its share
of answering passages, and even centring the scores on each query's mean, which needs the
query's whole judged pool, leaves the pooled AUROC well short of it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
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
from contextlens.offline.relevance import (
    FEATURES,
    THRESHOLD,
    ChunkFeatures,
    RelevanceItem,
    chunk_features,
    relevance_texts,
    statement_relevance,
)

WEIGHTS = Path(__file__).resolve().parents[1] / "src/contextlens/offline/weights/relevance.json"


def load(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def pairs(
    rows: list[dict[str, Any]], ratio: float, seed: int
) -> tuple[list[RelevanceItem], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Items, labels, query of each item, source query of each passage, on-topic mask."""
    rng = np.random.default_rng(seed)
    items = [RelevanceItem(r["question"], [r["contexts"][0]]) for r in rows]
    labels = [int(r["label"]) for r in rows]
    query = [r["meta"]["query_id"] for r in rows]
    source = list(query)
    by_query: dict[str, str] = {r["meta"]["query_id"]: r["question"] for r in rows}
    n_off = round(ratio * len(rows))
    picks = rng.choice(len(rows), size=n_off, replace=True)
    qids = sorted(by_query)
    for k in picks.tolist():
        row = rows[k]
        others = [q for q in qids if q != row["meta"]["query_id"]]
        q = others[int(rng.integers(len(others)))]
        items.append(RelevanceItem(by_query[q], [row["contexts"][0]]))
        labels.append(0)
        query.append(q)
        source.append(row["meta"]["query_id"])
    on = np.zeros(len(items), dtype=bool)
    on[: len(rows)] = True
    return items, np.array(labels), np.array(query), np.array(source), on


def features(items: list[RelevanceItem]) -> ChunkFeatures:
    embedder = CachedEmbedder(default_embedder(), Cache(None))
    vectors = asyncio.run(embed_distinct(embedder, relevance_texts(items)))
    feats = chunk_features(items, vectors)
    assert [k for k, _ in feats.keys] == list(range(len(items))), "a blank passage"
    return feats


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, c: float, name: str) -> LogisticModel:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    clf = LogisticRegression(C=c, max_iter=2000)
    clf.fit((x - mean) / scale, y, sample_weight=w)
    return LogisticModel(
        name=name,
        features=FEATURES,
        mean=mean,
        scale=scale,
        coef=clf.coef_[0].astype(np.float64),
        intercept=float(clf.intercept_[0]),
    )


def within_query_auroc(p: np.ndarray, y: np.ndarray, q: np.ndarray) -> float:
    aucs = [auroc(p[q == k], y[q == k]) for k in np.unique(q) if 0 < y[q == k].mean() < 1]
    return float(np.mean(aucs)) if aucs else float("nan")


def query_levels(p: np.ndarray, y: np.ndarray, q: np.ndarray) -> str:
    """Where the pooled AUROC is lost: how the level of a query's scores relates to its share
    of answering passages, and two oracles that use a query's whole judged pool (which a
    metric never has): the scores centred on their query's mean, and that share alone."""
    ids, inverse = np.unique(q, return_inverse=True)
    mean_score = np.bincount(inverse, weights=p) / np.bincount(inverse)
    share = np.bincount(inverse, weights=y) / np.bincount(inverse)
    r = float(np.corrcoef(mean_score, share)[0, 1])
    return (
        f"query levels ({len(ids)} queries): correlation of a query's mean score with its share "
        f"of answering passages {r:+.2f}; oracles using the query's judged pool: scores centred "
        f"per query AUROC {auroc(p - mean_score[inverse], y):.3f}, the query's share "
        f"of answering passages alone {auroc(share[inverse], y):.3f}"
    )


def metric_scores(p: np.ndarray, similarities: list[np.ndarray]) -> np.ndarray:
    """The metric's score of each one-chunk item, from its chunk's relevance ``p`` and its
    statements' similarity to the input: the share of "yes" statements."""
    return np.array(
        [
            float(np.mean(statement_relevance(pi, sims) >= THRESHOLD))
            for pi, sims in zip(p, similarities, strict=True)
        ]
    )


def platt(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(a, b)`` of the recalibration ``sigmoid(a * logit(p) + b)`` fitted to ``y``."""
    z = np.log(np.clip(p, 1e-6, 1 - 1e-6) / np.clip(1 - p, 1e-6, 1))
    clf = LogisticRegression(C=1e6, max_iter=1000).fit(z[:, None], y)
    return float(clf.coef_[0, 0]), float(clf.intercept_[0])


def calibration_map(a: float, b: float, points: int = 101) -> tuple[np.ndarray, np.ndarray]:
    """The Platt recalibration as a monotone map on a grid, 0 -> 0 and 1 -> 1."""
    xs = np.linspace(0.0, 1.0, points)
    inner = xs[1:-1]
    ys = 1.0 / (1.0 + np.exp(-(a * np.log(inner / (1 - inner)) + b)))
    return xs, np.concatenate(([0.0], ys, [1.0]))


def recalibrate(p: np.ndarray, a: float, b: float) -> np.ndarray:
    xs, ys = calibration_map(a, b)
    return np.interp(p, xs, ys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path("/work/shared/data/trec_dl19_passage.jsonl")
    )
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--offtopic", type=float, default=1.0)
    parser.add_argument("--offtopic-weight", type=float, default=0.25)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="ship the Platt recalibration map (better ECE on on-topic text, coarser shares)",
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    rows = load(args.data)
    items, y, query, source, on = pairs(rows, args.offtopic, args.seed)
    feats = features(items)
    x = feats.matrix
    w = np.where(on, 1.0, args.offtopic_weight)

    qids = np.unique(query[on])
    perm = np.random.default_rng(args.seed).permutation(qids).tolist()
    fold_of = {q: i % args.folds for i, q in enumerate(perm)}
    fold = np.array([fold_of[q] for q in query])
    src_fold = np.array([fold_of[q] for q in source])
    oof = np.full(len(items), np.nan)
    for k in range(args.folds):
        train = (fold != k) & (src_fold != k)
        test = (fold == k) & on
        oof[test] = fit(x[train], y[train], w[train], args.C, "relevance").predict(x[test])
    # recalibration cross-fitted too: fold k's map is fitted on the other folds' scores
    cal = np.full(len(items), np.nan)
    for k in range(args.folds):
        other, test = (fold != k) & on, (fold == k) & on
        cal[test] = recalibrate(oof[test], *platt(oof[other], y[other]))
    sims = feats.sentence_similarity
    share = np.full(len(items), np.nan)
    shipped = cal if args.calibrate else oof
    share[on] = metric_scores(shipped[on], [sims[i] for i in np.flatnonzero(on)])

    def measures(sel: np.ndarray) -> list[float]:
        """AUROC, within-query AUROC, ECE raw and calibrated, metric AUROC and ECE."""
        yt = y[sel]
        return [
            auroc(oof[sel], yt),
            within_query_auroc(oof[sel], yt, query[sel]),
            expected_calibration_error(oof[sel], yt),
            expected_calibration_error(cal[sel], yt),
            auroc(share[sel], yt),
            expected_calibration_error(share[sel], yt),
        ]

    def row(name: str, sel: np.ndarray) -> tuple[str, ...]:
        counts = (str(len(np.unique(query[sel]))), str(int(sel.sum())))
        return (name, *counts, *(f"{v:.3f}" for v in measures(sel)))

    header = (
        "fold",
        "queries",
        "passages",
        "AUROC",
        "within-query AUROC",
        "ECE raw",
        "ECE calibrated",
        "metric AUROC",
        "metric ECE",
    )
    lines = [row(str(k), (fold == k) & on) for k in range(args.folds)]
    lines.append(row("pooled", on))
    print(
        f"grouped {args.folds}-fold CV by query: {len(qids)} queries, {int(on.sum())} judged "
        f"passages (grade >= 2 vs grade 1), {int((~on).sum())} off-topic pairs in training "
        f"at weight {args.offtopic_weight}, C={args.C}"
    )
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    print(" | ".join(h.ljust(n) for h, n in zip(header, widths, strict=True)))
    for line in lines:
        print(" | ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)))
    fold_mean = np.mean([float(r[3]) for r in lines[:-1]])
    print(f"mean of the fold AUROCs {fold_mean:.3f}; 'pooled' mixes the folds' models.")
    print(
        "ECE calibrated: with a Platt map cross-fitted on the other folds "
        f"({'shipped' if args.calibrate else 'not shipped'}). metric = share of 'yes' "
        f"statements of the one-chunk item, from the {'calibrated' if args.calibrate else 'raw'}"
        " score."
    )

    print(query_levels(oof[on], y[on], query[on]))

    # off-topic rejection: fitted on half the queries, scored on pairs within the other half
    half, src_half = fold % 2, src_fold % 2
    train = (half == 0) & (src_half == 0)
    held = (half == 1) & (src_half == 1)
    p_held = fit(x[train], y[train], w[train], args.C, "relevance").predict(x[held])
    off_auc = auroc(p_held, on[held])
    print(
        f"off-topic rejection (held-out half, on-topic vs off-topic pairs): AUROC {off_auc:.3f}; "
        f"mean raw score off-topic {p_held[~on[held]].mean():.3f}, "
        f"on-topic {p_held[on[held]].mean():.3f}"
    )
    yo = y[on]
    print(
        "single features (on-topic, no fitting): "
        + ", ".join(f"{name} {auroc(x[on][:, i], yo):.3f}" for i, name in enumerate(FEATURES))
    )

    model = fit(x, y, w, args.C, "relevance")
    a, b = platt(oof[on], yo)
    print(f"shipped model (all queries); recalibration a={a:.3f}, b={b:+.3f}; coefficients:")
    for name, c in zip(FEATURES, model.coef, strict=True):
        print(f"  {name:16s} {c:+.3f}")
    print(f"  intercept        {model.intercept:+.3f}")
    if args.no_write:
        return
    pooled = [round(v, 3) for v in measures(on)]
    model = LogisticModel(
        name=model.name,
        features=model.features,
        mean=model.mean,
        scale=model.scale,
        coef=model.coef,
        intercept=model.intercept,
        calibration=calibration_map(a, b) if args.calibrate else None,
        meta={
            "what": "P(a chunk answers the input); see contextlens.offline.relevance",
            "data": f"{args.data.name}: {int(on.sum())} judged passages of {len(qids)} "
            f"queries + {int((~on).sum())} off-topic pairs (label 0, weight "
            f"{args.offtopic_weight})",
            "fitted": dt.date.today().isoformat(),
            "command": "benchmarks/fit_relevance.py "
            f"--folds {args.folds} --offtopic {args.offtopic} "
            f"--offtopic-weight {args.offtopic_weight} --C {args.C} --seed {args.seed}"
            + (" --calibrate" if args.calibrate else ""),
            "calibration": (
                f"Platt on the out-of-fold on-topic scores: a={a:.4f}, b={b:.4f}"
                if args.calibrate
                else "none: calibrated on the training mix of judged and off-topic pairs"
            ),
            "grouped_cv": {
                "folds": args.folds,
                "auroc_pooled": pooled[0],
                "auroc_fold_mean": round(float(fold_mean), 3),
                "within_query_auroc": pooled[1],
                "ece_raw": pooled[2],
                "ece_calibrated": pooled[3],
                "metric_auroc": pooled[4],
                "metric_ece": pooled[5],
                "offtopic_auroc": round(float(off_auc), 3),
            },
        },
    )
    model.save(WEIGHTS)
    print(f"wrote {WEIGHTS}")


if __name__ == "__main__":
    main()
