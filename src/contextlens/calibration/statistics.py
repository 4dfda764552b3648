"""Agreement of scores with human labels: pure numpy.

:func:`auroc` (rank-based, ties averaged), :func:`auroc_interval` (stratified bootstrap),
:func:`balanced_accuracy` and :func:`f1` at a threshold (predicted positive when
``score >= threshold``), :func:`best_threshold` (maximises balanced accuracy on the same
data, so it and every number at it are **optimistic**), :func:`spearman` (ties averaged) and
:func:`reliability` (equal-width bins over [0, 1], treating the score as the probability
of label 1, with the expected calibration error). :func:`cross_validated_balanced_accuracy`
is the honest counterpart of the best threshold's balanced accuracy: each item is judged at
a threshold chosen on the other folds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from contextlens.stats.bootstrap import equal_tailed

__all__ = [
    "ReliabilityBin",
    "auroc",
    "auroc_interval",
    "balanced_accuracy",
    "best_threshold",
    "cross_validated_balanced_accuracy",
    "expected_calibration_error",
    "f1",
    "reliability",
    "roc_points",
    "spearman",
]

_BOOT_CHUNK = 200


def _arrays(scores: Iterable[float], labels: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(list(scores) if not isinstance(scores, np.ndarray) else scores, dtype=float)
    y = np.asarray(list(labels) if not isinstance(labels, np.ndarray) else labels, dtype=float)
    if s.ndim != 1 or y.ndim != 1 or len(s) != len(y):
        raise ValueError(f"scores and labels must be 1-d and equally long ({s.shape}, {y.shape})")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(y))):
        raise ValueError("scores and labels must be finite numbers")
    return s, y


def _binary(y: np.ndarray) -> np.ndarray:
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("labels must be 0 or 1 (binarise graded labels first)")
    return y == 1


def _ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``, ties given their average rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[inverse]


def auroc(scores: Iterable[float], labels: Iterable[float]) -> float:
    """Area under the ROC curve (Mann-Whitney U / n1 n0); ties count one half.

    Raises ValueError when the labels hold only one class.
    """
    s, y = _arrays(scores, labels)
    pos = _binary(y)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        raise ValueError("AUROC needs both classes among the labels")
    r = _ranks(s)
    return float((r[pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def auroc_interval(
    scores: Iterable[float],
    labels: Iterable[float],
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Bootstrap percentile interval of the AUROC; positives and negatives are resampled
    separately (stratified), so every replicate keeps the class sizes."""
    s, y = _arrays(scores, labels)
    pos = _binary(y)
    sp, sn = np.sort(s[pos]), np.sort(s[~pos])
    n1, n0 = len(sp), len(sn)
    if n1 == 0 or n0 == 0:
        raise ValueError("AUROC needs both classes among the labels")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    lo = np.searchsorted(sn, sp, side="left")
    hi = np.searchsorted(sn, sp, side="right")
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    for start in range(0, n_boot, _BOOT_CHUNK):
        b = min(_BOOT_CHUNK, n_boot - start)
        wp = rng.multinomial(n1, np.full(n1, 1.0 / n1), size=b).astype(float)
        wn = rng.multinomial(n0, np.full(n0, 1.0 / n0), size=b).astype(float)
        cum = np.concatenate([np.zeros((b, 1)), np.cumsum(wn, axis=1)], axis=1)
        below, upto = cum[:, lo], cum[:, hi]
        wins = below + 0.5 * (upto - below)  # negatives below each positive, ties half
        boots[start : start + b] = (wp * wins).sum(axis=1) / (n1 * n0)
    return equal_tailed(boots, ci)


def roc_points(scores: Iterable[float], labels: Iterable[float]) -> list[tuple[float, float]]:
    """The ROC curve as (false positive rate, true positive rate), from (0, 0) to (1, 1)."""
    s, y = _arrays(scores, labels)
    pos = _binary(y)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return []
    order = np.argsort(-s, kind="mergesort")
    s_sorted, p_sorted = s[order], pos[order]
    tp, fp = np.cumsum(p_sorted), np.cumsum(~p_sorted)
    last = np.r_[np.flatnonzero(np.diff(s_sorted)), len(s_sorted) - 1]
    points = [(0.0, 0.0)] + [(float(fp[i] / n0), float(tp[i] / n1)) for i in last]
    return points


def _confusion(s: np.ndarray, pos: np.ndarray, threshold: float) -> tuple[int, int, int, int]:
    pred = s >= threshold
    tp = int((pred & pos).sum())
    fp = int((pred & ~pos).sum())
    fn = int((~pred & pos).sum())
    tn = int((~pred & ~pos).sum())
    return tp, fp, fn, tn


def balanced_accuracy(scores: Iterable[float], labels: Iterable[float], threshold: float) -> float:
    """Mean of the recall on each class present, predicting 1 when ``score >= threshold``."""
    s, y = _arrays(scores, labels)
    pos = _binary(y)
    tp, fp, fn, tn = _confusion(s, pos, threshold)
    recalls = [tp / (tp + fn)] if tp + fn else []
    recalls += [tn / (tn + fp)] if tn + fp else []
    if not recalls:
        raise ValueError("no labels")
    return float(np.mean(recalls))


def f1(scores: Iterable[float], labels: Iterable[float], threshold: float) -> float:
    """F1 of the positive class, predicting 1 when ``score >= threshold``; 0 when undefined."""
    s, y = _arrays(scores, labels)
    tp, fp, fn, _ = _confusion(s, _binary(y), threshold)
    return 0.0 if tp == 0 else float(2 * tp / (2 * tp + fp + fn))


def best_threshold(scores: Iterable[float], labels: Iterable[float]) -> tuple[float, float]:
    """(threshold, balanced accuracy) maximising balanced accuracy on these very data.

    **Optimistic**: chosen and measured on the same items. The threshold returned is the
    midpoint between the cut score and the next lower score (the cut score itself when it is
    the lowest), so ``balanced_accuracy(scores, labels, t)`` gives the same value.
    """
    s, y = _arrays(scores, labels)
    pos = _binary(y)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        raise ValueError("a best threshold needs both classes among the labels")
    values = np.unique(s)[::-1]  # descending candidate cuts: predict 1 when s >= cut
    order = np.argsort(-s, kind="mergesort")
    tp = np.cumsum(pos[order])
    fp = np.cumsum(~pos[order])
    last = np.r_[np.flatnonzero(np.diff(s[order])), len(s) - 1]
    bal = 0.5 * (tp[last] / n1 + (n0 - fp[last]) / n0)
    # also "predict nothing positive": balanced accuracy 0.5
    k = int(np.argmax(bal))
    if bal[k] <= 0.5:
        return float(values[0]) + 1e-9, 0.5
    cut = float(values[k])
    threshold = 0.5 * (cut + float(values[k + 1])) if k + 1 < len(values) else cut
    return threshold, float(bal[k])


def cross_validated_balanced_accuracy(
    scores: Iterable[float], labels: Iterable[float], folds: int = 5, seed: int = 0
) -> tuple[float, int]:
    """(balanced accuracy, folds) when each item is judged at the :func:`best_threshold`
    of the other folds: what a threshold chosen on labels like these reaches on new items,
    not optimistic. Folds are stratified (seeded) and fewer when a class has fewer items
    than ``folds``; the predictions of all folds are pooled. NaN with fewer than 2 folds.
    """
    s, y = _arrays(scores, labels)
    pos = _binary(y)
    k = min(folds, int(pos.sum()), int((~pos).sum()))
    if k < 2:
        return float("nan"), k
    rng = np.random.default_rng(seed)
    fold = np.empty(len(s), dtype=int)
    for members in (np.flatnonzero(pos), np.flatnonzero(~pos)):
        fold[rng.permutation(members)] = np.arange(len(members)) % k
    pred = np.zeros(len(s), dtype=bool)
    for f in range(k):
        test = fold == f
        cut, _ = best_threshold(s[~test], y[~test])
        pred[test] = s[test] >= cut
    recall_1 = float(pred[pos].mean())
    recall_0 = float((~pred[~pos]).mean())
    return 0.5 * (recall_1 + recall_0), k


def spearman(scores: Iterable[float], graded: Iterable[float]) -> float:
    """Spearman's rank correlation (ties averaged); NaN when either side is constant."""
    s, y = _arrays(scores, graded)
    if len(s) < 2:
        return float("nan")
    rs, ry = _ranks(s), _ranks(y)
    rs, ry = rs - rs.mean(), ry - ry.mean()
    denom = math.sqrt(float((rs * rs).sum() * (ry * ry).sum()))
    return float((rs * ry).sum() / denom) if denom > 0 else float("nan")


class ReliabilityBin(BaseModel):
    """One bin of a reliability diagram: scores in ``[low, high)`` (the last bin closed)."""

    low: float
    high: float
    count: int
    mean_predicted: float
    observed_rate: float


def reliability(
    scores: Iterable[float], labels: Iterable[float], bins: int = 10
) -> tuple[list[ReliabilityBin], float]:
    """Equal-width bins over [0, 1] (non-empty ones) and the expected calibration error.

    The score is read as the probability that the label is 1 (scores are clipped to
    [0, 1]); ECE = sum over bins of count / n * |mean score - observed rate|.
    """
    s, y = _arrays(scores, labels)
    pos = _binary(y)
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    if len(s) == 0:
        return [], float("nan")
    p = np.clip(s, 0.0, 1.0)
    index = np.minimum((p * bins).astype(int), bins - 1)
    out: list[ReliabilityBin] = []
    ece = 0.0
    for b in range(bins):
        mask = index == b
        count = int(mask.sum())
        if not count:
            continue
        mean_p, rate = float(p[mask].mean()), float(pos[mask].mean())
        ece += count / len(p) * abs(mean_p - rate)
        out.append(
            ReliabilityBin(
                low=b / bins,
                high=(b + 1) / bins,
                count=count,
                mean_predicted=mean_p,
                observed_rate=rate,
            )
        )
    return out, float(ece)


def expected_calibration_error(
    scores: Iterable[float], labels: Iterable[float], bins: int = 10
) -> float:
    """The expected calibration error of :func:`reliability`."""
    return reliability(scores, labels, bins)[1]
