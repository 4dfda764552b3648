"""``calibrate``: a metric over a labelled file, through the engine, against the labels.

The file's rows are read as ``contextlens run`` reads test cases (:mod:`.labelled`), scored
through :func:`contextlens.runner.aevaluate` (cache, concurrency and accounting apply), and
joined to their labels by id. Failed items are counted and left out, never scored 0. The
report keeps every item and the most misjudged ones. Labels are 1/0, or graded (any label
outside {0, 1}): graded labels are binarised for AUROC, accuracy, F1 and reliability as
``label >= median(labels)`` (positive); Spearman is computed on the graded labels.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import Unpack

from contextlens.calibration.labelled import LabelledRow, labelled_case, lookup, read_labelled
from contextlens.calibration.report import WORST, CalibrationItem, CalibrationReport, SliceStat
from contextlens.calibration.statistics import (
    auroc,
    auroc_interval,
    balanced_accuracy,
    best_threshold,
    cross_validated_balanced_accuracy,
    f1,
    reliability,
    roc_points,
    spearman,
)
from contextlens.metrics.base import DEFAULT_PASS
from contextlens.metrics.metric import Metric
from contextlens.metrics.registry import key_of
from contextlens.offline.routes import held_out_of
from contextlens.runner import RunConfig, RunOptions, aevaluate, as_metric
from contextlens.sync import run_sync

__all__ = ["acalibrate", "calibrate"]


def _threshold(metric: Metric[Any], threshold: float | None) -> float:
    if threshold is not None:
        return float(threshold)
    return metric.threshold if metric.threshold is not None else DEFAULT_PASS


def _none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _thin(points: list[tuple[float, float]], keep: int = 400) -> list[tuple[float, float]]:
    if len(points) <= keep:
        return points
    idx = np.unique(np.linspace(0, len(points) - 1, keep).round().astype(int))
    return [points[i] for i in idx]


def _slices(
    rows: Sequence[LabelledRow], s: np.ndarray, pos: np.ndarray, by: str, threshold: float
) -> list[SliceStat]:
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        value = lookup(row.fields, by)
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
    *,
    by: str | None = None,
    threshold: float | None = None,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    note: str | None = None,
    config: RunConfig | None = None,
    **options: Unpack[RunOptions],
) -> CalibrationReport:
    """Score a labelled file with ``metric`` and measure agreement; see :func:`calibrate`."""
    t0 = time.perf_counter()
    run_config = RunConfig.of(config, **options)
    metric_obj = as_metric(metric)
    rows = read_labelled(data)
    cases = [labelled_case(r, metric_obj) for r in rows]
    run = await aevaluate(
        cases,
        [metric_obj],
        config=RunConfig.of(run_config, keep_results=True, out=None),
    )
    all_labels = np.array([r.label for r in rows], dtype=float)
    graded = bool(not np.all((all_labels == 0) | (all_labels == 1)))
    if graded:
        cut = float(np.median(all_labels))
        rule = f"graded labels: label >= median {cut:g} counts as positive"
    else:
        cut = 1.0
        rule = "binary labels: 1 positive, 0 negative"
    by_id = {r.case_id: r for r in run.iter_results()}
    readers = {getattr(r.details, "offline_model", None) for r in by_id.values()}
    items: list[CalibrationItem] = []
    used: list[LabelledRow] = []
    scores: list[float] = []
    failures: list[dict[str, str]] = []
    n_not_applicable = 0
    for row in rows:
        result = by_id.get(row.id)
        score = None if result is None else result.score
        error = None
        not_applicable = None if result is None else result.not_applicable
        if not_applicable is not None:
            n_not_applicable += 1
        elif result is None or result.failed or score is None or not math.isfinite(score):
            error = "no result" if result is None else (result.error or "no score")
            failures.append({"id": row.id, "error": error})
        else:
            used.append(row)
            scores.append(float(score))
        where = lookup(row.fields, by) if by else None
        items.append(
            CalibrationItem(
                id=row.id,
                label=row.label,
                positive=row.label >= cut,
                score=None if error or not_applicable else score,
                error=error,
                not_applicable=not_applicable,
                slice=None if not by else "(missing)" if where is None else str(where),
                reason=None if result is None else result.reason,
            )
        )
    labels = np.array([r.label for r in used], dtype=float)
    pos = labels >= cut
    s = np.array(scores, dtype=float)
    y = pos.astype(float)
    thr = _threshold(metric_obj, threshold)
    report = CalibrationReport(
        data=str(data) if isinstance(data, (str, Path)) else "(rows)",
        metric=key_of(metric_obj),
        judge=run.judge,
        n_rows=len(rows),
        n=len(used),
        n_failed=len(failures),
        n_not_applicable=n_not_applicable,
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
        published=next((f for r in sorted(readers, key=str) if (f := held_out_of(r))), None),
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
    *,
    by: str | None = None,
    threshold: float | None = None,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    note: str | None = None,
    config: RunConfig | None = None,
    **options: Unpack[RunOptions],
) -> CalibrationReport:
    """Measure how well ``metric`` agrees with the human labels in ``data``.

    ``data``: a labelled JSONL/CSV/Parquet file or an iterable of dicts: a test case per row
    (the columns ``contextlens run`` reads: ``id``, ``input`` / ``question``,
    ``actual_output`` / ``answer``, ``expected_output``, ``retrieval_context`` /
    ``contexts``, ``context``, ``meta``) and its ``label`` (``label_meaning`` may say what
    it means). ``metric``: any metric name or a metric object; the row is scored as
    ``contextlens run`` scores it (a session metric such as ``context`` takes it as a session
    of one interaction: context = the joined chunks, reference reply = the expected output).
    The report names the metric by its key.
    ``by``: a dotted key such as ``"meta.domain"`` for a per-slice breakdown.
    ``threshold``: where to measure balanced accuracy and F1 (default: the metric's own, else
    0.5). Items the metric fails on are counted in ``n_failed`` and excluded.
    The run's settings (``judge``, ``max_concurrency``, ``cache``, ``progress``, ...) are
    :func:`contextlens.evaluate`'s, with the same defaults.
    """
    return run_sync(
        acalibrate(
            data,
            metric,
            by=by,
            threshold=threshold,
            n_boot=n_boot,
            ci=ci,
            seed=seed,
            note=note,
            config=RunConfig.of(config, **options),
        )
    )
