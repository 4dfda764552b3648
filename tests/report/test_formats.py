"""The files CI reads: JUnit XML (read back by a JUnit parser), Markdown, CSV."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import pytest

from contextlens.compare import compare
from contextlens.report.items import write_csv
from contextlens.report.junit import write_junit
from contextlens.report.markdown import cell, comparison_markdown, run_markdown
from contextlens.results import ItemResult
from support.runs import MARKS, RELEVANCY, SIMILARITY, synthetic_run

junitparser = pytest.importorskip("junitparser")


def test_junit_has_a_test_per_case_and_metric_failing_below_its_pass_mark(tmp_path):
    run = synthetic_run(50)
    path = write_junit(run, tmp_path / "junit.xml")
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    assert set(suites) == {RELEVANCY, SIMILARITY}
    expected = {}
    for key, mark in MARKS.items():
        items = [r for r in run.results if r.metric == key]
        failed = [r for r in items if r.failed]
        below = [r for r in items if not r.failed and r.score < mark]
        expected[key] = (len(items), len(below), len(failed))
        suite = suites[key]
        assert (suite.tests, suite.failures, suite.errors) == expected[key]
        cases = {c.name: c for c in suite}
        assert set(cases) == {r.case_id for r in items}
        for r in below:
            [result] = cases[r.case_id].result
            assert isinstance(result, junitparser.Failure)
            assert result.message == f"score {r.score:.3f} < pass mark {mark:g}"
            assert result.text == r.reason
        for r in failed:
            [result] = cases[r.case_id].result
            assert isinstance(result, junitparser.Error)
            assert "not JSON" in result.message and result.text == r.details.raw_reply
        passing = [r for r in items if not r.failed and r.score >= mark]
        assert all(cases[r.case_id].is_passed for r in passing)
        s = run.summaries[key]
        properties = {p.name: float(p.value) for p in suite.properties()}
        assert properties["pass_mark"] == mark and properties["n_passed"] == len(passing)
        assert properties["pass_rate"] == pytest.approx(s.pass_rate, abs=1e-5)
        assert (properties["pass_low"], properties["pass_high"]) == pytest.approx(
            (s.pass_low, s.pass_high), abs=1e-5
        )
    assert xml.tests == sum(t for t, _, _ in expected.values())
    # the schema's rules: every testcase has a name and a classname, counts are integers
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        assert case.get("name") and case.get("classname", "").startswith("contextlens.")


def test_junit_skips_items_not_applicable_or_not_run_and_writes_control_characters_out(
    tmp_path,
):
    run = synthetic_run(10)
    run.results[0] = run.results[0].model_copy(update={"reason": "bad \x1b[31m\x00 text"})
    run.results += [
        ItemResult(
            case_id="chit",
            metric=RELEVANCY,
            score=None,
            not_applicable="not applicable: no retrieved context",
        ),
        ItemResult(case_id="late", metric=RELEVANCY, score=None, not_run="not run: the cap"),
    ]
    path = write_junit(run, tmp_path / "j.xml")
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    relevancy = suites[RELEVANCY]
    assert (relevancy.tests, relevancy.skipped) == (12, 2)
    assert relevancy.failures == sum(r.status == "below" for r in run.results[:-2]
                                     if r.metric == RELEVANCY)  # fmt: skip
    cases = {c.name: c for c in relevancy}
    [skipped] = cases["chit"].result
    assert isinstance(skipped, junitparser.Skipped)
    assert skipped.message == "not applicable: no retrieved context"
    [skipped] = cases["late"].result
    assert isinstance(skipped, junitparser.Skipped) and skipped.message == "not run: the cap"
    assert xml.skipped == 2
    assert "\\x1b[31m\\x00" in path.read_text()


def test_markdown_summary_table():
    run = synthetic_run(20)
    text = run_markdown(run)
    lines = text.splitlines()
    assert lines[0] == "### contextlens run `synthetic01` · nightly"
    header = lines[2]
    assert header == "| metric | judge | mean | interval | pass | items | failed |"
    [row] = [x for x in lines if x.startswith(f"| {RELEVANCY} ")]
    s = run.summaries[RELEVANCY]
    interval = f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
    rate = f"{s.pass_rate:.0%} [{s.pass_low:.0%}, {s.pass_high:.0%}] @0.5"
    shown = f"| {s.mean:.3f} | {interval} | {rate} | 20 |"
    assert shown.replace("[", "\\[").replace("]", "\\]") in row
    assert cell("a | b\nc <x>") == "a \\| b c \\<x\\>"


def test_markdown_comparison_names_warnings_and_regressions():
    a = synthetic_run(30, run_id="before")
    b = synthetic_run(30, run_id="after", seed=2, shift=-0.2)
    b.summaries[SIMILARITY] = b.summaries[SIMILARITY].model_copy(update={"judge": "judge-b"})
    comparison = compare(a, b)
    text = comparison_markdown(comparison)
    assert "> **Warning:** context-similarity: judged by offline in A, by judge-b in B" in text
    [row] = [x for x in text.splitlines() if x.startswith(f"| {RELEVANCY} ")]
    rates = f"{a.summaries[RELEVANCY].pass_rate:.0%} -> {b.summaries[RELEVANCY].pass_rate:.0%}"
    assert f"| {rates.replace('>', chr(92) + '>')} |" in row
    changes = text.split("changes:")[1].splitlines()
    first = next(x for x in changes if x.startswith("| case-"))
    worst = sorted(
        (c for m in comparison.metrics for c in m.changes if c.change != "unchanged"),
        key=lambda c: c.order(),
    )[0]
    assert first.startswith(f"| {worst.case_id} |") and first.endswith(f"| {worst.change} |")


def test_csv_has_the_items_with_case_fields_and_meta(tmp_path):
    run = synthetic_run(6)
    run.results.append(ItemResult(case_id="unknown", metric=RELEVANCY, score=0.1, success=False))
    run.results.append(
        ItemResult(case_id="case-00001", metric="m", score=None, not_applicable="no chunks")
    )
    path = write_csv(run, tmp_path / "items.csv")
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(run.results)
    first = rows[0]
    assert list(first)[:7] == ["case_id", "metric", "score", "status", "reason", "error", "judge"]
    assert list(first)[-2:] == ["meta.domain", "meta.tier"]
    assert first["input"].startswith("Question 0") and first["meta.tier"] == "gold"
    assert {r["status"] for r in rows[:-2]} <= {"pass", "below", "failed"}
    assert rows[-2]["case_id"] == "unknown" and rows[-2]["input"] == ""
    assert rows[-2]["status"] == "below"
    assert (rows[-1]["status"], rows[-1]["reason"], rows[-1]["score"]) == (
        "not applicable",
        "no chunks",
        "",
    )
