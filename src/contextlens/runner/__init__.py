"""Running an evaluation: ``evaluate`` and its parts.

- :mod:`~contextlens.runner.config`: :class:`RunConfig`, every setting of a run, once.
- :mod:`~contextlens.runner.binding`: the run's metrics with their keys and services.
- :mod:`~contextlens.runner.checks`: what a case must meet before it is scored; its id.
- :mod:`~contextlens.runner.evaluate`: ``evaluate`` / ``aevaluate``, one async code path.
- :mod:`~contextlens.runner.loop`: the run loop ``aevaluate`` builds: cases in flight, results
  written as they come.
- :mod:`~contextlens.runner.summaries`: items folded into summaries; the :class:`EvalRun`.
- :mod:`~contextlens.runner.folder`: the run's folder, ``latest``, ``results.jsonl``.
- :mod:`~contextlens.runner.gates`: pass marks checked against a run, named before it runs.
- :mod:`~contextlens.runner.executor`: running elsewhere (``executor="ray"``).

These are the seams an executor builds on (the Ray executor uses nothing else).
"""

from contextlens.results import EvalRun, ItemResult, MetricSummary
from contextlens.runner.binding import BoundMetric, as_metric, bind_metrics, checked_metrics
from contextlens.runner.checks import Case, CaseChecks, as_case, case_id
from contextlens.runner.config import ProgressCallback, RunConfig, RunOptions
from contextlens.runner.evaluate import (
    OFFLINE_CASES_IN_FLIGHT,
    aevaluate,
    cases_in_flight,
    evaluate,
)
from contextlens.runner.executor import EXECUTORS, Executor, resolve_executor
from contextlens.runner.folder import LATEST, ResultSink, RunFolder, latest_run, new_run_id
from contextlens.runner.gates import Gate, parse_gates, parse_pass_marks
from contextlens.runner.loop import score_item
from contextlens.runner.progress import ProgressBar, progress_bar
from contextlens.runner.summaries import Tally, finish_run, summary_of

__all__ = [
    "EXECUTORS",
    "LATEST",
    "OFFLINE_CASES_IN_FLIGHT",
    "BoundMetric",
    "Case",
    "CaseChecks",
    "EvalRun",
    "Executor",
    "Gate",
    "ItemResult",
    "MetricSummary",
    "ProgressBar",
    "ProgressCallback",
    "ResultSink",
    "RunConfig",
    "RunFolder",
    "RunOptions",
    "Tally",
    "aevaluate",
    "as_case",
    "as_metric",
    "bind_metrics",
    "case_id",
    "cases_in_flight",
    "checked_metrics",
    "evaluate",
    "finish_run",
    "latest_run",
    "new_run_id",
    "parse_gates",
    "parse_pass_marks",
    "progress_bar",
    "resolve_executor",
    "score_item",
    "summary_of",
]
