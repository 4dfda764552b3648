"""A run as a JUnit XML file, the format CI systems read: one test case per case and
metric, failing when its score is below the metric's pass mark, in error when it could not
be scored, each with its reason."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contextlens.results import EvalRun, pass_marks
from contextlens.terminal import safe

__all__ = ["junit_xml", "write_junit"]


def _attr(value: Any) -> str:
    """Text XML 1.0 can hold: control characters written out (``\\x1b``)."""
    return safe(value)


def junit_xml(run: EvalRun, overrides: Mapping[str, float] | None = None) -> str:
    """The JUnit XML of ``run``: a test suite per metric, a test case per case.

    A case fails (``<failure>``) when its score is below the pass mark (``overrides`` by
    metric name, else the metric's own, see :func:`~contextlens.results.pass_marks`), and is
    in error (``<error>``) when the metric could not score it; the message says why.
    """
    marks = pass_marks(run, overrides)
    suites = ET.Element("testsuites", name=f"contextlens {run.run_id}")
    by_metric: dict[str, ET.Element] = {}
    counts: dict[str, list[int]] = {}
    for key in run.summaries:
        by_metric[key] = ET.SubElement(suites, "testsuite", name=_attr(key))
        counts[key] = [0, 0, 0]
    for item in run.iter_results():
        key = item.metric
        if key not in by_metric:
            by_metric[key] = ET.SubElement(suites, "testsuite", name=_attr(key))
            counts[key] = [0, 0, 0]
        mark = marks.mark(key)
        case = ET.SubElement(
            by_metric[key],
            "testcase",
            classname=_attr(f"contextlens.{key}"),
            name=_attr(item.case_id),
            time="0",
        )
        counts[key][0] += 1
        verdict = marks.passes(item)
        if verdict is None:
            counts[key][2] += 1
            error = ET.SubElement(
                case, "error", message=_attr(f"not scored: {item.error}"), type="not scored"
            )
            error.text = _attr(item.details.raw_reply or item.error or "")
        elif not verdict:
            counts[key][1] += 1
            failure = ET.SubElement(
                case,
                "failure",
                message=_attr(f"score {item.score:.3f} < pass mark {mark:g}"),
                type="below pass mark",
            )
            failure.text = _attr(item.reason or "")
        elif item.reason:
            ET.SubElement(case, "system-out").text = _attr(item.reason)
    total = [0, 0, 0]
    for key, suite in by_metric.items():
        tests, failures, errors = counts[key]
        summary = run.summaries.get(key)
        seconds = summary.seconds if summary is not None else 0.0
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", "0")
        suite.set("time", f"{seconds:.3f}")
        total = [t + c for t, c in zip(total, counts[key], strict=True)]
    suites.set("tests", str(total[0]))
    suites.set("failures", str(total[1]))
    suites.set("errors", str(total[2]))
    suites.set("time", f"{run.duration_s:.3f}")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")


def write_junit(
    run: EvalRun, path: str | Path, overrides: Mapping[str, float] | None = None
) -> Path:
    """Write :func:`junit_xml` of ``run`` to ``path`` and return it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(junit_xml(run, overrides) + "\n", encoding="utf-8")
    return target
