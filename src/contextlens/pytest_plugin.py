"""pytest integration: ``assert_context`` in tests, and an HTML report of the session.

Registered through the ``pytest11`` entry point ``contextlens`` (so it loads by itself once
contextlens is installed); where the entry point is not installed, load it with
``pytest -p contextlens.pytest_plugin`` (not both: pytest refuses one module under two names).
In a test::

    from contextlens.pytest_plugin import assert_context

    def test_answer_uses_the_context():
        case = ModelTestCase(input=..., actual_output=..., expected_output=...,
                             retrieval_context=[...])
        assert_context(case, [ContextPrecision()], thresholds={"context-precision": 0.6})

A failed ``assert_context`` shows the test's line and the message, no frames of contextlens
or asyncio. When the session called ``assert_context``, a table of its metrics (mean,
interval, pass rate, items, failures) ends the terminal summary; ``--contextlens-report=PATH``
also writes one HTML page (see :mod:`contextlens.report`) with every item scored by
``assert_context`` during the session. The plugin loads at every pytest start, so it imports
the engine only when ``assert_context`` is first called.

Under pytest-xdist (``-n N``) each worker hands what it collected to the controller, which
merges every worker's items into the one table and the one report it writes; the workers
write nothing.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from contextlens.engine.accounting import Counts
    from contextlens.metrics.metric import Metric
    from contextlens.results import EvalRun, ItemResult, MetricSummary
    from contextlens.schemas import MetricKey

__all__ = ["aassert_context", "assert_context", "collected_run"]

_OPTION = "--contextlens-report"


@dataclass
class _Collector:
    """Item results of every ``assert_context`` call of one pytest session."""

    started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    t0: float = field(default_factory=time.perf_counter)
    items: list[ItemResult] = field(default_factory=list)
    accounting: dict[str, Counts] = field(default_factory=dict)
    judges: list[str] = field(default_factory=list)
    embedders: list[str] = field(default_factory=list)
    calls_per_test: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    seconds: float = 0.0
    """The wall time of the ``assert_context`` calls, added up (they run one after another)."""
    metric_seconds: dict[str, float] = field(default_factory=dict)
    metric_judges: dict[str, str] = field(default_factory=dict)
    metric_marks: dict[str, set[float | None]] = field(default_factory=dict)
    """The thresholds each metric was held to over the session."""
    lost: list[str] = field(default_factory=list)
    """pytest-xdist workers that went down without handing over what they collected."""

    def case_prefix(self) -> str:
        """The current test's node id (``#2`` on its second call), or ``case``."""
        current = os.environ.get("PYTEST_CURRENT_TEST", "")
        node = current.rsplit(" (", 1)[0] if current else "case"
        count = self.calls_per_test.get(node, 0) + 1
        self.calls_per_test[node] = count
        return node if count == 1 else f"{node}#{count}"

    def add(
        self,
        run: EvalRun,
        items: Sequence[ItemResult],
        marks: Mapping[MetricKey, float | None] | None = None,
    ) -> None:
        """One ``assert_context`` call: its run, its items, the threshold of each metric."""
        from contextlens.engine.accounting import Counts

        self.items.extend(items)
        for key, mark in (marks or {}).items():
            self.metric_marks.setdefault(key, set()).add(mark)
        self.calls += 1
        self.seconds += run.duration_s
        for name, summary in run.summaries.items():
            if summary.accounting is not None:
                self.accounting[name] = self.accounting.get(name, Counts()) + summary.accounting
            self.metric_seconds[name] = self.metric_seconds.get(name, 0.0) + summary.seconds
            if summary.judge is not None:
                self.metric_judges.setdefault(name, summary.judge)
        for seen, value in ((self.judges, run.judge), (self.embedders, run.embedder)):
            if value not in seen:
                seen.append(value)

    def export(self) -> dict[str, Any]:
        """What this collector holds, as plain JSON data (what a pytest-xdist worker sends)."""
        data = {
            "started": self.started.isoformat(),
            "items": [item.model_dump(mode="json") for item in self.items],
            "accounting": {k: v.model_dump(mode="json") for k, v in self.accounting.items()},
            "judges": self.judges,
            "embedders": self.embedders,
            "calls": self.calls,
            "seconds": self.seconds,
            "metric_seconds": self.metric_seconds,
            "metric_judges": self.metric_judges,
            "metric_marks": {k: sorted(v, key=str) for k, v in self.metric_marks.items()},
        }
        plain: dict[str, Any] = json.loads(json.dumps(data))  # str, not str subclasses
        return plain

    def merge(self, data: Mapping[str, Any]) -> None:
        """Add what another collector exported (a pytest-xdist worker's share)."""
        from contextlens.engine.accounting import Counts
        from contextlens.results import ItemResult
        from contextlens.schemas import MetricKey

        self.started = min(self.started, datetime.fromisoformat(data["started"]))
        self.items.extend(ItemResult.model_validate(item) for item in data["items"])
        for key, counts in data["accounting"].items():
            name = MetricKey(key)
            self.accounting[name] = self.accounting.get(name, Counts()) + Counts(**counts)
        for seen, values in ((self.judges, data["judges"]), (self.embedders, data["embedders"])):
            seen.extend(v for v in values if v not in seen)
        self.calls += data["calls"]
        self.seconds += data["seconds"]
        for key, seconds in data["metric_seconds"].items():
            name = MetricKey(key)
            self.metric_seconds[name] = self.metric_seconds.get(name, 0.0) + seconds
        for key, judge in data["metric_judges"].items():
            self.metric_judges.setdefault(MetricKey(key), judge)
        for key, marks in data["metric_marks"].items():
            self.metric_marks.setdefault(MetricKey(key), set()).update(marks)


_collectors: list[_Collector] = []
"""One per configured pytest session (a stack: pytester runs sessions inside sessions)."""


def _current() -> _Collector | None:
    return _collectors[-1] if _collectors else None


# --------------------------------------------------------------------------- assertions


def _thresholds(
    keys: Sequence[MetricKey], thresholds: Mapping[str, float] | None
) -> tuple[dict[MetricKey, float], list[str]]:
    """``thresholds`` by the metric key each names (any name of the metric), and the
    problems: a name that is none of ``keys``, a value outside [0, 1]."""
    from contextlens.errors import ContextLensError
    from contextlens.metrics.registry import match
    from contextlens.runner.gates import parse_value

    found: dict[MetricKey, float] = {}
    problems: list[str] = []
    for name, value in (thresholds or {}).items():
        try:
            key = match(name, keys, what="thresholds")
            found[key] = parse_value(str(value), option="thresholds", item=f"{name}={value}")
        except (ContextLensError, ValueError) as exc:
            problems.append(str(exc))
    return found, problems


def _given_threshold(given: Any, metric: Metric[Any]) -> float | None:
    """The pass mark a test holds a metric to: the threshold of the object given (a seed
    shell carries its own, as DeepEval's do), else the metric's."""
    own = getattr(given, "threshold", None)
    if isinstance(own, (int, float)) and not isinstance(own, bool):
        return float(own)
    return metric.threshold


def _judged(
    run: EvalRun, metrics: Sequence[Any], thresholds: Mapping[str, float] | None, case: Any
) -> tuple[list[ItemResult], list[str], dict[MetricKey, float | None]]:
    """The items with ``success`` set against each threshold, the problems found, and the
    threshold each metric was held to."""
    from contextlens.metrics.registry import key_of
    from contextlens.runner import as_metric

    by_metric = {item.metric: item for item in run.iter_results()}
    items: list[ItemResult] = []
    keyed = [(given, key_of(as_metric(given))) for given in metrics]
    named, problems = _thresholds([k for _, k in keyed], thresholds)
    marks: dict[MetricKey, float | None] = {}
    for given, key in keyed:
        metric = as_metric(given)
        item = by_metric.get(key)
        if item is None:
            problems.append(
                f"{key}: does not apply to a {type(case).__name__} "
                f"(it takes a {getattr(metric.case_type, '__name__', metric.case_type)})"
            )
            continue
        threshold = marks[key] = named.get(key, _given_threshold(given, metric))
        if item.failed:
            problems.append(f"{key}: failed (no score): {item.error}")
        elif threshold is not None and item.score is not None:
            passed = item.score >= threshold
            item = item.model_copy(update={"success": passed})
            if not passed:
                problems.append(
                    f"{key}: score {item.score:.3f} is below the threshold "
                    f"{threshold:.3f}\n    reason: {item.reason or '(none given)'}"
                )
        elif item.success is False:
            problems.append(
                f"{key}: score {item.score:.3f} marked unsuccessful by the metric"
                f"\n    reason: {item.reason or '(none given)'}"
            )
        items.append(item)
    return items, problems, marks


def case_label(prefix: str, name: str | None) -> str:
    """The id of a case in the session: the test's node id (``prefix``), then the case's own
    name in brackets unless the test's parameters already say it (``test_x[de-urlaub]`` for
    the session ``de-urlaub``, not ``test_x[de-urlaub] [de-urlaub]``)."""
    if not name:
        return prefix
    test = prefix.rsplit("::", 1)[-1].split("#", 1)[0]
    if test.endswith("]") and "[" in test:
        params = test[test.index("[") + 1 : -1]
        if f"-{name}-" in f"-{params}-":  # pytest joins the parameters' ids with "-"
            return prefix
    return f"{prefix} [{name}]"


def _prepare(metrics: Sequence[Any], test_case: Any) -> tuple[list[Any], str]:
    """The metrics as given (a registered name made its metric) and the case's id."""
    from contextlens.runner import as_metric

    if not metrics:
        raise ValueError("assert_context needs at least one metric")
    given = [as_metric(m) if isinstance(m, str) else m for m in metrics]
    collector = _current()
    prefix = collector.case_prefix() if collector else "case"
    name = getattr(test_case, "session_id", None) or getattr(test_case, "name", None)
    return given, case_label(prefix, None if name is None else str(name))


async def _evaluated(test_case: Any, metrics: Sequence[Any], **options: Any) -> EvalRun:
    from contextlens.runner import aevaluate

    return await aevaluate([test_case], metrics, progress=False, **options)


def _finish(
    run: EvalRun,
    test_case: Any,
    metrics: Sequence[Any],
    thresholds: Mapping[str, float] | None,
    case_id: str,
) -> list[ItemResult]:
    __tracebackhide__ = True
    items, problems, marks = _judged(run, metrics, thresholds, test_case)
    items = [item.model_copy(update={"case_id": case_id}) for item in items]
    collector = _current()
    if collector is not None:
        collector.add(run, items, marks)
    if problems:
        raise AssertionError(
            f"contextlens: {len(problems)} of {len(metrics)} metric(s) not met for {case_id}:\n  "
            + "\n  ".join(problems)
        )
    return items


def assert_context(
    test_case: Any,
    metrics: Sequence[Any],
    judge: Any = None,
    *,
    thresholds: Mapping[str, float] | None = None,
    embedder: Any = None,
    cache: Any = True,
) -> list[ItemResult]:
    """Evaluate one case (a ``ModelTestCase`` or a ``Dataset`` session) with ``metrics`` and
    fail the test when any metric failed or scored below its threshold.

    ``metrics`` are registered names (``"context-precision"``), metric objects or the seed
    metric classes. The threshold of a metric is ``thresholds[name]`` (the metric's key, or
    any of its names), else its own ``threshold``; a name that is none of ``metrics`` fails
    the test; a metric with none fails only when its result failed or
    says ``success=False``. ``judge``, ``embedder`` and ``cache`` go to
    :func:`contextlens.runner.aevaluate`. Returns the item results (``success`` set against
    the thresholds); they are also collected for ``--contextlens-report``.
    """
    __tracebackhide__ = True
    from contextlens.sync import run_sync

    given, case_id = _prepare(metrics, test_case)
    run = run_sync(_evaluated(test_case, given, judge=judge, embedder=embedder, cache=cache))
    return _finish(run, test_case, given, thresholds, case_id)  # raised here, not in a loop


async def aassert_context(
    test_case: Any,
    metrics: Sequence[Any],
    judge: Any = None,
    *,
    thresholds: Mapping[str, float] | None = None,
    embedder: Any = None,
    cache: Any = True,
) -> list[ItemResult]:
    """:func:`assert_context` for async tests."""
    __tracebackhide__ = True
    given, case_id = _prepare(metrics, test_case)
    run = await _evaluated(test_case, given, judge=judge, embedder=embedder, cache=cache)
    return _finish(run, test_case, given, thresholds, case_id)


# --------------------------------------------------------------------------- the session run


def _summary(name: MetricKey, items: Sequence[ItemResult], collector: _Collector) -> MetricSummary:
    """A metric's summary over the session's items, by the run's own aggregate (mean and
    interval, pass rate, failed and not-applicable items), with the calls they took, its
    judge, its wall time over the session's calls, and its threshold when every call held it
    to the same one."""
    from contextlens.engine.accounting import Ledger
    from contextlens.runner.summaries import Tally, summary_of
    from contextlens.stats import BayesianMode

    tally = Tally()
    for index, item in enumerate(items):
        tally.add_item(index, item)
    marks = collector.metric_marks.get(name, set())
    mark = next(iter(marks)) if len(marks) == 1 else None
    summary = summary_of(name, tally, BayesianMode(), Ledger(), pass_mark=mark)
    update = {
        "accounting": collector.accounting.get(name),
        "judge": collector.metric_judges.get(name),
        "seconds": round(collector.metric_seconds.get(name, 0.0), 3),
    }
    return summary.model_copy(update=update)


def collected_run(collector: _Collector | None = None) -> EvalRun | None:
    """The session's collected results as one :class:`EvalRun` (None when nothing ran)."""
    from contextlens.engine.accounting import Counts, LedgerReport
    from contextlens.provenance import current_provenance
    from contextlens.results import EvalRun

    collector = collector or _current()
    if collector is None or not collector.items:
        return None
    names = list(dict.fromkeys(item.metric for item in collector.items))
    summaries = {
        name: _summary(name, [i for i in collector.items if i.metric == name], collector)
        for name in names
    }
    total = sum(collector.accounting.values(), Counts())
    return EvalRun(
        run_id=uuid.uuid4().hex[:12],
        started_at=collector.started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - collector.t0, 3),
        judge=", ".join(collector.judges) or "offline",
        embedder=", ".join(collector.embedders),
        repeats=1,
        summaries=summaries,
        accounting=LedgerReport(total=total, by_metric=dict(collector.accounting)),
        provenance=current_provenance(),
        results=list(collector.items),
    )


# --------------------------------------------------------------------------- hooks


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("contextlens")
    group.addoption(
        _OPTION,
        dest="contextlens_report",
        metavar="PATH",
        default=None,
        help="write an HTML report of every assert_context result of the session to PATH",
    )


def pytest_configure(config: pytest.Config) -> None:
    _collectors.append(_Collector())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _collectors:
        _collectors.pop()


def _report_path(config: pytest.Config) -> Path | None:
    value = config.getoption("contextlens_report", default=None)
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


_XDIST_KEY = "contextlens"
"""Where a pytest-xdist worker's share goes in its ``workeroutput``."""

_run_key = pytest.StashKey["EvalRun | None"]()
_calls_key = pytest.StashKey["tuple[int, float]"]()
_written_key = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist's controller: a worker is done; its share joins the session's."""
    share = getattr(node, "workeroutput", {}).get(_XDIST_KEY)
    collector = _current()
    if collector is None:
        return
    if share is not None:
        collector.merge(share)
    elif error is not None:  # it crashed: what it had scored is gone with it
        collector.lost.append(str(getattr(getattr(node, "gateway", None), "id", None) or node))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    collector = _current()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: its share goes to the controller
        if collector is not None and collector.items:
            workeroutput[_XDIST_KEY] = collector.export()
        return
    run = collected_run(collector)
    session.config.stash[_run_key] = run
    if collector is not None:
        session.config.stash[_calls_key] = (collector.calls, collector.seconds)
    path = _report_path(session.config)
    if path is None or run is None:
        return
    from contextlens.report import write_report

    written = write_report(run, path, title="contextlens · pytest session")
    session.config.stash[_written_key] = written


def session_table(run: EvalRun, calls: int, seconds: float) -> Any:
    """The session's metrics as a table: the run table of ``contextlens run``, over every
    item the session's ``calls`` to ``assert_context`` scored (``seconds``: their wall time,
    added up)."""
    from contextlens.report.format import fmt_seconds
    from contextlens.report.summary_table import summary_table

    said = f"{calls} assert_context call{'' if calls == 1 else 's'}"
    duration = f"{said}, {fmt_seconds(seconds)}"
    return summary_table(run, title=f"contextlens: {said}", duration=duration)


def _rendered(renderable: Any, width: int, color: bool) -> list[str]:
    """``renderable`` as the lines a terminal ``width`` wide shows (styled when ``color``)."""
    from rich.console import Console

    buffer = io.StringIO()
    Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        markup=False,
        highlight=False,
    ).print(renderable)
    return buffer.getvalue().splitlines()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run = config.stash.get(_run_key, None)
    path = _report_path(config)
    collector = _current()
    lost = collector.lost if collector is not None else []
    if run is None and path is None and not lost:
        return
    terminalreporter.write_sep("=", "contextlens")
    if lost:
        terminalreporter.write_line(
            f"contextlens: worker(s) {', '.join(lost)} went down without handing over their "
            "assert_context results: the table and the report lack them"
        )
    if run is not None:
        writer = getattr(terminalreporter, "_tw", None)
        width = getattr(writer, "fullwidth", 80)
        color = bool(getattr(terminalreporter, "hasmarkup", False))
        table = session_table(run, *config.stash.get(_calls_key, (0, 0.0)))
        for row in _rendered(table, width, color):
            terminalreporter.write_line(row)
    if path is None:
        return
    written = config.stash.get(_written_key, None)
    if written is not None:
        terminalreporter.write_line(f"contextlens report: {written}")
    else:
        terminalreporter.write_line("contextlens report: no assert_context results, none written")
