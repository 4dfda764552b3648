"""Agreement statistics against scikit-learn / scipy, the calibrate driver, its page and CLI."""

from __future__ import annotations

import itertools
import json
import re
from html.parser import HTMLParser
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
    cross_validated_balanced_accuracy,
    expected_calibration_error,
    f1,
    reliability,
    roc_points,
    spearman,
)
from contextlens.errors import InputError
from contextlens.metrics.faithfulness import FaithfulnessMetric
from contextlens.report.calibration_html import write_calibration_report
from contextlens.runner import latest_run
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
    assert report.cv_balanced_accuracy is not None and report.cv_folds == 4
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
    saved = json.loads((out / "latest" / "calibration.json").read_text(encoding="utf-8"))
    assert saved["n"] == 8 and saved["by"] == "meta.domain"
    assert (out / "latest" / "calibration.html").exists()


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


# --------------------------------------------------------------------------- what users met


class Keyword:
    """Scores 0.9 when the answer says "9am", else 0.1; fails on ``k0``. Its own name differs
    from the name it is registered under."""

    name = "keyword_score"
    case_type = ModelTestCase
    threshold = 0.5

    async def score(self, case: ModelTestCase, services: Any) -> MetricResult:
        if case.name == "k0":
            return MetricResult(metric=self.name, score=None, error="judge said nothing")
        hit = "9am" in (case.actual_output or "")
        return MetricResult(metric=self.name, score=0.9 if hit else 0.1, reason="keyword")


KEYWORD_ROWS = [
    {**row, "id": f"k{i}"}
    for i, row in enumerate(
        [
            *ROWS,
            {**ROWS[4], "answer": "The shop opens at 9am on Sundays.", "meta": {"domain": "c"}},
        ]
    )
]


@pytest.fixture
def keyword_metric() -> Any:
    """``keyword-test``: :class:`Keyword`, registered for the command line."""
    from contextlens.metrics import registry

    registry.metric("keyword-test")(Keyword)
    yield "keyword-test"
    registry.unregister("keyword-test")


@pytest.fixture
def keyword_file(tmp_path: Path) -> Path:
    path = tmp_path / "keyword.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in KEYWORD_ROWS) + "\n", encoding="utf-8")
    return path


def _runs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir() and not p.is_symlink())


def test_each_run_gets_its_own_folder_and_latest_names_the_newest(
    run_cli, keyword_metric: str, keyword_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ("calibrate", keyword_file, "-m", keyword_metric, "--out", out, "-q")
    assert run_cli(*args)[0] == 0
    (first,) = _runs(out)
    first_json = (first / "calibration.json").read_text(encoding="utf-8")
    assert run_cli(*args, "--threshold", "0.95")[0] == 0
    runs = _runs(out)
    assert len(runs) == 2
    (second,) = [p for p in runs if p != first]
    for run in runs:
        assert {p.name for p in run.iterdir()} == {
            "calibration.json",
            "calibration.html",
            "items.jsonl",
        }
    assert (first / "calibration.json").read_text(encoding="utf-8") == first_json
    assert latest_run(out) == second
    assert json.loads((out / "latest" / "calibration.json").read_text())["threshold"] == 0.95


def test_items_are_written_and_the_page_names_the_most_misjudged(
    run_cli, keyword_metric: str, keyword_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    code, text = run_cli(
        "calibrate", keyword_file, "-m", keyword_metric, "--by", "meta.domain", "--out", out, "-q"
    )
    assert code == 0, text
    lines = (out / "latest" / "items.jsonl").read_text(encoding="utf-8").splitlines()
    items = {d["id"]: d for d in map(json.loads, lines)}
    assert list(items) == [r["id"] for r in KEYWORD_ROWS]
    assert items["k0"]["score"] is None and items["k0"]["error"] == "judge said nothing"
    assert items["k1"] == {
        "id": "k1",
        "label": 1.0,
        "positive": True,
        "score": 0.1,
        "error": None,
        "not_applicable": None,
        "slice": "a",
        "reason": "keyword",
    }
    assert items["k8"]["score"] == 0.9 and items["k8"]["label"] == 0 and items["k8"]["slice"] == "c"
    saved = json.loads((out / "latest" / "calibration.json").read_text(encoding="utf-8"))
    assert "items" not in saved  # every item is in items.jsonl, not twice
    assert saved["worst_negatives"][0]["id"] == "k8"
    assert saved["worst_positives"][0]["id"] == "k1"
    page = (out / "latest" / "calibration.html").read_text(encoding="utf-8")
    worst = page[page.index("Highest-scored items labelled 0") :]
    worst = worst[: worst.index("</section>")]
    assert "<td>k8</td>" in worst and "<td>k1</td>" in worst and "misjudged" in worst
    assert worst.index("<td>k8</td>") < worst.index("Lowest-scored items labelled 1")


class _Tags(HTMLParser):
    """Every start tag's attributes as given, repeated names kept."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def test_best_threshold_carries_its_optimistic_style(labelled: Path, tmp_path: Path) -> None:
    report = calibrate(labelled, Keyword(), cache=False, n_boot=50)
    parser = _Tags()
    parser.feed(write_calibration_report(report, tmp_path / "c.html").read_text())
    for tag, attrs in parser.tags:
        names = [name for name, _ in attrs]
        assert len(names) == len(set(names)), f"<{tag}> repeats an attribute: {attrs}"
    at = next(i for i, (_, a) in enumerate(parser.tags) if ("data-field", "best_threshold") in a)
    value = next(dict(a) for _, a in parser.tags[at:] if "value" in (dict(a).get("class") or ""))
    assert "opt" in (value["class"] or "").split()


def test_metric_is_named_as_its_flag(run_cli, labelled: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, text = run_cli("calibrate", labelled, "--metric", "context-precision", "--out", out, "-q")
    assert code == 0, text
    assert "context-precision vs human labels" in text and "context_precision" not in text
    saved = json.loads((out / "latest" / "calibration.json").read_text(encoding="utf-8"))
    assert saved["metric"] == "context-precision"
    page = (out / "latest" / "calibration.html").read_text(encoding="utf-8")
    assert "context_precision" not in page
    assert calibrate(labelled, "context-precision", cache=False, n_boot=50).metric == (
        "context-precision"
    )


def test_terminal_slices_have_balanced_accuracy_and_pooled_vs_mean_explained(
    run_cli, keyword_metric: str, keyword_file: Path, tmp_path: Path
) -> None:
    code, text = run_cli(
        "calibrate", keyword_file, "-m", keyword_metric, "--by", "meta.domain",
        "--out", tmp_path / "out", "-q",
    )  # fmt: skip
    assert code == 0, text
    slices = text[text.index("by meta.domain") :]
    assert "bal. acc. @ 0.5" in slices
    cells = {
        row[0]: row[1:]
        for row in (
            [c.strip() for c in x.strip("│").split("│")]
            for x in slices.splitlines()
            if x.startswith("│ ")
        )
    }
    # slice a: k1 (1) and k4, k5 (0) all scored 0.1; b: k2, k3 (1) at 0.9 and k6 (0) at 0.1
    assert cells["a"][2:4] == ["0.500", "0.500"] and cells["b"][2:4] == ["1.000", "1.000"]
    assert "pooled over all items" in slices
    assert "mean of the per-slice AUROCs" in slices


def test_progress_lines_when_stderr_is_not_a_terminal(
    run_cli, keyword_metric: str, keyword_file: Path, tmp_path: Path
) -> None:
    args = ("calibrate", keyword_file, "-m", keyword_metric, "--out", tmp_path / "out")
    code, text = run_cli(*args)
    assert code == 0, text
    assert "calibrate: 9/9 items (100%)" in text and "elapsed" in text
    assert "items/s" in text or "s per item" in text
    code, text = run_cli(*args, "-q")
    assert code == 0 and "items (100%)" not in text


def test_progress_lines_come_every_tenth_or_every_ten_seconds(capsys) -> None:
    from contextlens.cli.options import ProgressLines

    lines = ProgressLines("calibrate")
    for done in range(1, 1001):
        lines(done, 1000, done * 0.001)  # fast: a line a tenth
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == 11 and printed[-1].startswith("calibrate: 1000/1000 items (100%)")
    slow = ProgressLines("calibrate")
    for done in range(1, 61):
        slow(done, 100_000, float(done))  # slow: a line each ten seconds
    assert len(capsys.readouterr().err.splitlines()) == 6


def test_progress_callback_sees_every_item(labelled: Path) -> None:
    seen: list[tuple[int, int | None, float]] = []
    calibrate(labelled, Keyword(), cache=False, n_boot=50, progress=lambda *a: seen.append(a))
    assert [d for d, _, _ in seen] == list(range(1, 9))
    assert {t for _, t, _ in seen} == {8}
    assert all(b[2] >= a[2] >= 0 for a, b in itertools.pairwise(seen))


def test_wall_time_is_printed(run_cli, labelled: Path, tmp_path: Path) -> None:
    code, text = run_cli("calibrate", labelled, "--out", tmp_path / "out", "-q")
    assert code == 0 and re.search(r"time: +\d+\.\d s wall time", text)


def test_one_best_threshold_and_an_honest_cross_validated_accuracy() -> None:
    report = CalibrationReport(
        data="x", metric="m", judge="offline", n_rows=0, n=0, n_failed=0, n_positive=0,
        n_negative=0, graded=False, positive_rule="", threshold=0.5,
    )  # fmt: skip
    names = [row["statistic"] for row in report.to_table()]
    assert not any("suggested" in n for n in names)
    assert names.count("best threshold") == 1
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    noise = rng.random(400)  # no signal: the best threshold still finds some on these labels
    _, optimistic = best_threshold(noise, y)
    honest, folds = cross_validated_balanced_accuracy(noise, y)
    assert folds == 5 and optimistic > 0.53 and abs(honest - 0.5) < 0.06 and honest < optimistic
    signal = noise + 0.6 * y
    assert cross_validated_balanced_accuracy(signal, y)[0] > 0.75
    assert cross_validated_balanced_accuracy([0.2, 0.8, 0.3], [0, 1, 0])[1] == 1  # too few
    assert np.isnan(cross_validated_balanced_accuracy([0.2, 0.8, 0.3], [0, 1, 0])[0])


def test_an_offline_calibration_states_the_models_own_held_out_figures(
    run_cli, labelled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, text = run_cli("calibrate", labelled, "-m", "faithfulness", "--out", tmp_path, "-q")
    assert code == 0, text
    flat = " ".join(text.split())
    assert "The offline features model itself, on 9 public sources each held out" in flat
    assert "benchmarks/select_support.py" in flat
    saved = json.loads((tmp_path / "latest" / "calibration.json").read_text(encoding="utf-8"))
    assert saved["published"].startswith("The offline features model itself")
    monkeypatch.setenv("CONTEXTLENS_SUPPORT_MODEL", "reader")
    by_reader = calibrate(labelled, FaithfulnessMetric(), cache=False)
    assert by_reader.published is not None
    assert by_reader.published.startswith("The offline claim reader itself, on 9 public")
    assert "benchmarks/fit_reader_calibration.py" in by_reader.published
    similarity = calibrate(labelled, "context-similarity", cache=False)
    assert similarity.published is None  # no model card of its own to state
