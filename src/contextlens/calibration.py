"""How well a metric agrees with people: agreement statistics and the calibration driver.

The statistics are pure numpy and take a metric's scores and human labels:
:func:`auroc` (rank-based, ties averaged), :func:`auroc_interval` (stratified bootstrap),
:func:`balanced_accuracy` and :func:`f1` at a threshold (predicted positive when
``score >= threshold``), :func:`best_threshold` (maximises balanced accuracy on the same
data, so it and every number at it are **optimistic**), :func:`spearman` (ties averaged) and
:func:`reliability` (equal-width bins over [0, 1], treating the score as the probability
of label 1, with the expected calibration error). :func:`cross_validated_balanced_accuracy`
is the honest counterpart of the best threshold's balanced accuracy: each item is judged at
a threshold chosen on the other folds.

:func:`calibrate` reads a labelled file (``id, question, contexts, answer, label, meta``),
runs the metric through :func:`contextlens.runner.aevaluate` (cache, concurrency and
accounting apply), joins the scores to the labels by id and returns a
:class:`CalibrationReport`. Failed items are counted and left out, never scored 0. The
report keeps every item (:class:`CalibrationItem`: id, label, score, why it failed, slice),
written by :meth:`CalibrationReport.write_items`, and the most misjudged ones (the
highest-scored negatives and the lowest-scored positives).

Labels are 1/0, or graded (any label outside {0, 1}). Graded labels are binarised for
AUROC, accuracy, F1 and reliability as ``label >= median(labels)`` (positive); Spearman is
computed on the graded labels themselves.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from contextlens.errors import InputError
from contextlens.metrics.base import Metric, pass_mark
from contextlens.runner import ProgressCallback, aevaluate, as_metric
from contextlens.schemas import Batch, Dataset, ModelTestCase
from contextlens.sync import run_sync

__all__ = [
    "CalibrationItem",
    "CalibrationReport",
    "ReliabilityBin",
    "SliceStat",
    "acalibrate",
    "auroc",
    "auroc_interval",
    "balanced_accuracy",
    "best_threshold",
    "calibrate",
    "cross_validated_balanced_accuracy",
    "expected_calibration_error",
    "f1",
    "read_labelled",
    "reliability",
    "roc_points",
    "spearman",
]

_BOOT_CHUNK = 200
WORST = 10
"""How many of the most misjudged items of each class a report names."""


# --------------------------------------------------------------------------- statistics


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
    alpha = (1.0 - ci) / 2.0
    low, high = np.quantile(boots, [alpha, 1.0 - alpha])
    return float(low), float(high)


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


# --------------------------------------------------------------------------- the report


class SliceStat(BaseModel):
    """Agreement within one slice (e.g. one ``meta.domain``)."""

    value: str
    n: int
    n_positive: int
    n_negative: int
    auroc: float | None = None
    balanced_accuracy: float | None = None
    note: str | None = None


class CalibrationItem(BaseModel):
    """One labelled item as the metric scored it: a line of ``items.jsonl``."""

    id: str
    label: float
    positive: bool = Field(description="the label as a class (graded: label >= median)")
    score: float | None = Field(None, description="None when the metric failed on it")
    error: str | None = Field(None, description="why the metric failed on it")
    slice: str | None = Field(None, description="its value of the --by key")
    reason: str | None = Field(None, description="the metric's reason, when it gives one")


class CalibrationReport(BaseModel):
    """Agreement of a metric's scores with human labels on one labelled file."""

    data: str
    metric: str
    judge: str
    n_rows: int
    n: int = Field(description="items scored and used")
    n_failed: int
    n_positive: int
    n_negative: int
    graded: bool
    positive_rule: str
    auroc: float | None = None
    auroc_low: float | None = None
    auroc_high: float | None = None
    ci_level: float = 0.95
    n_boot: int = 2000
    threshold: float
    balanced_accuracy: float | None = None
    f1: float | None = None
    best_threshold: float | None = Field(None, description="optimistic: chosen on these data")
    best_balanced_accuracy: float | None = Field(None, description="optimistic")
    best_f1: float | None = Field(None, description="optimistic")
    cv_balanced_accuracy: float | None = Field(
        None, description="each item at the best threshold of the other folds: not optimistic"
    )
    cv_folds: int | None = None
    spearman: float | None = None
    reliability: list[ReliabilityBin] = Field(default_factory=list)
    ece: float | None = None
    by: str | None = None
    slices: list[SliceStat] = Field(default_factory=list)
    slice_mean_auroc: float | None = Field(
        None, description="mean of the per-slice AUROCs (slices with both classes)"
    )
    roc: list[tuple[float, float]] = Field(default_factory=list)
    failures: list[dict[str, str]] = Field(default_factory=list, description="first 50")
    worst_negatives: list[CalibrationItem] = Field(
        default_factory=list, description="the highest-scored items labelled 0"
    )
    worst_positives: list[CalibrationItem] = Field(
        default_factory=list, description="the lowest-scored items labelled 1"
    )
    items: list[CalibrationItem] = Field(
        default_factory=list, exclude=True, description="every item; see write_items"
    )
    note: str | None = None
    duration_s: float = 0.0
    accounting: dict[str, Any] = Field(default_factory=dict)

    def to_table(self) -> list[dict[str, str]]:
        """Rows of (statistic, value, note) for printing."""

        def f(v: float | None) -> str:
            return "-" if v is None or not math.isfinite(v) else f"{v:.3f}"

        interval = (
            f"[{self.auroc_low:.3f}, {self.auroc_high:.3f}]"
            if self.auroc_low is not None and self.auroc_high is not None
            else "-"
        )
        rows = [
            ("items", f"{self.n} scored / {self.n_rows}", f"{self.n_failed} failed, excluded"),
            ("labels 1 / 0", f"{self.n_positive} / {self.n_negative}", self.positive_rule),
            (
                "AUROC",
                f(self.auroc),
                f"pooled over all items; {self.ci_level:.0%} bootstrap interval {interval}",
            ),
            (
                f"balanced accuracy @ {self.threshold:g}",
                f(self.balanced_accuracy),
                "the metric's threshold",
            ),
            (f"F1 @ {self.threshold:g}", f(self.f1), ""),
            ("best threshold", f(self.best_threshold), "optimistic: chosen on these labels"),
            ("balanced accuracy @ best", f(self.best_balanced_accuracy), "optimistic"),
            ("F1 @ best", f(self.best_f1), "optimistic"),
            (
                "balanced accuracy, cross-validated",
                f(self.cv_balanced_accuracy),
                f"each item at the best threshold of the other items ({self.cv_folds or 0} "
                "folds): not optimistic",
            ),
            ("ECE", f(self.ece), f"{len(self.reliability)} non-empty bins of 10"),
        ]
        if self.graded:
            rows.append(("Spearman", f(self.spearman), "score vs graded label"))
        if self.by:
            rows.append(
                (
                    f"mean AUROC over {self.by}",
                    f(self.slice_mean_auroc),
                    f"mean of the per-slice AUROCs ({self.n_slices_scored} of "
                    f"{len(self.slices)} slices have both classes)",
                )
            )
        return [{"statistic": a, "value": b, "note": c} for a, b, c in rows]

    @property
    def n_slices_scored(self) -> int:
        """Slices with both classes, so with an AUROC."""
        return sum(s.auroc is not None for s in self.slices)

    def write_items(self, path: str | Path) -> Path:
        """Write every item (:class:`CalibrationItem`) as one JSON line; return the path."""
        target = Path(path)
        with target.open("w", encoding="utf-8") as handle:
            for item in self.items:
                handle.write(item.model_dump_json() + "\n")
        return target


# --------------------------------------------------------------------------- reading


def _lookup(row: Mapping[str, Any], key: str) -> Any:
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                return [value]
            return [str(c) for c in parsed] if isinstance(parsed, list) else [value]
        return [value] if text else []
    return [str(c) for c in value]


def read_labelled(
    data: str | Path | Iterable[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The rows of a labelled file (JSONL, CSV, Parquet) or of given dicts, validated:
    each has a unique ``id`` (``row-N`` when absent) and a numeric ``label``."""
    from contextlens.loaders import _rows

    if isinstance(data, (str, Path)):
        path = Path(data)
        if not path.exists():
            raise InputError("no such file", file=str(path))
        source: Iterable[tuple[int, Mapping[str, Any]]] = _rows(path)
        name: str | None = str(path)
    else:
        source = enumerate(data, start=1)
        name = None
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for line, raw in source:
        row = dict(raw)
        label = row.get("label")
        if label is None or (isinstance(label, str) and not label.strip()):
            raise InputError(
                "required: every row needs a label", file=name, line=line, field="label"
            )
        try:
            value = float(label)
        except (TypeError, ValueError):
            raise InputError(
                f"expected a number, got {label!r}", file=name, line=line, field="label"
            ) from None
        if isinstance(label, bool) or not math.isfinite(value):
            raise InputError(
                f"expected a number, got {label!r}", file=name, line=line, field="label"
            )
        ident = row.get("id", row.get("name"))
        ident = f"row-{line}" if ident in (None, "") else str(ident)
        if ident in seen:
            raise InputError(
                f"duplicate id {ident!r} (first on line {seen[ident]})",
                file=name,
                line=line,
                field="id",
            )
        seen[ident] = line
        if isinstance(row.get("meta"), str) and row["meta"].strip().startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                row["meta"] = json.loads(row["meta"])
        row.update(id=ident, label=value, _line=line)
        rows.append(row)
    if not rows:
        raise InputError("the file holds no rows", file=name)
    return rows


def _case(row: Mapping[str, Any], metric: Metric[Any]) -> Any:
    """The case a labelled row stands for, in the shape the metric takes: a session of one
    interaction (context = the joined contexts), a test case, or the metric's own pydantic
    case type validated from the row."""
    question = str(row.get("question") or row.get("input") or "")
    answer = str(row.get("answer") or row.get("actual_output") or "")
    contexts = _as_list(row.get("contexts", row.get("retrieval_context")))
    kind = metric.case_type
    if issubclass(kind, Dataset):
        return Dataset(
            session_id=row["id"],
            assistant_id="calibration",
            context="\n".join(contexts),
            conversation=[Batch(qa_id="1", query=question, assistant=answer)],
        )
    if issubclass(kind, ModelTestCase):
        return ModelTestCase(
            name=row["id"], input=question, actual_output=answer, retrieval_context=contexts
        )
    if issubclass(kind, BaseModel):
        return kind.model_validate(dict(row))
    raise InputError(f"calibrate cannot build a {kind.__name__} case from a labelled row")


def _threshold(metric: Metric[Any], threshold: float | None) -> float:
    return float(threshold) if threshold is not None else pass_mark(metric)


def _none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _thin(points: list[tuple[float, float]], keep: int = 400) -> list[tuple[float, float]]:
    if len(points) <= keep:
        return points
    idx = np.unique(np.linspace(0, len(points) - 1, keep).round().astype(int))
    return [points[i] for i in idx]


def _slices(
    rows: Sequence[Mapping[str, Any]], s: np.ndarray, pos: np.ndarray, by: str, threshold: float
) -> list[SliceStat]:
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        value = _lookup(row, by)
        groups.setdefault("(missing)" if value is None else str(value), []).append(i)
    out = []
    for value in sorted(groups):
        idx = np.array(groups[value])
        sp, yp = s[idx], pos[idx].astype(float)
        n1 = int(pos[idx].sum())
        stat = SliceStat(value=value, n=len(idx), n_positive=n1, n_negative=len(idx) - n1)
        if n1 and n1 < len(idx):
            stat.auroc = auroc(sp, yp)
            stat.balanced_accuracy = balanced_accuracy(sp, yp, threshold)
        else:
            stat.note = f"one class only (all {'1' if n1 else '0'}): no AUROC"
        out.append(stat)
    return out


async def acalibrate(
    data: str | Path | Iterable[Mapping[str, Any]],
    metric: Any = "context",
    judge: Any = None,
    *,
    by: str | None = None,
    threshold: float | None = None,
    cache: Any = True,
    max_concurrency: int = 16,
    progress: bool | ProgressCallback | None = None,
    embedder: Any = None,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    note: str | None = None,
) -> CalibrationReport:
    """Score a labelled file with ``metric`` and measure agreement; see :func:`calibrate`."""
    t0 = time.perf_counter()
    metric_obj = as_metric(metric)
    rows = read_labelled(data)
    cases = [_case(r, metric_obj) for r in rows]
    run = await aevaluate(
        cases,
        [metric_obj],
        judge=judge,
        embedder=embedder,
        cache=cache,
        max_concurrency=max_concurrency,
        progress=progress,
        keep_results=True,
    )
    all_labels = np.array([r["label"] for r in rows], dtype=float)
    graded = bool(not np.all((all_labels == 0) | (all_labels == 1)))
    if graded:
        cut = float(np.median(all_labels))
        rule = f"graded labels: label >= median {cut:g} counts as positive"
    else:
        cut = 1.0
        rule = "binary labels: 1 positive, 0 negative"
    by_id = {r.case_id: r for r in run.iter_results()}
    items: list[CalibrationItem] = []
    used: list[dict[str, Any]] = []
    scores: list[float] = []
    failures: list[dict[str, str]] = []
    for row in rows:
        result = by_id.get(row["id"])
        score = None if result is None else result.score
        error = None
        if result is None or result.failed or score is None or not math.isfinite(score):
            error = "no result" if result is None else (result.error or "no score")
            failures.append({"id": row["id"], "error": error})
        else:
            used.append(row)
            scores.append(float(score))
        where = _lookup(row, by) if by else None
        items.append(
            CalibrationItem(
                id=row["id"],
                label=row["label"],
                positive=row["label"] >= cut,
                score=None if error else score,
                error=error,
                slice=None if not by else "(missing)" if where is None else str(where),
                reason=None if result is None else result.reason,
            )
        )
    labels = np.array([r["label"] for r in used], dtype=float)
    pos = labels >= cut
    s = np.array(scores, dtype=float)
    y = pos.astype(float)
    thr = _threshold(metric_obj, threshold)
    report = CalibrationReport(
        data=str(data) if isinstance(data, (str, Path)) else "(rows)",
        metric=metric if isinstance(metric, str) else metric_obj.name,
        judge=run.judge,
        n_rows=len(rows),
        n=len(used),
        n_failed=len(failures),
        n_positive=int(pos.sum()),
        n_negative=int((~pos).sum()),
        graded=graded,
        positive_rule=rule,
        ci_level=ci,
        n_boot=n_boot,
        threshold=thr,
        by=by,
        failures=failures[:50],
        note=note,
        accounting=run.accounting,
        items=items,
    )
    scored = [i for i in items if i.score is not None]
    report.worst_negatives = sorted(
        (i for i in scored if not i.positive), key=lambda i: (-(i.score or 0.0), i.id)
    )[:WORST]
    report.worst_positives = sorted(
        (i for i in scored if i.positive), key=lambda i: (i.score or 0.0, i.id)
    )[:WORST]
    both = report.n_positive > 0 and report.n_negative > 0
    if len(s):
        report.balanced_accuracy = balanced_accuracy(s, y, thr)
        report.f1 = f1(s, y, thr)
        report.reliability, report.ece = reliability(s, y)
    if both:
        report.auroc = auroc(s, y)
        report.auroc_low, report.auroc_high = auroc_interval(s, y, n_boot=n_boot, ci=ci, seed=seed)
        report.best_threshold, report.best_balanced_accuracy = best_threshold(s, y)
        report.best_f1 = f1(s, y, report.best_threshold)
        cv, report.cv_folds = cross_validated_balanced_accuracy(s, y, seed=seed)
        report.cv_balanced_accuracy = _none(cv)
        report.roc = _thin(roc_points(s, y))
    if graded and len(s) > 1:
        report.spearman = _none(spearman(s, labels))
    if by:
        report.slices = _slices(used, s, pos, by, thr)
        aucs = [x.auroc for x in report.slices if x.auroc is not None]
        report.slice_mean_auroc = float(np.mean(aucs)) if aucs else None
    report.duration_s = round(time.perf_counter() - t0, 3)
    return report


def calibrate(
    data: str | Path | Iterable[Mapping[str, Any]],
    metric: Any = "context",
    judge: Any = None,
    *,
    by: str | None = None,
    threshold: float | None = None,
    cache: Any = True,
    max_concurrency: int = 16,
    progress: bool | ProgressCallback | None = None,
    embedder: Any = None,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    note: str | None = None,
) -> CalibrationReport:
    """Measure how well ``metric`` agrees with the human labels in ``data``.

    ``data``: a labelled JSONL/CSV/Parquet file (``id, question, contexts, answer, label,
    meta``) or an iterable of such dicts. ``metric``: a registered name (``"context"``: each
    item becomes a one-interaction session, context = the joined contexts, query =
    question, assistant = answer; ``"contextual-relevancy"``, ``"context-precision"``,
    ``"context-similarity"``; see :func:`contextlens.list_metrics`) or a metric object; the
    report names it by the name given, else by the object's ``name``.
    ``judge``: as :func:`contextlens.evaluate` takes it (None: offline).
    ``by``: a dotted key such as ``"meta.domain"`` for a per-slice breakdown.
    ``threshold``: where to measure balanced accuracy and F1 (default: the metric's own, else
    0.5). Items the metric fails on are counted in ``n_failed`` and excluded.
    ``progress``: as :func:`contextlens.evaluate` takes it (a bar, or a callback per item).
    """
    return run_sync(
        acalibrate(
            data,
            metric,
            judge,
            by=by,
            threshold=threshold,
            cache=cache,
            max_concurrency=max_concurrency,
            progress=progress,
            embedder=embedder,
            n_boot=n_boot,
            ci=ci,
            seed=seed,
            note=note,
        )
    )
