"""How well a metric agrees with people.

- :mod:`~contextlens.calibration.statistics`: AUROC, accuracy, calibration error (numpy).
- :mod:`~contextlens.calibration.labelled`: labelled files and the case each row stands for.
- :mod:`~contextlens.calibration.report`: what a calibration reports.
- :mod:`~contextlens.calibration.run`: ``calibrate`` itself.
"""

from contextlens.calibration.labelled import LabelledRow, labelled_case, read_labelled, session_of
from contextlens.calibration.report import CalibrationItem, CalibrationReport, SliceStat
from contextlens.calibration.run import acalibrate, calibrate
from contextlens.calibration.statistics import (
    ReliabilityBin,
    auroc,
    auroc_interval,
    balanced_accuracy,
    best_threshold,
    cross_validated_balanced_accuracy,
    expected_calibration_error,
    f1,
    reliability,
    roc_points,
    spearman,
)

__all__ = [
    "CalibrationItem",
    "CalibrationReport",
    "LabelledRow",
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
    "labelled_case",
    "read_labelled",
    "reliability",
    "roc_points",
    "session_of",
    "spearman",
]
