"""Agreement statistics against scikit-learn / scipy, the calibrate driver, its page and CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score

from contextlens.calibration import (
    CalibrationReport,
    auroc,
    auroc_interval,
    balanced_accuracy,
    best_threshold,
    calibrate,
    expected_calibration_error,
    f1,
    reliability,
    roc_points,
    spearman,
)
from contextlens.errors import InputError
from contextlens.report.calibration_html import write_calibration_report
from contextlens.schemas import MetricResult, ModelTestCase

# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_matches_sklearn_and_interval_contains_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 300)
    s = rng.normal(size=300) + 0.8 * y
    expected = roc_auc_score(y, s)
    assert abs(auroc(s, y) - expected) < 1e-12
    low, high = auroc_interval(s, y, n_boot=500, seed=seed)
    assert low <= expected <= high
    assert high - low < 0.3


def test_auroc_ties_averaged() -> None:
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 400)
    s = np.round(rng.random(400) + 0.3 * y, 1)  # many ties
    assert abs(auroc(s, y) - roc_auc_score(y, s)) < 1e-12
    assert auroc([0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0]) == 0.5
    assert auroc([1, 0.5, 0.5, 0], [1, 1, 0, 0]) == pytest.approx(0.875)


def test_auroc_interval_is_seeded_and_needs_both_classes() -> None:
    s, y = [0.1, 0.4, 0.35, 0.8, 0.7, 0.2], [0, 0, 1, 1, 1, 0]
    assert auroc_interval(s, y, n_boot=200, seed=3) == auroc_interval(s, y, n_boot=200, seed=3)
    with pytest.raises(ValueError, match="both classes"):
        auroc([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="both classes"):
        auroc_interval([0.1, 0.2], [0, 0])


@pytest.mark.parametrize("threshold", [0.2, 0.5, 0.73])
def test_balanced_accuracy_and_f1_match_sklearn(threshold: float) -> None:
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 200)
    s = np.clip(rng.random(200) * 0.8 + 0.2 * y, 0, 1)
    pred = (s >= threshold).astype(int)
    assert balanced_accuracy(s, y, threshold) == pytest.approx(balanced_accuracy_score(y, pred))
    assert f1(s, y, threshold) == pytest.approx(f1_score(y, pred, zero_division=0))


def test_best_threshold_separable() -> None:
    s = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
    y = [0, 0, 0, 1, 1, 1]
    t, bal = best_threshold(s, y)
    assert bal == 1.0
    assert 0.3 < t <= 0.6
    assert balanced_accuracy(s, y, t) == 1.0


def test_best_threshold_agrees_with_its_balanced_accuracy() -> None:
    rng = np.random.default_rng(11)
    y = rng.integers(0, 2, 250)
    s = np.round(rng.random(250) + 0.4 * y, 2)
    t, bal = best_threshold(s, y)
    assert balanced_accuracy(s, y, t) == pytest.approx(bal)
    grid = max(balanced_accuracy(s, y, c) for c in np.unique(s))
    assert bal == pytest.approx(grid)


def test_spearman_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    graded = rng.integers(0, 4, 120).astype(float)
    s = np.round(graded + rng.normal(size=120), 1)
    assert abs(spearman(s, graded) - stats.spearmanr(s, graded).statistic) < 1e-12
    assert np.isnan(spearman([1, 1, 1], [0, 1, 2]))


def test_reliability_bins_and_ece() -> None:
    s = [0.05, 0.05, 0.95, 0.95, 0.55, 0.55]
    y = [0, 0, 1, 1, 1, 0]
    bins, ece = reliability(s, y, bins=10)
    assert [b.count for b in bins] == [2, 2, 2]
    assert bins[1].observed_rate == 0.5 and bins[1].mean_predicted == pytest.approx(0.55)
    assert ece == pytest.approx((2 * 0.05 + 2 * 0.05 + 2 * 0.05) / 6)
    assert expected_calibration_error(s, y) == pytest.approx(ece)
    assert reliability([1.0], [1])[0][0].high == 1.0  # a score of exactly 1 is in the last bin


def test_roc_points_run_corner_to_corner() -> None:
    pts = roc_points([0.9, 0.8, 0.8, 0.1], [1, 0, 1, 0])
    assert pts[0] == (0.0, 0.0) and pts[-1] == (1.0, 1.0)
    assert len(pts) == 4  # the tie at 0.8 is one step


# --------------------------------------------------------------------------- the driver

ROWS: list[dict[str, Any]] = [
    {
        "id": f"r{i}",
        "question": "When does the shop open?",
        "contexts": ["The shop opens at 9am and closes at 5pm on weekdays."],
        "answer": answer,
        "label": label,
        "meta": {"domain": domain},
    }
    for i, (answer, label, domain) in enumerate(
        [
            ("The shop opens at 9am.", 1, "a"),
            ("It closes at 5pm on weekdays.", 1, "a"),
            ("The shop opens at 9am and closes at 5pm.", 1, "b"),
            ("On weekdays it is open from 9am.", 1, "b"),
            ("The shop sells discounted bicycles every Sunday.", 0, "a"),
            ("Our founder was born in Lisbon in 1961.", 0, "a"),
            ("Free parking is available for electric cars.", 0, "b"),
            ("The CEO's favourite colour is green.", 0, "c"),
        ]
    )
]


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return path


def test_calibrate_end_to_end_offline(labelled: Path, tmp_path: Path) -> None:
    report = calibrate(labelled, "context", cache=False, by="meta.domain", n_boot=200)
    assert isinstance(report, CalibrationReport)
    assert (report.n, report.n_failed, report.n_positive, report.n_negative) == (8, 0, 4, 4)
    assert report.auroc is not None and 0.0 <= report.auroc <= 1.0
    assert report.auroc_low <= report.auroc <= report.auroc_high
    assert report.threshold == 0.5 and report.best_balanced_accuracy is not None
    assert report.suggested_threshold == report.best_threshold
    assert report.spearman is None and not report.graded
    assert sum(b.count for b in report.reliability) == 8
    assert [s.value for s in report.slices] == ["a", "b", "c"]
    only_c = report.slices[2]
    assert only_c.auroc is None and "one class" in (only_c.note or "")
    assert report.slice_mean_auroc is not None
    assert any(row["statistic"] == "AUROC" for row in report.to_table())
    page = write_calibration_report(report, tmp_path / "cal.html").read_text(encoding="utf-8")
    assert "<svg" in page and "http://" not in page.replace("http://www.w3.org", "")
    assert "optimistic" in page


class FlakyMetric:
    """Scores by the label hidden in the answer; fails on two items (one error, one raise)."""

    name = "flaky"
    case_type = ModelTestCase
    threshold = 0.5

    async def score(self, case: ModelTestCase, services: Any) -> MetricResult:
        if case.name == "r0":
            return MetricResult(metric=self.name, score=None, error="judge said nothing")
        if case.name == "r4":
            raise RuntimeError("boom")
        score = 0.9 if "9am" in (case.actual_output or "") else 0.1
        return MetricResult(metric=self.name, score=score)


def test_failed_items_are_counted_and_excluded(labelled: Path) -> None:
    report = calibrate(labelled, FlakyMetric(), cache=False, n_boot=100)
    assert report.n_rows == 8 and report.n == 6 and report.n_failed == 2
    assert {f["id"] for f in report.failures} == {"r0", "r4"}
    assert report.n_positive == 3 and report.n_negative == 3
    # r1 ("closes at 5pm") is a positive scored 0.1; nothing failed was scored 0
    assert report.auroc == pytest.approx(auroc([0.1, 0.9, 0.9, 0.1, 0.1, 0.1], [1, 1, 1, 0, 0, 0]))


def test_graded_labels_binarised_at_the_median_and_spearman() -> None:
    rows = [
        {"id": f"g{i}", "question": "q", "contexts": ["c"], "answer": f"a {i}", "label": g}
        for i, g in enumerate([0.1, 0.2, 0.5, 0.6, 0.9, 1.0])
    ]

    class ByIndex:
        name, case_type = "by_index", ModelTestCase

        async def score(self, case: ModelTestCase, services: Any) -> MetricResult:
            return MetricResult(metric=self.name, score=int(case.name[1:]) / 10)

    report = calibrate(rows, ByIndex(), cache=False, n_boot=100)
    assert report.graded and "median" in report.positive_rule
    assert (report.n_positive, report.n_negative) == (3, 3)
    assert report.auroc == 1.0 and report.spearman == pytest.approx(1.0)


def test_missing_label_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    rows = [dict(ROWS[0]), {k: v for k, v in ROWS[1].items() if k != "label"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        calibrate(path, "context", cache=False)
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, "label")


# --------------------------------------------------------------------------- the command


def test_cli_calibrate_writes_page_and_json(run_cli, labelled: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, text = run_cli("calibrate", labelled, "--by", "meta.domain", "--out", out, "-q")
    assert code == 0, text
    assert "AUROC" in text
    saved = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    assert saved["n"] == 8 and saved["by"] == "meta.domain"
    assert (out / "calibration.html").exists()


def test_cli_calibrate_bad_input_exits_2(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "x", "question": "q", "answer": "a"}) + "\n")
    code, text = run_cli("calibrate", path, "--out", tmp_path / "o", "-q")
    assert code == 2 and "label" in text and ":1" in text
    code, text = run_cli("calibrate", tmp_path / "missing.jsonl", "-q")
    assert code == 2
    code, text = run_cli("calibrate", path, "--metric", "nope", "-q")
    assert code == 2 and "unknown metric" in text


def test_csv_with_json_cells_and_slices(tmp_path: Path) -> None:
    path = tmp_path / "labelled.csv"
    lines = ["id,question,contexts,answer,label,meta"]
    for i, (label, domain) in enumerate([(1, "x"), (0, "x"), (1, "y"), (0, "y"), (1, "y")]):
        meta = json.dumps({"domain": domain}).replace('"', '""')
        lines.append(f'c{i},q,"[""ctx {i}""]",answer {i},{label},"{meta}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    class Echo:
        name, case_type = "echo", ModelTestCase

        async def score(self, case: ModelTestCase, services: Any) -> MetricResult:
            assert case.retrieval_context == [f"ctx {case.name[1:]}"]
            return MetricResult(metric=self.name, score=0.2 + 0.1 * int(case.name[1:]))

    report = calibrate(path, Echo(), cache=False, by="meta.domain", n_boot=50)
    assert report.n == 5 and [s.value for s in report.slices] == ["x", "y"]
    assert [s.n for s in report.slices] == [2, 3]


def test_calibrate_is_part_of_the_package_surface() -> None:
    import contextlens
    from contextlens import calibration

    assert contextlens.calibrate is calibration.calibrate
    assert contextlens.acalibrate is calibration.acalibrate
