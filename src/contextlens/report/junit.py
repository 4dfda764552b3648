"""A run as a JUnit XML file, the format CI systems read: one test case per case and
metric, failing when its score is below the metric's pass mark, in error when it could not
be scored, skipped when the metric does not apply to the case or the run stopped before it,
each with its reason; each metric's suite carries its pass rate, interval and pass mark as
properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from contextlens.files import make_folder, write_text
from contextlens.report.cases import BELOW, FAILED, NOT_APPLICABLE, NOT_RUN, status_of
from contextlens.results import EvalRun, MetricSummary
from contextlens.terminal import safe

__all__ = ["junit_xml", "write_junit"]

#: A suite's counts: tests, failures, errors, skipped.
_TESTS, _FAILURES, _ERRORS, _SKIPPED = range(4)


def _attr(value: Any) -> str:
    """Text XML 1.0 can hold: control characters written out (``\\x1b``)."""
    return safe(value)


def _text(value: Any) -> str:
    """An element's text: as :func:`_attr`, its lines kept."""
    return "\n".join(safe(part) for part in str(value).split("\n"))


def _properties(suite: ET.Element, summary: MetricSummary | None) -> None:
    """The metric's mean, pass mark, pass rate and its interval, as the suite's properties."""
    if summary is None:
        return
    shown = {
        "mean": summary.mean,
        "pass_mark": summary.threshold,
        "pass_rate": summary.pass_rate,
        "pass_low": summary.pass_low,
        "pass_high": summary.pass_high,
        "n_passed": summary.n_passed if summary.pass_rate is not None else None,
        "n_not_applicable": summary.n_not_applicable or None,
        "n_not_run": summary.n_not_run or None,
        "n_not_english": summary.n_not_english or None,
    }
    found = {k: v for k, v in shown.items() if v is not None}
    if found:
        properties = ET.SubElement(suite, "properties")
        for key, value in found.items():
            ET.SubElement(properties, "property", name=key, value=f"{value:g}")


def junit_xml(run: EvalRun) -> str:
    """The JUnit XML of ``run``: a test suite per metric, a test case per case.

    A case fails (``<failure>``) when its score is below the pass mark the run set (the
    summary's ``threshold``), is in error (``<error>``) when the metric could not score it,
    and is skipped (``<skipped>``) when the metric does not apply to it or the run stopped
    before it; the message says why.
    """
    suites = ET.Element("testsuites", name=f"contextlens {run.run_id}")
    by_metric: dict[str, ET.Element] = {}
    counts: dict[str, list[int]] = {}

    def suite_of(key: str) -> ET.Element:
        if key not in by_metric:
            by_metric[key] = ET.SubElement(suites, "testsuite", name=_attr(key))
            counts[key] = [0, 0, 0, 0]
            _properties(by_metric[key], run.summaries.get(key))
        return by_metric[key]

    for key in run.summaries:
        suite_of(key)
    for item in run.iter_results():
        key = item.metric
        case = ET.SubElement(
            suite_of(key),
            "testcase",
            classname=_attr(f"contextlens.{key}"),
            name=_attr(item.case_id),
            time="0",
        )
        counts[key][_TESTS] += 1
        status = status_of(item)
        if status == FAILED:
            counts[key][_ERRORS] += 1
            error = ET.SubElement(
                case, "error", message=_attr(f"not scored: {item.error}"), type="not scored"
            )
            error.text = _text(item.details.raw_reply or item.error or "")
        elif status in (NOT_APPLICABLE, NOT_RUN):
            counts[key][_SKIPPED] += 1
            why = item.not_applicable or item.not_run or status  # "not run: the cost cap ..."
            ET.SubElement(case, "skipped", message=_attr(why))
        elif status == BELOW:
            counts[key][_FAILURES] += 1
            summary = run.summaries.get(key)
            mark = summary.threshold if summary is not None else None
            bar = f" < pass mark {mark:g}" if mark is not None else " below the pass mark"
            failure = ET.SubElement(
                case,
                "failure",
                message=_attr(f"score {item.score:.3f}{bar}"),
                type="below pass mark",
            )
            failure.text = _text(item.reason or "")
        elif item.reason:
            ET.SubElement(case, "system-out").text = _text(item.reason)
    total = [0, 0, 0, 0]
    for key, suite in by_metric.items():
        tests, failures, errors, skipped = counts[key]
        summary = run.summaries.get(key)
        seconds = summary.seconds if summary is not None else 0.0
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
        suite.set("time", f"{seconds:.3f}")
        total = [t + c for t, c in zip(total, counts[key], strict=True)]
    suites.set("tests", str(total[_TESTS]))
    suites.set("failures", str(total[_FAILURES]))
    suites.set("errors", str(total[_ERRORS]))
    suites.set("skipped", str(total[_SKIPPED]))
    suites.set("time", f"{run.duration_s:.3f}")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")


def write_junit(run: EvalRun, path: str | Path) -> Path:
    """Write :func:`junit_xml` of ``run`` to ``path`` (whole, its secrets masked) and
    return it."""
    target = Path(path)
    make_folder(target.parent)
    return write_text(target, junit_xml(run) + "\n")
