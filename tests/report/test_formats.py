"""The files CI reads: JUnit XML (read back by a JUnit parser), Markdown, CSV."""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET

import pytest

from contextlens.compare import compare
from contextlens.report.items import write_csv
from contextlens.report.junit import GATES, write_junit
from contextlens.report.markdown import cell, comparison_markdown, run_markdown
from contextlens.results import ItemResult, RecordedConfig
from contextlens.runner.gates import RegressionGate, check_run, parse_gates
from contextlens.stats import BayesianMode
from support.runs import MARKS, RELEVANCY, SIMILARITY, synthetic_run

junitparser = pytest.importorskip("junitparser")


def by_class(suite, classname):
    """The test cases of ``suite`` whose classname is ``classname``, by name."""
    return {c.name: c for c in suite if c.classname == classname}


def test_junit_items_have_a_test_per_case_and_metric_failing_below_its_pass_mark(tmp_path):
    run = synthetic_run(50)
    path = write_junit(run, tmp_path / "junit.xml", items=True)
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    assert set(suites) == {GATES, RELEVANCY, SIMILARITY}
    expected = {}
    for key, mark in MARKS.items():
        items = [r for r in run.results if r.metric == key]
        failed = [r for r in items if r.failed]
        below = [r for r in items if not r.failed and r.score < mark]
        expected[key] = (len(items) + 1, len(below), len(failed))  # and the summary's case
        suite = suites[key]
        assert (suite.tests, suite.failures, suite.errors) == expected[key]
        cases = by_class(suite, f"contextlens.{key}")
        assert set(cases) == {r.case_id for r in items}
        for r in below:
            [result] = cases[r.case_id].result
            assert isinstance(result, junitparser.Failure)
            score, bar = re.fullmatch(r"score (\S+) < pass mark (\S+)", result.message).groups()
            assert float(score) < float(bar) == mark and float(score) == pytest.approx(
                r.score, abs=5e-4
            )
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
    gates = len(run.summaries)  # --max-failures per metric
    assert xml.tests == sum(t for t, _, _ in expected.values()) + gates
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
    path = write_junit(run, tmp_path / "j.xml", items=True)
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    relevancy = suites[RELEVANCY]
    assert (relevancy.tests, relevancy.skipped) == (13, 2)
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


def test_the_junit_file_fails_exactly_when_the_gates_do(tmp_path):
    run = synthetic_run(50)  # many items below their pass marks, one similarity item failed
    assert sum(r.status == "below" for r in run.results) > 20
    met = check_run(run, parse_gates([f"{RELEVANCY}=0.5"], list(run.summaries)), "1")
    assert not any(o.missed for o in met)
    xml = junitparser.JUnitXml.fromfile(str(write_junit(run, tmp_path / "met.xml", met)))
    assert (xml.failures, xml.errors) == (0, 0)
    suites = {s.name: s for s in xml}
    gates = by_class(suites[GATES], "contextlens.gates")
    assert set(gates) == {f"fail-under {RELEVANCY}", f"max-failures {RELEVANCY}",
                          f"max-failures {SIMILARITY}"}  # fmt: skip
    assert all(case.is_passed for case in gates.values())
    for key in MARKS:  # each metric's summary: a passing test saying its mean and pass rate
        [summary] = by_class(suites[key], "contextlens.summary").values()
        assert summary.is_passed and f"mean {run.summaries[key].mean:.3f}" in summary.system_out
        assert suites[key].tests == 1  # no test per case unless asked
    mean = run.summaries[RELEVANCY].mean
    missed = check_run(run, parse_gates([f"{RELEVANCY}=0.9"], list(run.summaries)), "1")
    xml = junitparser.JUnitXml.fromfile(str(write_junit(run, tmp_path / "missed.xml", missed)))
    assert (xml.failures, xml.errors) == (1, 0)
    [failure] = by_class({s.name: s for s in xml}[GATES], "contextlens.gates")[
        f"fail-under {RELEVANCY}"
    ].result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message == f"{RELEVANCY}: mean {mean:.3f} < 0.9"
    assert failure.type == "fail-under missed"


def test_a_stopped_run_fails_its_cost_cap_and_leaves_its_other_gates_unchecked(tmp_path):
    run = synthetic_run(10).model_copy(
        update={"stopped": "the cost cap of $1 was reached", "config": RecordedConfig(max_cost=1)}
    )
    outcomes = check_run(run, parse_gates([f"{RELEVANCY}=0.1"], list(run.summaries)))
    xml = junitparser.JUnitXml.fromfile(str(write_junit(run, tmp_path / "j.xml", outcomes)))
    gates = {c.name: c for c in {s.name: s for s in xml}[GATES]}
    [failure] = gates["cost cap"].result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message.startswith("stopped: the cost cap of $1 was reached")
    others = [c for name, c in gates.items() if name != "cost cap"]
    assert len(others) == 3 and all(isinstance(c.result[0], junitparser.Skipped) for c in others)
    assert xml.failures == 1
    done = synthetic_run(10).model_copy(update={"config": RecordedConfig(max_cost=1)})
    [cap] = [o for o in check_run(done, (), "5") if o.kind == "cost cap"]
    assert cap.status == "met" and cap.mark == "every case run within $1"


def test_scores_and_marks_print_with_the_digits_of_the_decision(tmp_path):
    run = synthetic_run(4)
    item = next(i for i, r in enumerate(run.results) if r.metric == RELEVANCY)
    run.results[item] = run.results[item].model_copy(update={"score": 0.19975, "success": False})
    run.summaries[RELEVANCY] = run.summaries[RELEVANCY].model_copy(
        update={"mean": 0.19975, "threshold": 0.2}
    )
    outcomes = check_run(run, parse_gates([f"{RELEVANCY}=0.2"], list(run.summaries)), "5")
    path = write_junit(run, tmp_path / "j.xml", outcomes, items=True)
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = {s.name: s for s in xml}
    [failure] = by_class(suites[RELEVANCY], f"contextlens.{RELEVANCY}")[
        run.results[item].case_id
    ].result
    assert failure.message == "score 0.1998 < pass mark 0.2"
    [gate] = by_class(suites[GATES], "contextlens.gates")[f"fail-under {RELEVANCY}"].result
    assert gate.message == f"{RELEVANCY}: mean 0.1998 < 0.2"
    markdown = run_markdown(run, outcomes)
    assert "| fail-under contextual-relevancy | missed | mean 0.1998 | \\>= 0.2 |" in markdown
    written = " ".join(
        text for e in ET.parse(path).iter() for text in (e.text or "", *e.attrib.values())
    )
    said = re.findall(r"(\d\.\d+) (<|>=) (?:pass mark )?(\d(?:\.\d+)?)", written)
    said += re.findall(r"(\d\.\d+) \\?(<|>=) (\d(?:\.\d+)?)", markdown)
    assert len(said) >= 4  # every comparison printed orders as the decision does
    assert all((float(x) < float(y)) == (op == "<") for x, op, y in said)


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


def test_markdown_summary_says_each_gate_met_or_missed_with_its_value_and_mark():
    run = synthetic_run(20)
    mean = run.summaries[RELEVANCY].mean
    gates = parse_gates([f"{RELEVANCY}=0.95", f"{SIMILARITY}=0.5"], list(run.summaries))
    text = run_markdown(run, check_run(run, gates, "1"))
    assert "**Gates: 1 of 4 missed**, the run fails." in text
    assert f"> **Missed:** fail-under {RELEVANCY}: mean {mean:.3f} \\< 0.95" in text
    rows = [x for x in text.splitlines() if x.startswith("| fail-under ")]
    assert rows == [
        f"| fail-under {RELEVANCY} | missed | mean {mean:.3f} | \\>= 0.95 |",
        f"| fail-under {SIMILARITY} | met | mean {run.summaries[SIMILARITY].mean:.3f} | \\>= 0.5 |",
    ]
    assert f"| max-failures {SIMILARITY} | met | 1 of 20 failed | at most 1 |" in text
    passing = run_markdown(run, check_run(run, gates[1:], "1"))
    assert "**Gates: all 3 met**." in passing and "Missed" not in passing


def test_markdown_comparison_says_each_regression_gate_with_the_rule():
    a = synthetic_run(40, run_id="before")
    b = synthetic_run(40, run_id="after", seed=2, shift=-0.3)
    comparison = compare(a, b)
    mode = BayesianMode(mc_samples=comparison.mc_samples, rng_seed=comparison.seed)
    outcomes = []
    for key, tolerance in ((RELEVANCY, 0.0), (SIMILARITY, 0.5)):
        pairs = comparison.metric(key).pairs
        outcomes.append(
            RegressionGate(key, tolerance).check([x.a for x in pairs], [x.b for x in pairs], mode)
        )
    assert [o.missed for o in outcomes] == [True, False]
    text = comparison_markdown(comparison, regressions=outcomes)
    assert "**Regression gates: 1 of 2 missed**, B fails." in text
    assert "upper end of the 95% credible interval of the paired mean difference B - A" in text
    [row] = [x for x in text.splitlines() if x.startswith(f"| {RELEVANCY} | 0 |")]
    m = comparison.metric(RELEVANCY)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:6] == [str(m.n_paired), f"{m.mean_a:.3f}", f"{m.mean_b:.3f}",
                          f"{m.mean_diff:+.3f}"]  # fmt: skip
    assert cells[6].startswith(f"\\[{m.ci_low:+.3f}, ") and cells[7].startswith("regressed: ")
    [row] = [x for x in text.splitlines() if x.startswith(f"| {SIMILARITY} | 0.5 |")]
    assert "| met: upper end " in row and row.endswith(" \\>= -0.5 |")


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


def test_a_markdown_cell_escapes_an_ampersand_and_shows_noncharacters():
    from contextlens.report.markdown import cell

    assert cell("a &amp; b\ufffe") == "a \\&amp; b\\\\ufffe"
