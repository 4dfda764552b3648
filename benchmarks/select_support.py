"""Choose and fit the offline support (faithfulness) model on held-out sources.

Run: CONTEXTLENS_CACHE_DIR=/path/to/cache .venv/bin/python benchmarks/select_support.py
     [--data DIR] [--C 1.0] [--no-write]

Target: whether people judged a reply (summary, dialogue reply, answer, claim) fully supported
by its context, the label of every ``answer adherence`` set in ``--data``.

Sources (11): BEGIN dev (dialogue replies), each of the 8 SummEdits domains (summaries and
small edits of them), HaluEval QA (right against hallucinated answers; labels by
construction) and WiCE (a Wikipedia sentence against the web pages it cites, long contexts).
Every candidate is scored leave-one-source-out: fitted on the other 10 sources, scored on the
held-out one. In a fit each data set weighs the same (the SummEdits domains share its weight)
and within a source each class weighs half (the sets' base rates, 27 % to 50 % faithful, are
not a property of a reply).

Baseline (the plain model the library's must beat): a logistic regression of three features
of the whole reply, fitted on the same training sources: the cosine of the reply and the
joined context, the minimum over reply sentences of each one's best cosine with a context
sentence, and the share of the reply's content words found in the context (the bundled
embedder; content words as :mod:`contextlens.offline.features` counts them), fitted freely
and weighted like the model. The line under the table compares the model with the same
baseline with its coefficients kept >= 0 as well.

Model: a logistic regression over features from the library's own extractor
(:func:`contextlens.offline.support.support_features`, the code the library scores with),
each coefficient kept on the side of :data:`contextlens.offline.features.DIRECTION`.

Selection, on the worst held-out source (AUROC of the model minus the baseline's):

* backward from every feature the extractor offers
  (:data:`contextlens.offline.features.CANDIDATES`): at each step the
  feature whose removal leaves the highest worst-source gain goes, as long as that gain does
  not fall by more than :data:`TOLERANCE` below the best seen (a feature that does not help
  the worst source goes; fewer features win a tie);
* then synthetic negatives, added to every training source from its own items: off-topic
  (a faithful reply paired with another item's context) and edited (a faithful reply with
  one changed number, negation, opposite word or name; embedded as its original, as a
  one-word edit barely moves the embedding); a kind is kept only if it raises the
  worst-source gain.

The printed table: per held-out source, items, the baseline's and the model's AUROC and
their difference, and both ECEs (10 equal-width bins); then the worst-source line. Without
``--no-write`` the chosen model is refitted on all 11 sources and written to
``src/contextlens/offline/weights/support.json`` with the table in its ``meta``.

Embeddings go through the persistent cache (set ``CONTEXTLENS_CACHE_DIR``; a cold run embeds
~100k texts, WiCE's long pages most of them, an hour or more on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

from contextlens.calibration import auroc, expected_calibration_error
from contextlens.embeddings.base import embed_distinct
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.minilm import default_embedder
from contextlens.engine.cache import open_cache
from contextlens.offline.features import (
    ANTONYMS,
    CANDIDATES,
    DIRECTION,
    FEATURES,
    facts,
    joint_facts,
)
from contextlens.offline.model import LogisticModel
from contextlens.offline.support import SupportItem, _claims, support_features
from contextlens.offline.text import sentences

WEIGHTS = Path(__file__).resolve().parents[1] / "src/contextlens/offline/weights/support.json"
FILES = ("begin_dev", "summedits", "halueval_qa", "wice")
BASELINE = ("reply_cosine", "sentence_cosine_min", "word_share")
#: A removal may lower the worst-source gain by this much below the best seen.
TOLERANCE = 0.002
#: Each synthetic kind's share of a training source's weight, when kept.
SYNTHETIC = 0.2
#: At most this many faithful replies of a source become synthetic negatives of each kind.
SYNTHETIC_MAX = 300
SEED = 0


@dataclass
class Source:
    """One held-out unit: its rows, library features (``ok``: scorable) and baseline features."""

    name: str
    rows: list[dict[str, Any]]
    x: np.ndarray
    ok: np.ndarray
    base: np.ndarray
    weight: float = 1.0  # in a fit: each data set weighs the same, its domains share it

    @property
    def y(self) -> np.ndarray:
        return np.array([r["label"] for r in self.rows], dtype=float)


def item(row: dict[str, Any]) -> SupportItem:
    """The item the ``Context`` metric builds for a labelled row (see ``calibrate``)."""
    return SupportItem(
        row["answer"],
        ["\n".join(row.get("contexts") or []), "", ""],
        question=row.get("question") or "",
    )


def library_features(rows: list[dict[str, Any]], embedder: Any) -> tuple[np.ndarray, np.ndarray]:
    """The extractor's reply rows (zeros for an unscorable item) and which items it scores."""
    feats = asyncio.run(support_features([item(r) for r in rows], embedder))
    ok = np.array([f.reply is not None for f in feats])
    x = np.stack([f.reply if f.reply is not None else np.zeros(len(CANDIDATES)) for f in feats])
    return x, ok


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


def baseline_features(rows: list[dict[str, Any]], embedder: Any) -> np.ndarray:
    """The baseline's three features of each row (zeros where a side is empty)."""
    replies = [r["answer"] for r in rows]
    contexts = ["\n".join(r.get("contexts") or []) for r in rows]
    reply_sents = [sentences(a) for a in replies]
    context_sents = [sentences(c) for c in contexts]
    texts = [t for t in (*replies, *contexts) if t.strip()]
    texts += [s for group in (*reply_sents, *context_sents) for s in group]
    vectors = asyncio.run(embed_distinct(embedder, dict.fromkeys(texts)))
    out = np.zeros((len(rows), 3))
    for i, (a, c, rs, cs) in enumerate(
        zip(replies, contexts, reply_sents, context_sents, strict=True)
    ):
        if not rs or not cs:
            continue
        [va, vc] = _unit(vectors.of([a, c]))
        sims = _unit(vectors.of(rs)) @ _unit(vectors.of(cs)).T
        words = facts(a).words
        found = joint_facts(tuple(cs)).words
        out[i] = (
            float(va @ vc),
            float(sims.max(axis=1).min()),
            len(words & found) / len(words) if words else 1.0,
        )
    return out


def load(data: Path, embedder: Any) -> list[Source]:
    """The 11 sources, in order: BEGIN dev, SummEdits by domain, HaluEval QA, WiCE."""
    out: list[Source] = []
    for name in FILES:
        with open(data / f"{name}.jsonl", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        x, ok = library_features(rows, embedder)
        base = baseline_features(rows, embedder)
        print(f"{name}: {len(rows)} items, {int((~ok).sum())} unscorable", flush=True)
        if name != "summedits":
            out.append(Source(name, rows, x, ok, base))
            continue
        domain = np.array([(r.get("meta") or {}).get("domain", "") for r in rows])
        for d in sorted(set(domain)):
            idx = np.flatnonzero(domain == d)
            part = (x[idx], ok[idx], base[idx], 1.0 / len(set(domain)))
            out.append(Source(f"summedits:{d}", [rows[i] for i in idx], *part))
    return out


# --------------------------------------------------------------------------- synthetic negatives

_NUM = re.compile(r"\b\d+(?:\.\d+)?\b")
_AUX = re.compile(r"\b(is|are|was|were|has|have|had|can|will|does|do|did|should|could)\b( not)?")
_CAP = re.compile(r"(?<=[a-z,] )[A-Z][a-z]{2,}\b")


def _faithful(s: Source, rng: np.random.Generator) -> list[dict[str, Any]]:
    pos = [r for r in s.rows if r["label"] == 1]
    keep = sorted(rng.choice(len(pos), min(SYNTHETIC_MAX, len(pos)), replace=False))
    return [pos[i] for i in keep]


def off_topic(s: Source, embedder: Any) -> Source:
    """Faithful replies of ``s`` paired with another item's context: label 0."""
    rng = np.random.default_rng(SEED)
    rows = []
    for r in _faithful(s, rng):
        while True:
            other = s.rows[int(rng.integers(len(s.rows)))]
            if other["contexts"] != r["contexts"]:
                break
        rows.append({**r, "contexts": other["contexts"], "label": 0})
    x, ok = library_features(rows, embedder)
    return Source(f"{s.name}:off-topic", rows, x, ok, np.zeros((len(rows), 3)), s.weight)


def _edit(answer: str, other_context: str, rng: np.random.Generator) -> str | None:
    """``answer`` with one unfaithful edit: a changed number, a negation added or removed, a
    word swapped for its opposite, or a name swapped for one from another context."""
    ops = ["number", "negation", "antonym", "name"]
    rng.shuffle(ops)
    for op in ops:
        if op == "number" and (m := _NUM.search(answer)):
            value = float(m.group(0))
            new = value + int(rng.integers(1, 10)) if value < 1000 else value * 2
            text = f"{new:g}" if "." in m.group(0) else str(int(new))
            return answer[: m.start()] + text + answer[m.end() :]
        if op == "negation" and (m := _AUX.search(answer)):
            repl = m.group(1) if m.group(2) else f"{m.group(1)} not"
            return answer[: m.start()] + repl + answer[m.end() :]
        if op == "antonym":
            words = [m for m in re.finditer(r"[A-Za-z]+", answer) if m.group(0).lower() in ANTONYMS]
            if words:
                m = words[int(rng.integers(len(words)))]
                new = sorted(ANTONYMS[m.group(0).lower()])[0]
                return answer[: m.start()] + new + answer[m.end() :]
        if op == "name" and (m := _CAP.search(answer)):
            pool = sorted(set(_CAP.findall(other_context)) - set(_CAP.findall(answer)))
            if pool:
                new = pool[int(rng.integers(len(pool)))]
                return answer[: m.start()] + new + answer[m.end() :]
    return None


class _Aliased:
    """An embedder that embeds an edited claim as its original."""

    def __init__(self, inner: Any, alias: dict[str, str]) -> None:
        self.inner, self.alias, self.name = inner, alias, inner.name

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed([self.alias.get(t, t) for t in texts])


def edited(s: Source, embedder: Any) -> Source:
    """Faithful replies of ``s`` with one unfaithful edit each: label 0."""
    rng = np.random.default_rng(SEED + 1)
    rows, alias = [], {}
    for r in _faithful(s, rng):
        other = s.rows[int(rng.integers(len(s.rows)))]
        new = _edit(r["answer"], "\n".join(other.get("contexts") or []), rng)
        if new is None or new == r["answer"]:
            continue
        before, after = _claims(r["answer"]), _claims(new)
        if len(before) != len(after):
            continue
        alias.update((a, b) for a, b in zip(after, before, strict=True) if a != b)
        rows.append({**r, "answer": new, "label": 0})
    x, ok = library_features(rows, _Aliased(embedder, alias))
    return Source(f"{s.name}:edited", rows, x, ok, np.zeros((len(rows), 3)), s.weight)


# --------------------------------------------------------------------------- fitting


def _logistic(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, c: float, bounds: list[tuple[Any, Any]]
) -> tuple[float, np.ndarray]:
    """Weighted L2 logistic regression with bounded coefficients: (intercept, coef)."""
    w = w * len(w) / w.sum()

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = theta[0] + x @ theta[1:]
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))
        value = (w * (y * np.logaddexp(0, -z) + (1 - y) * np.logaddexp(0, z))).sum()
        value += 0.5 / c * theta[1:] @ theta[1:]
        g = w * (p - y)
        return float(value), np.concatenate([[g.sum()], x.T @ g + theta[1:] / c])

    res = minimize(
        loss, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B", bounds=[(None, None), *bounds]
    )
    return float(res.x[0]), res.x[1:]


def _bound(direction: int) -> tuple[float | None, float | None]:
    return (0.0, None) if direction > 0 else (None, 0.0)


@dataclass(frozen=True)
class Spec:
    """A candidate: the library features it takes and the synthetic kinds it trains with."""

    features: tuple[str, ...]
    synthetic: tuple[str, ...] = ()


def _weights(s: Source, share: float, scorable: bool = True) -> np.ndarray:
    """Item weights summing to ``share`` of the source's weight; with both classes present,
    each class weighs half (the sources' base rates, 27 % to 50 % faithful, are not a
    property of a reply, so 0.5 is even odds)."""
    y, rows = s.y, s.ok if scorable else np.ones(len(s.rows), dtype=bool)
    w = np.zeros(len(y))
    classes = [rows & (y == k) for k in (0.0, 1.0) if (rows & (y == k)).any()]
    for members in classes:
        w[members] = s.weight * share / (len(classes) * members.sum())
    return w


def fit(
    train: Sequence[Source],
    spec: Spec,
    synthetic: dict[str, dict[str, Source]],
    c: float,
    name: str = "support",
) -> LogisticModel:
    """The model of ``spec`` from ``train`` (each source weighing the same) and, per kept kind,
    its synthetic negatives; a Platt map on the real items folded into the coefficients."""
    cols = [CANDIDATES.index(f) for f in spec.features]
    real = 1.0 - SYNTHETIC * len(spec.synthetic)
    parts = [(s, real) for s in train]
    parts += [(synthetic[k][s.name], SYNTHETIC) for s in train for k in spec.synthetic]
    parts = [(s, share) for s, share in parts if s.ok.any()]
    x = np.concatenate([s.x[s.ok][:, cols] for s, _ in parts])
    y = np.concatenate([s.y[s.ok] for s, _ in parts])
    w = np.concatenate([_weights(s, share)[s.ok] for s, share in parts])
    mean = np.average(x, axis=0, weights=w)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    scale[scale < 1e-9] = 1.0
    bounds = [_bound(DIRECTION[f]) for f in spec.features]
    b0, coef = _logistic((x - mean) / scale, y, w, c, bounds)
    if spec.synthetic:  # the probabilities of the real mix
        xr = np.concatenate([s.x[s.ok][:, cols] for s in train])
        yr = np.concatenate([s.y[s.ok] for s in train])
        wr = np.concatenate([_weights(s, 1.0)[s.ok] for s in train])
        z = b0 + ((xr - mean) / scale) @ coef
        b, (a,) = _logistic(z[:, None], yr, wr, 1e6, [(0.0, None)])
        b0, coef = a * b0 + b, a * coef
    return LogisticModel(name, spec.features, mean, scale, coef, b0)


def model_scores(model: LogisticModel, s: Source) -> np.ndarray:
    """The library's score: the model's probability, 0 for an item it cannot score."""
    cols = [CANDIDATES.index(f) for f in model.features]
    return np.where(s.ok, model.predict(s.x[:, cols]), 0.0)


def baseline_scores(
    train: Sequence[Source], test: Source, c: float, signed: bool = False
) -> np.ndarray:
    """The baseline fitted on ``train`` (each source weighing the same; ``signed``: its
    coefficients kept >= 0), scored on ``test``."""
    x = np.concatenate([s.base for s in train])
    y = np.concatenate([s.y for s in train])
    w = np.concatenate([_weights(s, 1.0, scorable=False) for s in train])
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    b0, coef = _logistic((x - mean) / scale, y, w, c, [(0.0 if signed else None, None)] * 3)
    z = b0 + ((test.base - mean) / scale) @ coef
    return 1.0 / (1.0 + np.exp(-z))


@dataclass(frozen=True)
class Held:
    """Held-out scores of one candidate: per source, its AUROC and ECE."""

    spec: Spec
    auroc: np.ndarray
    ece: np.ndarray


def held_out(
    sources: Sequence[Source], spec: Spec, synthetic: dict[str, dict[str, Source]], c: float
) -> Held:
    aucs, eces = [], []
    for s in sources:
        model = fit([o for o in sources if o is not s], spec, synthetic, c)
        p = model_scores(model, s)
        aucs.append(auroc(p, s.y))
        eces.append(expected_calibration_error(p, s.y))
    return Held(spec, np.array(aucs), np.array(eces))


def backward(
    sources: Sequence[Source],
    base_auc: np.ndarray,
    synthetic: dict[str, dict[str, Source]],
    c: float,
) -> tuple[Held, list[str]]:
    """Backward elimination on the worst-source gain; returns the kept set and a log."""
    current = held_out(sources, Spec(CANDIDATES), synthetic, c)
    best = float((current.auroc - base_auc).min())
    log = [f"all {len(CANDIDATES)} features: worst gain {best:+.4f}"]
    while len(current.spec.features) > 1:
        trials = [
            held_out(
                sources, Spec(tuple(f for f in current.spec.features if f != drop)), synthetic, c
            )
            for drop in current.spec.features
        ]
        worst = [float((t.auroc - base_auc).min()) for t in trials]
        k = int(np.argmax(worst))
        if worst[k] < best - TOLERANCE:
            break
        dropped = next(f for f in current.spec.features if f not in trials[k].spec.features)
        log.append(f"without {dropped}: worst gain {worst[k]:+.4f}")
        current, best = trials[k], max(best, worst[k])
    return current, log


def _table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    print(" | ".join(h.ljust(n) for h, n in zip(header, widths, strict=True)))
    for line in lines:
        print(" | ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    embedder = CachedEmbedder(default_embedder(), open_cache(True))
    sources = load(args.data, embedder)
    synthetic = {
        "off-topic": {s.name: off_topic(s, embedder) for s in sources},
        "edited": {s.name: edited(s, embedder) for s in sources},
    }
    base = [baseline_scores([o for o in sources if o is not s], s, args.C) for s in sources]
    base_auc = np.array([auroc(p, s.y) for p, s in zip(base, sources, strict=True)])
    base_ece = np.array(
        [expected_calibration_error(p, s.y) for p, s in zip(base, sources, strict=True)]
    )

    chosen, log = backward(sources, base_auc, synthetic, args.C)
    print("\nbackward selection on the worst held-out source (AUROC gain over the baseline):")
    for line in log:
        print(f"  {line}")
    for kind in ("off-topic", "edited"):
        trial = held_out(
            sources, Spec(chosen.spec.features, (*chosen.spec.synthetic, kind)), synthetic, args.C
        )
        gain, now = (trial.auroc - base_auc).min(), (chosen.auroc - base_auc).min()
        kept = gain > now
        print(f"  + {kind} negatives: worst gain {gain:+.4f} ({'kept' if kept else 'left out'})")
        if kept:
            chosen = trial
    spec = chosen.spec

    print(
        f"\nheld-out table: model on {', '.join(spec.features)}"
        f"{'; synthetic negatives: ' + ', '.join(spec.synthetic) if spec.synthetic else ''}; "
        "each source scored by the model and the baseline fitted on the other 10"
    )
    gains = chosen.auroc - base_auc
    lines = [
        (
            s.name,
            str(len(s.rows)),
            f"{ba:.3f}",
            f"{ma:.3f}",
            f"{ma - ba:+.3f}",
            f"{be:.3f}",
            f"{me:.3f}",
        )
        for s, ba, ma, be, me in zip(
            sources, base_auc, chosen.auroc, base_ece, chosen.ece, strict=True
        )
    ]
    w = int(np.argmin(gains))
    lines.append(
        (
            f"worst: {sources[w].name}",
            "",
            f"{base_auc[w]:.3f}",
            f"{chosen.auroc[w]:.3f}",
            f"{gains[w]:+.3f}",
            f"{base_ece.max():.3f}",
            f"{chosen.ece.max():.3f}",
        )
    )
    _table(
        ("held-out source", "n", "AUROC base", "AUROC model", "gain", "ECE base", "ECE model"),
        lines,
    )
    ahead = bool(gains.min() > 0)
    print(
        f"model ahead of the baseline on {int((gains > 0).sum())} of {len(sources)} held-out "
        f"sources; ECE columns: worst source (max). "
        + (
            "Calibration does not travel: the held-out ECE exceeds 0.1 on "
            f"{', '.join(s.name for s, e in zip(sources, chosen.ece, strict=True) if e > 0.1)}. "
            "The scores rank; `contextlens calibrate` on your own labels sets the scale."
            if chosen.ece.max() > 0.1
            else "Held-out ECE is at most 0.1 on every source."
        )
    )

    signed = [
        auroc(baseline_scores([o for o in sources if o is not s], s, args.C, signed=True), s.y)
        for s in sources
    ]
    behind = [
        f"{s.name} ({b:.3f} against {m:.3f})"
        for s, b, m in zip(sources, signed, chosen.auroc, strict=True)
        if b >= m
    ]
    print(
        "baseline with coefficients kept >= 0: the model is ahead of it on "
        f"{len(sources) - len(behind)} of {len(sources)} sources"
        + (f"; behind on {', '.join(behind)}" if behind else "")
    )

    model = fit(sources, spec, synthetic, args.C)
    print("\nshipped model, fitted on all 11 sources; coefficients (standardised):")
    for f, coef in zip(spec.features, model.coef, strict=True):
        print(f"  {f:22s} {coef:+.3f}")
    print(f"  intercept              {model.intercept:+.3f}")
    if args.no_write:
        return
    if not ahead or spec.features != FEATURES:
        raise SystemExit(
            "not written: "
            + (
                "the model is not ahead of the baseline on every source"
                if not ahead
                else f"contextlens.offline.features.FEATURES is {FEATURES}; set it to "
                f"{spec.features} first"
            )
        )
    table = {
        s.name: {
            "n": len(s.rows),
            "baseline_auroc": float(ba),
            "auroc": float(ma),
            "baseline_ece": float(be),
            "ece": float(me),
        }
        for s, ba, ma, be, me in zip(
            sources, base_auc, chosen.auroc, base_ece, chosen.ece, strict=True
        )
    }
    LogisticModel(
        model.name,
        model.features,
        model.mean,
        model.scale,
        model.coef,
        model.intercept,
        meta={
            "what": "P(people judge the reply fully supported by its context); see "
            "contextlens.offline.support",
            "fitted": dt.date.today().isoformat(),
            "command": f"benchmarks/select_support.py --C {args.C}",
            "trained_on": [s.name for s in sources],
            "weighting": "each data set equal (SummEdits domains share its weight); "
            "within a source each class half",
            "synthetic_negatives": list(spec.synthetic),
            "signs": "coefficients kept on the side of features.DIRECTION",
            "selection": {
                "candidates": list(CANDIDATES),
                "chosen": list(spec.features),
                "rule": "backward elimination on the worst held-out source's AUROC gain over "
                f"the baseline (tolerance {TOLERANCE}); synthetic negatives kept only if they "
                "raise it",
            },
            "baseline": list(BASELINE),
            "held_out": table,
        },
    ).save(WEIGHTS)
    print(f"wrote {WEIGHTS}")


if __name__ == "__main__":
    main()
