"""Choose and fit the calibration of the claim reader's reply scores; print its held-out table.

    CONTEXTLENS_CACHE_DIR=DIR benchmarks/.train-venv/bin/python \
        benchmarks/fit_reader_calibration.py [--no-write]

Reads the held-out verdict probabilities ``train_reader.py`` wrote
(``benchmarks/.reader/held_out.json``: every item of each source read by a reader trained
without that source) and computes each reply's extracted features with the library's own
code (:func:`contextlens.offline.support.support_features`). A calibration is a logistic
model (each source weighted alike) over the reader's features and, by candidate, some of
the extractor's (:data:`CANDIDATES`).

Each candidate is measured leave one source out, on top of a reader that never saw the
source: the AUROC and expected calibration error (10 bins) on its items, and the AUROC of
two contrasts read by the same held-out reader: the "edit contrast", the source's replies
people judged supported against the same replies with one claim's fact changed
(``_pairgen.one_edit``), and the "copy contrast", a claim of such a reply in its own words
against the evidence sentence closest to it copied with one fact changed. The candidate
chosen has the best mean, over the natural sources, of the three AUROCs (it must rank
natural errors and read, not match words). Printed: the candidates' summary and the chosen
one's table. With no ``--no-write``, the chosen calibration fitted on every source is
written to ``src/contextlens/offline/weights/support_reader.json`` (a
:class:`contextlens.offline.model.LogisticModel`) with the held-out table in its ``meta``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _pairgen import one_edit
from _support_sources import DATA, SPECS, item, read_rows

from contextlens.calibration import auroc, expected_calibration_error
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.minilm import default_embedder
from contextlens.engine.cache import open_cache
from contextlens.offline.reader import ClaimReader, claim_pairs
from contextlens.offline.reader_calibration import READER_FEATURES, reply_features
from contextlens.offline.support import SupportItem, support_features, unscored

ROOT = Path(__file__).resolve().parents[1]
HELD = ROOT / "benchmarks/.reader/held_out.json"
FOLDS = ROOT / "benchmarks/.reader"
WEIGHTS = ROOT / "src/contextlens/offline/weights/support_reader.json"
L2 = 1e-2
#: Supported replies per source in its edit contrast, at most.
CONTRAST = 300
SEED = 0

CANDIDATES: dict[str, tuple[str, ...]] = {
    "reader": READER_FEATURES,
    "reader + findings": (
        *READER_FEATURES,
        "log_new_numbers",
        "log_novel_names",
        "negation_mismatch",
        "antonym",
        "sim_min",
    ),
    "reader + features model": (*READER_FEATURES, "sim_mean", "log_new_numbers", "word_share"),
}


@dataclass
class Source:
    name: str
    natural: bool
    x: list[dict[str, float]]  # every item with claims and evidence
    y: np.ndarray
    edit_x: list[dict[str, float]]  # edit contrast: supported replies, then their edits
    edit_y: np.ndarray
    copy_x: list[dict[str, float]]  # copy contrast: supported claims, then edited copies
    copy_y: np.ndarray


def _features(
    items: list[SupportItem], probs: list[np.ndarray], embedder: Any
) -> list[dict[str, float] | None]:
    feats = asyncio.run(support_features(items, embedder))
    out: list[dict[str, float] | None] = []
    for f, p in zip(feats, probs, strict=True):
        ok = len(p) and unscored(f) is None and len(p) == len(f.claims)
        out.append(reply_features(p, f.reply) if ok and f.reply is not None else None)
    return out


def _edited(row: dict[str, Any], claims: list[str], rng: np.random.Generator) -> str | None:
    """The row's answer with one claim's fact changed, or None when no claim allows one."""
    answer = str(row["answer"])
    context = "\n".join(row.get("contexts") or [])
    for j in rng.permutation(len(claims)).tolist():
        edit = one_edit(claims[j], context, [], rng)
        if edit is not None and claims[j] in answer:
            return answer.replace(claims[j], edit[1], 1)
    return None


def load_source(name: str, entry: dict[str, Any], reader: ClaimReader, embedder: Any) -> Source:
    spec = next(s for s in SPECS if s.name == name)
    rows = read_rows(DATA, spec)
    assert [r["id"] for r in rows] == entry["ids"], f"{name}: the data changed since training"
    items = [item(r) for r in rows]
    probs = [np.asarray(c).reshape(-1, 3) for c in entry["claims"]]
    found = _features(items, probs, embedder)
    keep = [i for i, v in enumerate(found) if v is not None]
    rng = np.random.default_rng(SEED)
    feats = asyncio.run(support_features(items, embedder))
    originals, edits = [], []
    for i in rng.permutation(len(rows)).tolist():
        if rows[i]["label"] != 1 or found[i] is None:
            continue
        new = _edited(rows[i], feats[i].claims, rng)
        if new is not None:
            originals.append(i)
            edits.append(SupportItem(new, items[i].evidence, question=items[i].question))
        if len(originals) >= CONTRAST:
            break
    pairs = asyncio.run(claim_pairs(edits, embedder))
    edit_probs = [reader.predict(p.pairs) for p in pairs]
    edit_found = _features(edits, edit_probs, embedder)
    both = [(found[i], e) for i, e in zip(originals, edit_found, strict=True) if e is not None]
    edit_x = [a for a, _ in both] + [b for _, b in both]
    edit_y = np.r_[np.ones(len(both)), np.zeros(len(both))]
    copy_x, copy_y = _copy_contrast(rows, items, feats, found, reader, embedder, rng)
    return Source(
        name,
        bool(entry["natural"]),
        [found[i] for i in keep],  # type: ignore[misc]
        np.array([entry["labels"][i] for i in keep], dtype=float),
        edit_x,
        edit_y,
        copy_x,
        copy_y,
    )


def _copy_contrast(
    rows: list[dict[str, Any]],
    items: list[SupportItem],
    feats: list[Any],
    found: list[dict[str, float] | None],
    reader: ClaimReader,
    embedder: Any,
    rng: np.random.Generator,
) -> tuple[list[dict[str, float]], np.ndarray]:
    """A claim of a reply people judged supported, in its own words, against the evidence
    sentence closest to it copied with one fact changed: each a reply of one sentence."""
    good: list[SupportItem] = []
    bad: list[SupportItem] = []
    for i in rng.permutation(len(rows)).tolist():
        if rows[i]["label"] != 1 or found[i] is None:
            continue
        j = int(rng.integers(len(feats[i].claims)))
        closest = feats[i].closest[j]
        edit = one_edit(closest, closest, [], rng) if closest else None
        if edit is None or closest == feats[i].claims[j]:
            continue
        q = items[i].question
        good.append(SupportItem(feats[i].claims[j], items[i].evidence, question=q))
        bad.append(SupportItem(edit[1], items[i].evidence, question=q))
        if len(good) >= CONTRAST:
            break
    texts = good + bad
    pairs = asyncio.run(claim_pairs(texts, embedder))
    found_all = _features(texts, [reader.predict(p.pairs) for p in pairs], embedder)
    n = len(good)
    kept = [(a, b) for a, b in zip(found_all[:n], found_all[n:], strict=True) if a and b]
    return [a for a, _ in kept] + [b for _, b in kept], np.r_[
        np.ones(len(kept)), np.zeros(len(kept))
    ]


def _matrix(rows: list[dict[str, float]], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[r[n] for n in names] for r in rows], dtype=float)


def fit(parts: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """A logistic model over ``parts`` (features, labels), each part weighted alike."""
    x = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    w = np.concatenate([np.full(len(p[1]), 1.0 / len(p[1])) for p in parts])
    w *= len(w) / w.sum()
    mean, scale = x.mean(0), x.std(0) + 1e-9
    design = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    penalty = np.diag([L2 * len(w)] * x.shape[1] + [0.0])
    theta = np.zeros(x.shape[1] + 1)
    for _ in range(100):  # Newton steps on the weighted, L2-penalised log-loss
        p = 1 / (1 + np.exp(-np.clip(design @ theta, -40, 40)))
        grad = design.T @ (w * (p - y)) + penalty @ theta
        hess = (design * (w * p * (1 - p))[:, None]).T @ design + penalty
        step = np.linalg.solve(hess + 1e-9 * np.eye(len(theta)), grad)
        theta -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"mean": mean, "scale": scale, "coef": theta[:-1], "intercept": float(theta[-1])}


def predict(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    t = ((x - model["mean"]) / model["scale"]) @ model["coef"] + model["intercept"]
    return 1 / (1 + np.exp(-np.clip(t, -40, 40)))


def held_out(sources: list[Source], names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for s in sources:
        model = fit([(_matrix(o.x, names), o.y) for o in sources if o is not s])
        p = predict(model, _matrix(s.x, names))
        edit = predict(model, _matrix(s.edit_x, names)) if s.edit_x else np.zeros(0)
        copy = predict(model, _matrix(s.copy_x, names)) if s.copy_x else np.zeros(0)
        table[s.name] = {
            "n": len(s.y),
            "auroc": round(auroc(p, s.y), 4),
            "ece": round(expected_calibration_error(p, s.y), 4),
            "positive": round(float(s.y.mean()), 4),
            "mean_score": round(float(p.mean()), 4),
            "edit_contrast_n": len(s.edit_y),
            "edit_contrast_auroc": round(auroc(edit, s.edit_y), 4) if len(edit) else None,
            "copy_contrast_n": len(s.copy_y),
            "copy_contrast_auroc": round(auroc(copy, s.copy_y), 4) if len(copy) else None,
            "natural": s.natural,
        }
    return table


def merit(table: dict[str, dict[str, Any]]) -> float:
    """Mean over the natural sources of the mean of their AUROC and both contrasts' AUROC."""
    keys = ("auroc", "edit_contrast_auroc", "copy_contrast_auroc")
    vals = [np.mean([t[k] or 0.5 for k in keys]) for t in table.values() if t["natural"]]
    return float(np.mean(vals))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=Path, default=HELD)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    held = json.loads(args.held.read_text())
    folds = len({tuple(v["held_out_with"]) for v in held.values()})
    embedder = CachedEmbedder(default_embedder(), open_cache(True))
    sources = []
    for name, entry in held.items():
        k = next(i for i, s in enumerate(SPECS) if s.name == name) % folds  # train_reader's
        path = FOLDS / f"fold-{k}.onnx"
        assert path.exists(), f"{path} is missing: run train_reader.py"
        sources.append(load_source(name, entry, ClaimReader(path, sha256=None), embedder))
        print(
            f"{name}: {len(sources[-1].y)} items, {len(sources[-1].edit_y)} in its edit "
            f"contrast, {len(sources[-1].copy_y)} in its copy contrast",
            flush=True,
        )
    tables = {c: held_out(sources, names) for c, names in CANDIDATES.items()}
    print("\ncandidates (each source held out from the reader and the calibration):")
    print(
        f"{'candidate':28} {'merit':>6} {'worst AUROC':>12} {'worst edit':>11} "
        f"{'worst copy':>11} {'median ECE':>11}"
    )
    for c, t in tables.items():
        nat = [v for v in t.values() if v["natural"]]
        print(
            f"{c:28} {merit(t):>6.3f} {min(v['auroc'] for v in nat):>12.3f} "
            f"{min(v['edit_contrast_auroc'] or 0 for v in nat):>11.3f} "
            f"{min(v['copy_contrast_auroc'] or 0 for v in nat):>11.3f} "
            f"{np.median([v['ece'] for v in t.values()]):>11.3f}"
        )
    chosen = max(tables, key=lambda c: merit(tables[c]))
    table = tables[chosen]
    print(f"\nchosen: {chosen}")
    print(
        f"{'held-out source':32} {'n':>5} {'AUROC':>6} {'ECE':>6} {'pos':>5} {'mean p':>6} "
        f"{'edit AUROC':>10} {'copy AUROC':>10}"
    )
    for name, t in table.items():
        edit = "-" if t["edit_contrast_auroc"] is None else f"{t['edit_contrast_auroc']:.3f}"
        copy = "-" if t["copy_contrast_auroc"] is None else f"{t['copy_contrast_auroc']:.3f}"
        print(
            f"{name:32} {t['n']:>5} {t['auroc']:>6.3f} {t['ece']:>6.3f} "
            f"{t['positive']:>5.2f} {t['mean_score']:>6.2f} {edit:>10} {copy:>10}"
        )
    eces = [t["ece"] for t in table.values()]
    print(f"median ECE {np.median(eces):.3f}, worst {max(eces):.3f}")
    if args.no_write:
        return
    names = CANDIDATES[chosen]
    model = fit([(_matrix(s.x, names), s.y) for s in sources])
    out = {
        "name": "support_reader",
        "features": list(names),
        "mean": model["mean"].round(6).tolist(),
        "scale": model["scale"].round(6).tolist(),
        "coef": model["coef"].round(6).tolist(),
        "intercept": round(model["intercept"], 6),
        "meta": {
            "what": "P(people judge the reply supported) from the claim reader's verdicts",
            "fitted": dt.date.today().isoformat(),
            "command": "benchmarks/fit_reader_calibration.py",
            "candidate": chosen,
            "fitted_on": [s.name for s in sources],
            "held_out": table,
        },
    }
    WEIGHTS.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS}")


if __name__ == "__main__":
    main()
