"""What a calibration reports: agreement overall and per slice, every item as scored."""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, Field

from contextlens.calibration.statistics import ReliabilityBin
from contextlens.engine.accounting import LedgerReport
from contextlens.files import write_text

__all__ = ["WORST", "CalibrationItem", "CalibrationReport", "SliceStat"]

WORST = 10
"""How many of the most misjudged items of each class a report names."""


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
    not_applicable: str | None = Field(
        None, description="why the metric does not apply to it (an answer that abstains)"
    )
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
    n_not_applicable: int = Field(
        0, description="items the metric does not apply to (an answer that abstains), excluded"
    )
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
    published: str | None = Field(
        None, description="the offline model's own figures on public sources held out"
    )
    duration_s: float = 0.0
    accounting: LedgerReport = Field(default_factory=LedgerReport)

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
            (
                "items",
                f"{self.n} scored / {self.n_rows}",
                f"{self.n_failed} failed, {self.n_not_applicable} not applicable; excluded",
            ),
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
        return write_text(path, "".join(item.model_dump_json() + "\n" for item in self.items))
