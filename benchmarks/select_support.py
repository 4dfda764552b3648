"""Choose the offline faithfulness scorer leave-one-source-out, deciding on natural errors.

Run: CONTEXTLENS_CACHE_DIR=DIR .venv/bin/python benchmarks/select_support.py
     [--data DIR] [--C 1.0] [--reader benchmarks/.reader/held_out.json] [--no-write]

Target: whether people judged a reply (dialogue reply, answer, claim, summary) fully
supported by its context.

Sources (9, ``_support_sources.py``): BEGIN dev, WiCE, the four AttributionBench sources
(``meta.src_dataset``), Factcheck-GPT, SummEdits (one source) and HaluEval QA. The first seven
hold natural errors of real systems judged by people; SummEdits' inconsistent summaries are
small edits made by an LLM to be inconsistent, and HaluEval's wrong answers were generated
on purpose (labels by construction): both are scored and shown, neither decides.

Every candidate is scored leave-one-source-out: fitted on the other 8, scored on the held-out
one. In a fit each source weighs the same and within a source each class half.

Candidates:

* the baseline (the plain model to beat): a logistic regression of three features of the
  whole reply: the cosine of the reply and the joined context, the weakest reply sentence's
  best cosine with a context sentence, and the share of the reply's content words found in
  the context (bundled embedder; content words as :mod:`contextlens.offline.features` counts
  them);
* each single feature: the baseline's three and every feature of the library's extractor
  (:data:`contextlens.offline.features.CANDIDATES`), signed by
  :data:`~contextlens.offline.features.DIRECTION` (no fit);
* a logistic regression over the extractor's features, each coefficient kept on the side of
  ``DIRECTION``: the shipped set (:data:`~contextlens.offline.features.FEATURES`) and the set
  found by backward elimination from all of them on the worst natural source's AUROC gain
  over the baseline (a removal may lower it by :data:`TOLERANCE`; fewer features win a tie),
  then with edited replies as synthetic negatives (kept only if they raise that gain); and
  the best of every set of at most :data:`SMALL` features. Choosing among so many sets on
  the held-out table flatters the chosen one a little: its gains are upper estimates;
* the claim reader (:mod:`contextlens.offline.reader`), when ``--reader`` names the
  held-out scores ``train_reader.py`` wrote (each source scored by a model fitted
  without it), alone and averaged with the logistic candidate.

The choice: the candidate with the largest worst-natural-source AUROC gain over the baseline.
Printed: the candidates' summary (worst natural gain and where, mean natural AUROC, the made
sources), then the held-out table of the chosen candidate beside the baseline (AUROC, gain,
ECE in 10 equal-width bins). Without ``--no-write`` the best logistic candidate is refitted on
all 9 sources and written to ``src/contextlens/offline/weights/support.json`` with its table
in ``meta``.

Embeddings go through the persistent cache (set ``CONTEXTLENS_CACHE_DIR``; a cold run embeds
every claim and evidence sentence of the 9 sources, WiCE's and AttributionBench's long pages
most of them).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _support_sources import DATA, SPECS, item, read_rows
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
from contextlens.offline.support import _claims, support_features
from contextlens.offline.text import sentences

WEIGHTS = Path(__file__).resolve().parents[1] / "src/contextlens/offline/weights/support.json"
READER = Path(__file__).resolve().parent / ".reader/held_out.json"
BASELINE = ("reply_cosine", "sentence_cosine_min", "word_share")
#: A removal may lower the worst natural gain by this much below the best seen.
TOLERANCE = 0.002
#: Every set of at most this many features is a candidate too.
SMALL = 3
#: The features of the model shipped before this selection.
PREVIOUS = (
    "bigram_share_mean",
    "grounded_min",
    "novel_noun_frac_max",
    "log_novel_names",
    "log_new_numbers",
    "negation_mismatch",
)
#: Each synthetic kind's share of a training source's weight, when kept.
SYNTHETIC = 0.2
#: At most this many faithful replies of a source become synthetic negatives.
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
    natural: bool = True
    weight: float = 1.0

    @property
    def y(self) -> np.ndarray:
        return np.array([r["label"] for r in self.rows], dtype=float)


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
    """The 9 sources of ``_support_sources.SPECS``, in order."""
    out: list[Source] = []
    for spec in SPECS:
        rows = read_rows(data, spec)
        x, ok = library_features(rows, embedder)
        base = baseline_features(rows, embedder)
        print(f"{spec.name}: {len(rows)} items, {int((~ok).sum())} unscorable", flush=True)
        out.append(Source(spec.name, rows, x, ok, base, spec.natural))
    return out


# --------------------------------------------------------------------------- synthetic negatives

_NUM = re.compile(r"\b\d+(?:\.\d+)?\b")
_AUX = re.compile(r"\b(is|are|was|were|has|have|had|can|will|does|do|did|should|could)\b( not)?")
_CAP = re.compile(r"(?<=[a-z,] )[A-Z][a-z]{2,}\b")


def _faithful(s: Source, rng: np.random.Generator) -> list[dict[str, Any]]:
    pos = [r for r in s.rows if r["label"] == 1]
    keep = sorted(rng.choice(len(pos), min(SYNTHETIC_MAX, len(pos)), replace=False))
    return [pos[i] for i in keep]


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
    return Source(f"{s.name}:edited", rows, x, ok, np.zeros((len(rows), 3)), s.natural)


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
    """Held-out scores of one candidate: per source, its scores, AUROC and ECE."""

    spec: Spec
    auroc: np.ndarray
    ece: np.ndarray
    scores: tuple[np.ndarray, ...] = ()


def held_out(
    sources: Sequence[Source], spec: Spec, synthetic: dict[str, dict[str, Source]], c: float
) -> Held:
    aucs, eces, scores = [], [], []
    for s in sources:
        model = fit([o for o in sources if o is not s], spec, synthetic, c)
        p = model_scores(model, s)
        scores.append(p)
        aucs.append(auroc(p, s.y))
        eces.append(expected_calibration_error(p, s.y))
    return Held(spec, np.array(aucs), np.array(eces), tuple(scores))


def worst_natural(sources: Sequence[Source], gains: np.ndarray) -> tuple[float, str]:
    """The lowest gain over the natural sources and where it is."""
    idx = [i for i, s in enumerate(sources) if s.natural]
    k = min(idx, key=lambda i: gains[i])
    return float(gains[k]), sources[k].name


def backward(
    sources: Sequence[Source],
    base_auc: np.ndarray,
    synthetic: dict[str, dict[str, Source]],
    c: float,
) -> tuple[Held, list[str]]:
    """Backward elimination on the worst natural source's gain; the kept set and a log."""
    current = held_out(sources, Spec(CANDIDATES), synthetic, c)
    best, _ = worst_natural(sources, current.auroc - base_auc)
    log = [f"all {len(CANDIDATES)} features: worst natural gain {best:+.4f}"]
    while len(current.spec.features) > 1:
        trials = [
            held_out(
                sources, Spec(tuple(f for f in current.spec.features if f != drop)), synthetic, c
            )
            for drop in current.spec.features
        ]
        worst = [worst_natural(sources, t.auroc - base_auc)[0] for t in trials]
        k = int(np.argmax(worst))
        if worst[k] < best - TOLERANCE:
            break
        dropped = next(f for f in current.spec.features if f not in trials[k].spec.features)
        log.append(f"without {dropped}: worst natural gain {worst[k]:+.4f}")
        current, best = trials[k], max(best, worst[k])
    return current, log


def best_small(
    sources: Sequence[Source],
    base_auc: np.ndarray,
    synthetic: dict[str, dict[str, Source]],
    c: float,
) -> Held:
    """The set of at most :data:`SMALL` features with the largest worst natural gain."""
    best: Held | None = None
    score = -np.inf
    for k in range(1, SMALL + 1):
        for feats in itertools.combinations(CANDIDATES, k):
            h = held_out(sources, Spec(feats), synthetic, c)
            w = worst_natural(sources, h.auroc - base_auc)[0]
            if w > score:
                best, score = h, w
    assert best is not None
    return best


@dataclass(frozen=True)
class Candidate:
    """A scorer's held-out figures: per source AUROC and ECE (NaN: not a probability)."""

    name: str
    kind: str  # "baseline", "single", "logistic", "reader"
    auroc: np.ndarray
    ece: np.ndarray
    held: Held | None = None


def single_features(sources: Sequence[Source]) -> list[Candidate]:
    """Each baseline and extractor feature alone, signed (no fit)."""
    out = []
    for k, name in enumerate(BASELINE):
        aucs = np.array([auroc(s.base[:, k], s.y) for s in sources])
        label = f"baseline's {name} alone"
        out.append(Candidate(label, "single", aucs, np.full(len(sources), np.nan)))
    for k, name in enumerate(CANDIDATES):
        sign = DIRECTION[name]
        aucs = np.array([auroc(np.where(s.ok, sign * s.x[:, k], -np.inf), s.y) for s in sources])
        out.append(Candidate(f"{name} alone", "single", aucs, np.full(len(sources), np.nan)))
    return out


def _measured(
    name: str, kind: str, sources: Sequence[Source], scores: Sequence[np.ndarray]
) -> Candidate:
    aucs = np.array([auroc(p, s.y) for p, s in zip(scores, sources, strict=True)])
    eces = np.array(
        [expected_calibration_error(p, s.y) for p, s in zip(scores, sources, strict=True)]
    )
    return Candidate(name, kind, aucs, eces)


def reader(sources: Sequence[Source], path: Path, logistic: Held) -> list[Candidate]:
    """The claim reader's held-out reply scores, as ``train_reader.py`` wrote them (an item
    with no claim or no evidence at 0), and their mean with the logistic candidate's
    held-out probabilities (no fit: both held out)."""
    if not path.exists():
        print(f"no claim reader scores at {path}: run train_reader.py first to compare")
        return []
    held = json.loads(path.read_text(encoding="utf-8"))
    missing = [s.name for s in sources if s.name not in held]
    if missing:
        print(f"claim reader scores lack {', '.join(missing)}: not a candidate")
        return []
    scores = []
    for s in sources:
        h = held[s.name]
        by_id = dict(zip(h["ids"], h["score"], strict=True))
        scores.append(np.array([by_id[r["id"]] or 0.0 for r in s.rows]))
    layers = held[sources[0].name].get("layers", "?")
    blend = [(p + q) / 2 for p, q in zip(scores, logistic.scores, strict=True)]
    return [
        _measured(f"claim reader ({layers} layers)", "reader", sources, scores),
        _measured(
            f"mean of the claim reader and logistic on {len(logistic.spec.features)} features",
            "blend",
            sources,
            blend,
        ),
    ]


def _table(header: tuple[str, ...], lines: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    print(" | ".join(h.ljust(n) for h, n in zip(header, widths, strict=True)))
    for line in lines:
        print(" | ".join(c.ljust(n) for c, n in zip(line, widths, strict=True)))


def _f(v: float) -> str:
    return "-" if not np.isfinite(v) else f"{v:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--reader", type=Path, default=READER)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--features", default="", help="comma-separated: score this set instead of searching"
    )
    args = parser.parse_args()

    embedder = CachedEmbedder(default_embedder(), open_cache(True))
    sources = load(args.data, embedder)
    synthetic = {"edited": {s.name: edited(s, embedder) for s in sources}}
    base = [baseline_scores([o for o in sources if o is not s], s, args.C) for s in sources]
    base_auc = np.array([auroc(p, s.y) for p, s in zip(base, sources, strict=True)])
    base_ece = np.array(
        [expected_calibration_error(p, s.y) for p, s in zip(base, sources, strict=True)]
    )
    baseline = Candidate("baseline (3 features, logistic)", "baseline", base_auc, base_ece)

    shipped = held_out(sources, Spec(PREVIOUS), synthetic, args.C)
    if args.features:
        given = held_out(sources, Spec(tuple(args.features.split(","))), synthetic, args.C)
        logistic = [
            Candidate(
                f"logistic on {', '.join(h.spec.features)} ({label})", "logistic", h.auroc, h.ece, h
            )
            for h, label in ((shipped, "the previous set"), (given, "--features"))
        ]
        return report(args, sources, synthetic, baseline, base_auc, base_ece, logistic)
    chosen, log = backward(sources, base_auc, synthetic, args.C)
    print(
        "\nbackward selection on the worst natural held-out source (AUROC gain over the baseline):"
    )
    for line in log:
        print(f"  {line}")
    trial = held_out(sources, Spec(chosen.spec.features, ("edited",)), synthetic, args.C)
    gain, now = (
        worst_natural(sources, trial.auroc - base_auc)[0],
        worst_natural(sources, chosen.auroc - base_auc)[0],
    )
    verdict = "kept" if gain > now else "left out"
    print(f"  + edited negatives: worst natural gain {gain:+.4f} ({verdict})")
    if gain > now:
        chosen = trial
    small = best_small(sources, base_auc, synthetic, args.C)
    small_gain = worst_natural(sources, small.auroc - base_auc)[0]
    print(
        f"  every set of at most {SMALL} features: best worst natural gain {small_gain:+.4f} "
        f"({', '.join(small.spec.features)})"
    )
    logistic = [
        Candidate(
            f"logistic on {len(h.spec.features)} features ({label})"
            + (" + edited negatives" if h.spec.synthetic else ""),
            "logistic",
            h.auroc,
            h.ece,
            h,
        )
        for h, label in (
            (shipped, "the previous set"),
            (chosen, "backward selection"),
            (small, f"best set of at most {SMALL}"),
        )
    ]
    return report(args, sources, synthetic, baseline, base_auc, base_ece, logistic)


def report(
    args: argparse.Namespace,
    sources: list[Source],
    synthetic: dict[str, dict[str, Source]],
    baseline: Candidate,
    base_auc: np.ndarray,
    base_ece: np.ndarray,
    logistic: list[Candidate],
) -> None:
    """Print the candidates and the held-out tables; write the best logistic candidate."""
    best_held = max(
        (c.held for c in logistic if c.held is not None),
        key=lambda h: worst_natural(sources, h.auroc - base_auc)[0],
    )
    candidates = [baseline, *logistic, *reader(sources, args.reader, best_held)]
    candidates += single_features(sources)

    natural = [i for i, s in enumerate(sources) if s.natural]
    made = [i for i, s in enumerate(sources) if not s.natural]
    rows = []
    for c in candidates:
        w, where = worst_natural(sources, c.auroc - base_auc)
        rows.append((c, w, where))
    rows.sort(key=lambda r: -r[1])
    print(
        "\ncandidates, each source scored by a model fitted on the other 8 (single features: "
        "no fit); gain = AUROC minus the baseline's on the same held-out source:"
    )
    _table(
        (
            "candidate",
            "worst natural gain",
            "at",
            "mean natural AUROC",
            *(f"AUROC {sources[i].name}" for i in made),
        ),
        [
            (
                c.name,
                "-" if c.kind == "baseline" else f"{w:+.3f}",
                "" if c.kind == "baseline" else where,
                f"{np.mean(c.auroc[natural]):.3f}",
                *(_f(c.auroc[i]) for i in made),
            )
            for c, w, where in rows
        ],
    )
    best = next(c for c, _, _ in rows if c.kind != "baseline")
    best_logistic = next(c for c, _, _ in rows if c.kind == "logistic")
    for title, c in (("chosen", best), ("best logistic", best_logistic)):
        if title == "best logistic" and c is best:
            continue
        print(
            f"\nheld-out table, {title}: {c.name}; beside the baseline fitted on the same 8 sources"
        )
        gains = c.auroc - base_auc
        lines = [
            (
                s.name,
                "natural" if s.natural else "made",
                str(len(s.rows)),
                f"{ba:.3f}",
                f"{ma:.3f}",
                f"{ma - ba:+.3f}",
                f"{be:.3f}",
                _f(me),
            )
            for s, ba, ma, be, me in zip(sources, base_auc, c.auroc, base_ece, c.ece, strict=True)
        ]
        w, where = worst_natural(sources, gains)
        lines.append(("worst natural", "", "", "", "", f"{w:+.3f} ({where})", "", ""))
        _table(
            (
                "held-out source",
                "errors",
                "n",
                "AUROC base",
                "AUROC model",
                "gain",
                "ECE base",
                "ECE model",
            ),
            lines,
        )
        ahead = int((gains[natural] > 0).sum())
        print(f"ahead of the baseline on {ahead} of {len(natural)} natural held-out sources")

    h = best_logistic.held
    assert h is not None
    model = fit(sources, h.spec, synthetic, args.C)
    print(f"\nbest logistic, fitted on all {len(sources)} sources; coefficients (standardised):")
    for f, coef in zip(h.spec.features, model.coef, strict=True):
        print(f"  {f:22s} {coef:+.3f}")
    print(f"  intercept              {model.intercept:+.3f}")
    if args.no_write:
        return
    if h.spec.features != FEATURES:
        print(f"note: set contextlens.offline.features.FEATURES to {h.spec.features}")
    table = {
        s.name: {
            "n": len(s.rows),
            "natural": s.natural,
            "baseline_auroc": float(ba),
            "auroc": float(ma),
            "baseline_ece": float(be),
            "ece": float(me),
        }
        for s, ba, ma, be, me in zip(sources, base_auc, h.auroc, base_ece, h.ece, strict=True)
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
            "command": f"benchmarks/select_support.py --C {args.C}"
            + (f" --features {args.features}" if args.features else ""),
            "trained_on": [s.name for s in sources],
            "natural": [s.name for s in sources if s.natural],
            "weighting": "each source equal; within a source each class half",
            "synthetic_negatives": list(h.spec.synthetic),
            "signs": "coefficients kept on the side of features.DIRECTION",
            "selection": {
                "candidates": list(CANDIDATES),
                "chosen": list(h.spec.features),
                "rule": "the largest worst-natural-source AUROC gain over the baseline among "
                "the logistic candidates (the previous set; backward elimination, tolerance "
                f"{TOLERANCE}, edited negatives kept only if they raise it; every set of at "
                f"most {SMALL} features)",
            },
            "baseline": list(BASELINE),
            "held_out": table,
        },
    ).save(WEIGHTS)
    print(f"wrote {WEIGHTS}")


if __name__ == "__main__":
    main()
