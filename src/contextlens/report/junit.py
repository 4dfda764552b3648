"""A run as a JUnit XML file, the format CI systems read.

By default the file says what gates the run: a ``gates`` suite with one test case per gate
(each ``--fail-under``, each metric's ``--max-failures``, the cost cap), failing exactly when
the run's exit status does (a run that exits 0 has no failure in it), and a suite per metric
with one test case for its summary (mean, interval, pass rate; never failing) and its pass
rate, interval and pass mark as properties. With ``items=True`` each metric's suite also has a
test case per case: failing when its score is below the metric's pass mark, in error when it
could not be scored, skipped when the metric does not apply to the case or the run stopped
before it, each with its reason.

Every text is masked (:func:`contextlens.redact.redact`) before it goes into the XML, never
the file's text, and written as XML 1.0 can hold it: the characters XML forbids (C0 controls
other than tab, line feed and carriage return; lone surrogates; U+FFFE and U+FFFF) and the
control and format characters the terminal shows escaped are written out as ``\x1b``,
``\ud800``, ``\ufffe``; an element's line breaks are kept."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contextlens.files import make_folder, write_text
from contextlens.redact import redact
from contextlens.report.cases import BELOW, FAILED, NOT_APPLICABLE, NOT_RUN, status_of
from contextlens.report.format import items_text, pass_text
from contextlens.results import EvalRun, MetricSummary
from contextlens.runner.gates import GateOutcome, check_run, ordered
from contextlens.terminal import safe

__all__ = ["GATES", "junit_xml", "summary_text", "write_junit"]

#: The name of the suite of the run's gates.
GATES = "gates"

#: A suite's counts: tests, failures, errors, skipped.
_TESTS, _FAILURES, _ERRORS, _SKIPPED = range(4)


#: What XML 1.0 cannot hold and :func:`~contextlens.terminal.safe` leaves: lone surrogates,
#: U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def _written(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _attr(value: Any) -> str:
    """Text XML 1.0 can hold, its secrets masked: control characters, lone surrogates,
    U+FFFE and U+FFFF written out (``\\x1b``, ``\\ufffe``)."""
    return _NOT_XML.sub(_written, safe(value))


def _text(value: Any) -> str:
    """An element's text: as :func:`_attr`, its lines kept."""
    return "\n".join(_attr(part) for part in redact(str(value)).split("\n"))


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


def summary_text(summary: MetricSummary) -> str:
    """One metric's summary as a line: mean and interval, pass rate, items by status."""
    if summary.mean is None:
        mean = "no score"
    elif summary.ci_low is not None and summary.ci_high is not None:
        mean = f"mean {summary.mean:.3f} [{summary.ci_low:.3f}, {summary.ci_high:.3f}]"
    else:
        mean = f"mean {summary.mean:.3f}"
    parts = [mean]
    if summary.pass_rate is not None:
        below = summary.n_scored - summary.n_passed
        parts.append(f"pass {pass_text(summary)}: {summary.n_passed} pass, {below} below")
    parts.append(f"{items_text(summary)} items, {summary.n_failed} failed")
    return "; ".join(parts)


class _Suites:
    """The ``<testsuites>`` being written, with each suite's counts."""

    def __init__(self, run: EvalRun) -> None:
        self.root = ET.Element("testsuites", name=_attr(f"contextlens {run.run_id}"))
        self.suites: dict[str, ET.Element] = {}
        self.counts: dict[str, list[int]] = {}

    def suite(self, name: str, summary: MetricSummary | None = None) -> ET.Element:
        if name not in self.suites:
            self.suites[name] = ET.SubElement(self.root, "testsuite", name=_attr(name))
            self.counts[name] = [0, 0, 0, 0]
            _properties(self.suites[name], summary)
        return self.suites[name]

    def case(self, suite: str, classname: str, name: str) -> ET.Element:
        self.counts[suite][_TESTS] += 1
        return ET.SubElement(
            self.suites[suite], "testcase", classname=_attr(classname), name=_attr(name), time="0"
        )

    def count(self, suite: str, which: int) -> None:
        self.counts[suite][which] += 1

    def finish(self, run: EvalRun) -> str:
        total = [0, 0, 0, 0]
        for name, suite in self.suites.items():
            tests, failures, errors, skipped = self.counts[name]
            summary = run.summaries.get(name) if name != GATES else None
            seconds = summary.seconds if summary is not None else 0.0
            suite.set("tests", str(tests))
            suite.set("failures", str(failures))
            suite.set("errors", str(errors))
            suite.set("skipped", str(skipped))
            suite.set("time", f"{seconds:.3f}")
            total = [t + c for t, c in zip(total, self.counts[name], strict=True)]
        for key, index in (("tests", _TESTS), ("failures", _FAILURES), ("errors", _ERRORS)):
            self.root.set(key, str(total[index]))
        self.root.set("skipped", str(total[_SKIPPED]))
        self.root.set("time", f"{run.duration_s:.3f}")
        ET.indent(self.root)
        body = ET.tostring(self.root, encoding="unicode")
        return '<?xml version="1.0" encoding="utf-8"?>\n' + body


def _gate_cases(suites: _Suites, outcomes: Sequence[GateOutcome]) -> None:
    """A test case per gate: failing when missed, skipped when not checked."""
    suites.suite(GATES)
    for outcome in outcomes:
        case = suites.case(GATES, "contextlens.gates", outcome.name)
        detail = f"{outcome.found}; the gate asks {outcome.mark}"
        if outcome.status == "missed":
            suites.count(GATES, _FAILURES)
            failure = ET.SubElement(
                case, "failure", message=_attr(outcome.said), type=_attr(f"{outcome.kind} missed")
            )
            failure.text = _text(detail)
        elif outcome.status == "not checked":
            suites.count(GATES, _SKIPPED)
            ET.SubElement(case, "skipped", message=_attr(outcome.said))
        else:
            ET.SubElement(case, "system-out").text = _text(f"met: {outcome.said}")


def _item_cases(suites: _Suites, run: EvalRun) -> None:
    """A test case per case and metric, in the metric's suite."""
    for item in run.iter_results():
        key = item.metric
        suites.suite(key, run.summaries.get(key))
        case = suites.case(key, f"contextlens.{key}", item.case_id)
        status = status_of(item)
        if status == FAILED:
            suites.count(key, _ERRORS)
            error = ET.SubElement(
                case, "error", message=_attr(f"not scored: {item.error}"), type="not scored"
            )
            error.text = _text(item.details.raw_reply or item.error or "")
        elif status in (NOT_APPLICABLE, NOT_RUN):
            suites.count(key, _SKIPPED)
            why = item.not_applicable or item.not_run or status  # "not run: the cost cap ..."
            ET.SubElement(case, "skipped", message=_attr(why))
        elif status == BELOW:
            suites.count(key, _FAILURES)
            summary = run.summaries.get(key)
            mark = summary.threshold if summary is not None else None
            if mark is not None and item.score is not None:
                score, bar = ordered(item.score, mark, below=True)
                message = f"score {score} < pass mark {bar}"
            else:
                message = "below the pass mark"
            failure = ET.SubElement(case, "failure", message=_attr(message), type="below pass mark")
            failure.text = _text(item.reason or "")
        elif item.reason:
            ET.SubElement(case, "system-out").text = _text(item.reason)


def junit_xml(
    run: EvalRun, outcomes: Sequence[GateOutcome] | None = None, *, items: bool = False
) -> str:
    """The JUnit XML of ``run``: the ``gates`` suite, then a suite per metric.

    ``outcomes``: the gates the run was held to
    (:func:`~contextlens.runner.gates.check_run`; by default those ``contextlens run``
    holds a run to without options: no failed item, and its cost cap). Each gate is a test
    case, failing (``<failure>``) when missed, skipped when not checked (a run its cost cap
    stopped). Each metric's suite has a test case for its summary, which never fails.
    ``items``: also a test case per case and metric, failing when its score is below the
    pass mark the run set (the summary's ``threshold``), in error (``<error>``) when the
    metric could not score it, skipped (``<skipped>``) when the metric does not apply to it
    or the run stopped before it; the message says why.
    """
    suites = _Suites(run)
    _gate_cases(suites, check_run(run) if outcomes is None else outcomes)
    for key, summary in run.summaries.items():
        suites.suite(key, summary)
        case = suites.case(key, "contextlens.summary", key)
        ET.SubElement(case, "system-out").text = _text(summary_text(summary))
    if items:
        _item_cases(suites, run)
    return suites.finish(run)


def write_junit(
    run: EvalRun,
    path: str | Path,
    outcomes: Sequence[GateOutcome] | None = None,
    *,
    items: bool = False,
) -> Path:
    """Write :func:`junit_xml` of ``run`` to ``path`` (whole; each text in it masked as it
    was put in) and return it."""
    target = Path(path)
    make_folder(target.parent)
    return write_text(target, junit_xml(run, outcomes, items=items) + "\n", mask=False, stream=True)
