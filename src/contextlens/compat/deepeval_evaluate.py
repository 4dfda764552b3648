"""DeepEval's ``evaluate`` and ``assert_test``, with its config objects and result shapes,
over contextlens's runner."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from contextlens.compat.deepeval_metric import EMPTY_CONTEXT, ContextualRelevancyMetric, passes
from contextlens.errors import InputError, MetricComputationError
from contextlens.metrics.metric import Metric
from contextlens.metrics.registry import key_of
from contextlens.results import EvalRun, ItemResult
from contextlens.runner import aevaluate, as_case, as_metric, case_id
from contextlens.schemas import MetricKey, ModelTestCase
from contextlens.sync import run_sync

__all__ = [
    "AsyncConfig",
    "CacheConfig",
    "DisplayConfig",
    "ErrorConfig",
    "EvaluationResult",
    "MetricData",
    "TestResult",
    "assert_test",
    "evaluate",
]

# --- DeepEval's evaluate and assert_test ----------------------------------------------------


@dataclass
class AsyncConfig:
    """DeepEval's ``AsyncConfig``: ``max_concurrent`` bounds the judge calls in flight (the
    run's ``max_concurrency``); both ``run_async`` values run the same async engine, whose
    limiter and retries stand for ``throttle_value``."""

    run_async: bool = True
    throttle_value: float = 0
    max_concurrent: int = 20

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {self.max_concurrent}")
        if self.throttle_value < 0:
            raise ValueError(f"throttle_value must be at least 0, got {self.throttle_value}")


@dataclass
class DisplayConfig:
    """DeepEval's ``DisplayConfig``: ``show_indicator`` is the progress bar on stderr,
    ``print_results`` the report of every test case and each metric's pass rate on stdout."""

    show_indicator: bool = True
    print_results: bool = True


@dataclass
class CacheConfig:
    """DeepEval's ``CacheConfig``. contextlens caches judge replies (not results): with
    neither ``write_cache`` nor ``use_cache`` the run has no cache, else it has the default
    one."""

    write_cache: bool = True
    use_cache: bool = False


@dataclass
class ErrorConfig:
    """DeepEval's ``ErrorConfig``: with ``ignore_errors`` a metric that could not score a
    test case is reported with its ``error`` and ``success=False`` instead of raising."""

    ignore_errors: bool = False


class MetricData(BaseModel):
    """One metric's result on one test case (DeepEval's ``MetricData``)."""

    name: str
    threshold: float | None = None
    success: bool | None = None
    score: float | None = None
    reason: str | None = None
    strict_mode: bool = False
    flaky: bool = False
    evaluation_model: str | None = None
    error: str | None = None
    evaluation_cost: float | None = None
    verbose_logs: str | None = None


@dataclass
class TestResult:
    """One test case's results (DeepEval's ``TestResult``). ``success`` is decided by the
    metrics that are not flaky: False when one of them failed, None when none gave a
    verdict."""

    __test__ = False  # not a pytest test class

    name: str
    success: bool | None
    metrics_data: list[MetricData]
    conversational: bool = False
    index: int | None = None
    multimodal: bool | None = None
    input: str | None = None
    actual_output: str | None = None
    expected_output: str | None = None
    context: list[str] | None = None
    retrieval_context: list[str] | None = None
    metadata: dict[str, Any] | None = None


class EvaluationResult(BaseModel):
    """What :func:`evaluate` returns (DeepEval's shape); ``run`` is the contextlens run
    behind it (summaries, accounting, the report)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    test_results: list[TestResult]
    confident_link: str | None = None
    test_run_id: str | None = None
    run: EvalRun | None = Field(default=None, exclude=True, repr=False)


def _shown_name(metric: Any, key: MetricKey) -> str:
    name = getattr(metric, "__name__", None)
    return name if isinstance(name, str) and not isinstance(metric, type) else str(key)


def _threshold_of(metric: Any, core: Metric[Any]) -> float | None:
    """A DeepEval-style metric's own ``threshold`` (None: score-only), else the pass mark a
    run holds the metric to."""
    if isinstance(metric, ContextualRelevancyMetric):
        return metric.threshold
    return core.pass_mark()


def _metric_data(metric: Any, core: Metric[Any], item: ItemResult | None) -> MetricData:
    key = key_of(core)
    data = MetricData(
        name=_shown_name(metric, key),
        threshold=_threshold_of(metric, core),
        strict_mode=bool(getattr(metric, "strict_mode", False)),
        flaky=bool(getattr(metric, "flaky", False)),
    )
    if item is None:
        return data.model_copy(update={"reason": f"{key} does not score this kind of case"})
    score, reason, error = item.score, item.reason, item.error
    if item.not_run is not None:
        error = item.not_run
    elif item.not_applicable is not None:
        if isinstance(metric, ContextualRelevancyMetric):  # DeepEval scores no chunks 0
            score, reason = 0.0, EMPTY_CONTEXT
        else:
            update = {"reason": item.not_applicable, "evaluation_model": item.judge}
            return data.model_copy(update=update)
    return data.model_copy(
        update={
            "score": score,
            "reason": reason,
            "error": error,
            "success": passes(score, data.threshold, error),
            "evaluation_model": item.judge,
        }
    )


def _test_success(metrics_data: Sequence[MetricData]) -> bool | None:
    """DeepEval's rule: the first verdict of a metric that is not flaky, then False as soon
    as one of them fails."""
    success: bool | None = None
    for data in metrics_data:
        if data.flaky:
            continue
        if success is None:
            success = data.success
        elif data.success is False:
            success = False
    return success


def _run_options(
    async_config: Any,
    display_config: Any,
    cache_config: Any,
    identifier: str | None,
    hyperparameters: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """DeepEval's settings as run options (read by attribute: DeepEval's own config objects
    work too)."""
    options: dict[str, Any] = {}
    if async_config is not None:
        options["max_concurrency"] = int(async_config.max_concurrent)
    if display_config is not None:
        options["progress"] = bool(display_config.show_indicator)
    if cache_config is not None and not (cache_config.write_cache or cache_config.use_cache):
        options["cache"] = False
    if identifier is not None:
        options["name"] = identifier
    if hyperparameters:
        options["tags"] = {str(k): str(v) for k, v in hyperparameters.items()}
    return options


def _report(result: EvaluationResult) -> None:
    """The results of every test case, then each metric's pass rate, on stdout."""
    rule = "=" * 70
    lines: list[str] = []
    rates: dict[str, list[bool | None]] = {}
    for test in result.test_results:
        lines += [rule, f"Test case {test.name}: " + _verdict_word(test.success), ""]
        for data in test.metrics_data:
            rates.setdefault(data.name, []).append(data.success)
            lines.append(
                f"  - {_verdict_word(data.success)} {data.name} (score: {data.score}, "
                f"threshold: {data.threshold}, strict: {data.strict_mode}, "
                f"evaluation model: {data.evaluation_model}, reason: {data.reason}, "
                f"error: {data.error})" + (" [flaky]" if data.flaky else "")
            )
        lines += ["", f"  input: {test.input}", f"  retrieval context: {test.retrieval_context}"]
    lines += [rule, "", "Overall Metric Pass Rates", ""]
    for name, verdicts in rates.items():
        judged = [v for v in verdicts if v is not None]
        rate = f"{100 * sum(judged) / len(judged):.2f}% pass rate" if judged else "no threshold"
        lines.append(f"{name}: {rate}")
    print("\n".join([*lines, rule]), flush=True)


def _verdict_word(success: bool | None) -> str:
    return {True: "PASSED", False: "FAILED", None: "SCORED"}[success]


async def _aevaluate(
    test_cases: Iterable[Any],
    metrics: Sequence[Any] | None,
    *,
    ignore_errors: bool,
    print_results: bool,
    options: dict[str, Any],
) -> EvaluationResult:
    given = list(metrics or [])
    if not given:
        raise ValueError("metrics: give at least one metric")
    cases = [as_case(raw, i) for i, raw in enumerate(test_cases)]
    if not cases:
        raise ValueError("test_cases: give at least one test case")
    cores = [as_metric(m) for m in given]
    if not any(
        _threshold_of(m, core) is not None and not getattr(m, "flaky", False)
        for m, core in zip(given, cores, strict=True)
    ):
        raise ValueError(
            "You must provide at least one non-flaky metric with a 'threshold', otherwise "
            "test cases can never pass or fail."
        )
    run = await aevaluate(cases, given, **{"keep_results": True, **options})
    items = {(item.case_id, item.metric): item for item in run.results}
    results: list[TestResult] = []
    for i, case in enumerate(cases):
        ident = case_id(case, i)
        found = [
            (m, core, items.get((ident, key_of(core))))
            for m, core in zip(given, cores, strict=True)
        ]
        if not ignore_errors:
            for m, core, item in found:
                if item is not None and item.failed:
                    if isinstance(item.exception, InputError):
                        raise item.exception
                    name = _shown_name(m, key_of(core))
                    raise MetricComputationError(f"{name}: {ident}: {item.error}") from (
                        item.exception
                    )
        data = [_metric_data(m, core, item) for m, core, item in found]
        assert isinstance(case, ModelTestCase)
        results.append(
            TestResult(
                name=case.name or f"test_case_{i}",
                success=_test_success(data),
                metrics_data=data,
                index=i,
                multimodal=case.multimodal,
                input=case.input,
                actual_output=case.actual_output,
                expected_output=case.expected_output,
                context=case.context,
                retrieval_context=case.retrieval_context,
                metadata=case.meta or None,
            )
        )
    result = EvaluationResult(test_results=results, test_run_id=run.run_id, run=run)
    if print_results:
        _report(result)
    return result


def evaluate(
    test_cases: Iterable[Any],
    metrics: Sequence[Any] | None = None,
    *,
    identifier: str | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    async_config: Any = None,
    display_config: Any = None,
    cache_config: Any = None,
    error_config: Any = None,
    **options: Any,
) -> EvaluationResult:
    """DeepEval's ``evaluate(test_cases=[...], metrics=[...])`` on contextlens's engine.

    ``test_cases`` are ``LLMTestCase`` / ``ModelTestCase`` objects (or dicts); ``metrics``
    are DeepEval-style metrics (:class:`ContextualRelevancyMetric`) or any metric
    :func:`contextlens.evaluate` takes. At least one metric that is not flaky needs a
    threshold, as DeepEval requires. Each metric's ``success`` follows its threshold as it
    is when the run starts (None in score-only mode); a test case fails when a metric that
    is not flaky fails. A metric that cannot score a test case raises
    :class:`~contextlens.errors.MetricComputationError` (an ``InputError`` for a missing
    field) unless ``error_config`` ignores errors. ``identifier`` names the run,
    ``hyperparameters`` are its tags; ``async_config``, ``display_config``,
    ``cache_config`` and ``error_config`` are DeepEval's (or this module's) config objects.
    Other keyword arguments are :func:`contextlens.evaluate`'s run options (``judge``,
    ``out``, ``repeats`` ...). The metric objects are left as they were. Works inside a
    running event loop too.
    """
    if getattr(error_config, "skip_on_missing_params", False):
        raise ValueError(
            "error_config: skip_on_missing_params is not supported: a test case that lacks a "
            "field a metric requires is refused before the run, naming the field"
        )
    run_options = {
        **_run_options(async_config, display_config, cache_config, identifier, hyperparameters),
        **options,
    }
    return run_sync(
        _aevaluate(
            test_cases,
            metrics,
            ignore_errors=bool(getattr(error_config, "ignore_errors", False)),
            print_results=bool(getattr(display_config, "print_results", True)),
            options=run_options,
        )
    )


def assert_test(
    test_case: Any = None,
    metrics: Sequence[Any] | None = None,
    golden: Any = None,
    run_async: bool = True,
) -> None:
    """DeepEval's ``assert_test``: fail the test (``AssertionError``) when a metric that is
    not flaky fails on ``test_case``, listing every metric that failed with its score,
    threshold and reason. A failing test case marked ``flaky=True`` warns instead. A metric
    that cannot score the case raises its error. ``run_async`` is accepted; ``golden``
    (DeepEval's trace-scoped form) is not supported.
    """
    __tracebackhide__ = True
    del run_async  # both modes run the same async engine
    if test_case is None:
        raise TypeError(
            "assert_test needs test_case=: the trace-scoped form with golden= only is not supported"
            if golden is not None
            else "assert_test needs test_case="
        )
    result = run_sync(
        _aevaluate(
            [test_case],
            metrics,
            ignore_errors=False,
            print_results=False,
            options={"progress": False},
        )
    )
    [test] = result.test_results
    if test.success is not False:
        return
    failed = ", ".join(
        f"{d.name} (score: {d.score}, threshold: {d.threshold}, strict: {d.strict_mode}, "
        f"error: {d.error}, reason: {d.reason})"
        for d in test.metrics_data
        if d.error is not None or not d.success
    )
    message = f"Metrics: {failed} failed."
    if bool(getattr(test_case, "flaky", False)):
        warnings.warn(f"Flaky test case failed (no assertion raised): {message}", stacklevel=2)
        return
    raise AssertionError(message)
