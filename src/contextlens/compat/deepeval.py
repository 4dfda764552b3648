"""DeepEval's (and agensight's) ``ContextualRelevancyMetric``.

    metric = ContextualRelevancyMetric(threshold=0.7, model="gpt-4o-mini")
    metric.measure(ModelTestCase(input=..., actual_output=..., retrieval_context=[...]))
    metric.score, metric.reason, metric.success, metric.verdicts_list

    evaluate(test_cases=[...], metrics=[metric])   # DeepEval's evaluate and assert_test

A thin shell over :class:`~contextlens.metrics.contextual_relevancy.ContextualRelevancyScorer`,
run through :func:`~contextlens.runner.aevaluate`. ``measure`` sets the last result on the
object, as DeepEval does; nothing else about the object changes. ``LLMTestCase`` is
DeepEval's name of :class:`~contextlens.schemas.ModelTestCase`; :class:`DeepEvalBaseLLM` the
base class of a custom judge model.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from contextlens.compat.deepeval_template import ContextualRelevancyTemplate, relevancy_prompt
from contextlens.compat.models import DeepEvalBaseLLM
from contextlens.compat.shell import Scored, judge_label, say, score_one
from contextlens.errors import InputError, MetricComputationError
from contextlens.judges.errors import user_errors
from contextlens.judges.resolve import as_backend
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    DEFAULT_PASS,
)
from contextlens.metrics.contextual_relevancy import (
    ContextualRelevancyScorer,
    RelevancyDetails,
    StatementVerdict,
)
from contextlens.metrics.metric import Metric
from contextlens.metrics.registry import key_of
from contextlens.results import EvalRun, ItemResult
from contextlens.runner import aevaluate, as_case, as_metric, case_id
from contextlens.schemas import LLMTestCase, MetricKey, MetricResult, ModelTestCase
from contextlens.sync import run_sync

__all__ = [
    "AsyncConfig",
    "CacheConfig",
    "ContextualRelevancyMetric",
    "ContextualRelevancyTemplate",
    "ContextualRelevancyVerdict",
    "ContextualRelevancyVerdicts",
    "DeepEvalBaseLLM",
    "DisplayConfig",
    "ErrorConfig",
    "EvaluationResult",
    "LLMTestCase",
    "MetricData",
    "ModelTestCase",
    "TestResult",
    "assert_test",
    "evaluate",
]

Verdict = dict[str, Any]
#: DeepEval scores a test case whose retrieval context is empty 0; so does its surface here.
EMPTY_CONTEXT = "The retrieval context is empty: there are no statements to judge."


class ContextualRelevancyVerdict(BaseModel):
    """One statement of a chunk with its verdict (DeepEval's shape)."""

    statement: str
    verdict: str
    reason: str | None = None


class ContextualRelevancyVerdicts(BaseModel):
    """The verdicts of one chunk of ``retrieval_context`` (DeepEval's ``verdicts_list``
    holds one per chunk, in order)."""

    verdicts: list[ContextualRelevancyVerdict]


def _verdicts_list(
    verdicts: list[StatementVerdict], n_chunks: int
) -> list[ContextualRelevancyVerdicts]:
    by_chunk: list[list[ContextualRelevancyVerdict]] = [[] for _ in range(n_chunks)]
    for v in verdicts:
        if 0 <= v.chunk < n_chunks:
            by_chunk[v.chunk].append(
                ContextualRelevancyVerdict(
                    statement=v.statement, verdict=v.verdict, reason=v.reason
                )
            )
    return [ContextualRelevancyVerdicts(verdicts=listed) for listed in by_chunk]


def checked_threshold(value: Any) -> float | None:
    """``value`` as a pass mark: a number in [0, 1], or None (score-only)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"threshold must be a number in [0, 1] or None, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"threshold must be in [0, 1] or None, got {value}")
    return float(value)


def passes(score: float | None, threshold: float | None, error: str | None) -> bool | None:
    """DeepEval's verdict: None without a threshold, False after an error or without a
    score, else ``score >= threshold``."""
    if threshold is None:
        return None
    if error is not None or score is None:
        return False
    return score >= threshold


class ContextualRelevancyMetric:
    """Share of the statements in ``retrieval_context`` that are relevant to ``input``.

    Args:
        threshold: the minimum passing score (1.0 in strict mode); None for DeepEval's
            score-only mode, where ``success`` is None. It may be set after construction.
        model: None for the offline estimate (or the run's judge in
            :func:`contextlens.evaluate`); a custom ``DeepEvalBaseLLM``-shaped model
            (``get_model_name``, ``generate`` / ``a_generate``); a LangChain chat model; a
            :class:`~contextlens.judges.Judge`; a spec string (``"openai:gpt-4o-mini"``,
            ``"http://localhost:11434/v1#llama3.1"``) or a bare OpenAI model name.
        include_reason: ask for and return a reason.
        async_mode: accepted for DeepEval compatibility; both modes run the same async core.
        strict_mode: score 1.0 when every statement is relevant, else 0.0; threshold 1.
        verbose_mode: write the verdicts, score and reason of each ``measure`` to stderr
            (that call only), and keep them in ``verbose_logs``.
        evaluation_template: a DeepEval-style template class or object
            (``generate_verdicts``, ``generate_reason``), an object with ``system`` /
            ``user`` strings, or a callable; see
            :mod:`contextlens.metrics.contextual_relevancy`.
        name: agensight's: the metric's name; other than None it is the label it goes by
            in :func:`contextlens.evaluate` (``contextual-relevancy:NAME``).
        retrieval_context: agensight's: the chunks to judge in place of each test case's
            own ``retrieval_context``.
        flaky: DeepEval's flaky metric: scored and reported as any other, but its verdict
            never decides a test case's (:func:`evaluate`, :func:`assert_test`).
        max_prompt_tokens: the prompt budget of one judge call (characters / 4); a chunk
            too large for a call of its own fails the case with its size, unsent.
        max_embed_tokens: offline, the longest text embedded (characters / 4); a longer
            input or chunk fails the case with its size.
        embedder: the embedder of the offline path (default: the bundled MiniLM).

    ``measure`` / ``a_measure`` set ``score``, ``reason``, ``success``, ``verdicts``,
    ``verdicts_list``, ``evaluation_cost``, ``error`` and ``verbose_logs`` from the last
    call. ``verdicts`` are dicts ``{chunk, statement, verdict, reason}``, ``chunk`` being the
    0-based index in ``retrieval_context``; ``verdicts_list`` is DeepEval's: one
    :class:`ContextualRelevancyVerdicts` per chunk, in order.
    """

    def __init__(
        self,
        threshold: float | None = 0.5,
        model: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        evaluation_template: Any = None,
        name: str | None = None,
        retrieval_context: Sequence[str] | str | None = None,
        *,
        flaky: bool = False,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        embedder: Any = None,
    ) -> None:
        judge = as_backend(model)
        self._template = evaluation_template
        self._core_options: dict[str, Any] = {
            "include_reason": include_reason,
            "strict_mode": strict_mode,
            "prompt": relevancy_prompt(evaluation_template),
            "max_prompt_tokens": max_prompt_tokens,
            "max_embed_tokens": max_embed_tokens,
            "judge": judge,
            "embedder": embedder,
            "label": name,
        }
        self._threshold = 1.0 if strict_mode else checked_threshold(threshold)
        self.metric = self._core()
        self.flaky = flaky
        self._name = name
        self.retrieval_context = (
            [retrieval_context] if isinstance(retrieval_context, str) else retrieval_context
        )
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        self.evaluation_model = judge_label(judge)
        # The last result (set by measure / a_measure only).
        self.result: MetricResult | None = None
        self.score: float | None = None
        self.reason: str | None = None
        self.success: bool | None = None
        self.verdicts: list[Verdict] = []
        self.verdicts_list: list[ContextualRelevancyVerdicts] = []
        self.evaluation_cost: float | None = None
        self.error: str | None = None
        self.verbose_logs: str | None = None

    def _core(self) -> ContextualRelevancyScorer:
        """The metric this shell runs, at its threshold (0.5 in score-only mode, the pass
        mark :func:`contextlens.evaluate` then holds it to)."""
        mark = DEFAULT_PASS if self._threshold is None else self._threshold
        return ContextualRelevancyScorer(threshold=mark, **self._core_options)

    @property
    def threshold(self) -> float | None:
        """The minimum passing score; None for DeepEval's score-only mode (``success`` is
        then None). Set it at any time: :meth:`is_successful` and the next ``measure``
        judge by the new value, and so does a run given this metric."""
        return self._threshold

    @threshold.setter
    def threshold(self, value: float | None) -> None:
        self._threshold = checked_threshold(value)
        self.metric = self._core()

    # Configuration reads through to the metric it wraps.
    name = property(lambda self: self._name or self.metric.name)
    include_reason = property(lambda self: self.metric.config.include_reason)
    strict_mode = property(lambda self: self.metric.config.strict_mode)
    evaluation_template = property(lambda self: self._template)
    max_prompt_tokens = property(lambda self: self.metric.config.max_prompt_tokens)
    max_embed_tokens = property(lambda self: self.metric.config.max_embed_tokens)
    case_type = ModelTestCase

    @property
    def __name__(self) -> str:
        return "Contextual Relevancy"

    def __repr__(self) -> str:
        return (
            f"ContextualRelevancyMetric(threshold={self.threshold}, "
            f"model={self.evaluation_model!r}, strict_mode={self.strict_mode})"
        )

    def measure(self, test_case: ModelTestCase, *args: Any, **kwargs: Any) -> float:
        """Score ``test_case``; works inside a running event loop too.

        Raises :class:`~contextlens.errors.MetricComputationError` when the judge gave no
        usable reply, and ``InputError`` for a missing ``retrieval_context``. DeepEval's
        extra arguments (``_show_indicator`` ...) are accepted and ignored.
        """
        return run_sync(self.a_measure(test_case))

    async def a_measure(self, test_case: ModelTestCase, *args: Any, **kwargs: Any) -> float:
        """Asynchronous :meth:`measure`."""
        if self.retrieval_context is not None:
            test_case = test_case.model_copy(
                update={"retrieval_context": list(self.retrieval_context)}
            )
        try:
            with user_errors() as raised:
                scored = await score_one(self.metric, test_case)
        except InputError as exc:  # refused before scoring; DeepEval sets error, then raises
            self.score, self.success, self.error = None, False, str(exc)
            raise
        if scored.item.not_applicable is not None:  # no chunks: DeepEval's score is 0
            empty = scored.item.model_copy(
                update={"score": 0.0, "success": False, "reason": EMPTY_CONTEXT}
            )
            scored = Scored(empty, scored.accounting)
        self._store(scored, len(test_case.retrieval_context or []))
        item = scored.item
        if self.verbose_mode:
            say(f"{self.__name__} ({self.evaluation_model})\n{self.verbose_logs}")
        if item.failed:
            if isinstance(item.exception, InputError):
                raise item.exception
            cause = raised[-1] if raised else None  # the user's own model's, kept as the cause
            raise MetricComputationError(f"{self.__name__}: {item.error}") from cause
        assert item.score is not None
        return item.score

    def is_successful(self) -> bool | None:
        """Whether the last measured score passes the threshold as it is now (DeepEval's
        rule): None in score-only mode (``threshold=None``), False after an error or before
        any score; sets ``success`` to the answer."""
        self.success = passes(self.score, self._threshold, self.error)
        return self.success

    def _store(self, scored: Scored, n_chunks: int) -> None:
        item = scored.item
        self.score = item.score
        self.reason = item.reason
        self.error = item.error
        self.success = passes(item.score, self._threshold, item.error)
        self.result = MetricResult(
            metric=item.metric,
            score=item.score,
            reason=item.reason,
            error=item.error,
            success=self.success,
            details=item.details,
            cost=scored.cost,
        )
        details = item.details
        listed = details.verdicts if isinstance(details, RelevancyDetails) else []
        self.verdicts = [v.model_dump(exclude_none=True) for v in listed]
        self.verdicts_list = _verdicts_list(listed, n_chunks) if not item.failed else []
        self.evaluation_cost = scored.cost
        self.verbose_logs = (
            f"Verdicts:\n{json.dumps(self.verdicts, indent=2, ensure_ascii=False)}\n\n"
            f"Score: {self.score}\nReason: {self.reason}"
            + (f"\nError: {self.error}" if self.error else "")
        )


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
