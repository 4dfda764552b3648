"""DeepEval's documented usage around ``ContextualRelevancyMetric``: ``evaluate(test_cases=...,
metrics=...)``, ``assert_test``, score-only mode (``threshold=None``), ``flaky`` metrics and
test cases, and a threshold set after construction."""

import warnings

import pytest

from contextlens import ContextualRelevancyMetric, LLMTestCase
from contextlens import evaluate as run_evaluate
from contextlens.compat.deepeval import (
    AsyncConfig,
    CacheConfig,
    DisplayConfig,
    ErrorConfig,
    EvaluationResult,
    assert_test,
    evaluate,
)
from contextlens.errors import MetricComputationError
from support.relevancy import REFUND, SHIPPING, RuleJudge, case, facts

QUESTION = "What if these shoes don't fit?"
QUIET = DisplayConfig(show_indicator=False, print_results=False)


def refund_case(**fields) -> LLMTestCase:
    """DeepEval's documented test case: its one chunk is relevant (scores 1.0)."""
    return LLMTestCase(
        input=QUESTION,
        actual_output="We offer a 30-day full refund at no extra cost.",
        retrieval_context=[REFUND],
        **fields,
    )


def shipping_case(**fields) -> LLMTestCase:
    """A test case whose one chunk is off topic (scores 0.0)."""
    return LLMTestCase(input=QUESTION, actual_output="...", retrieval_context=[SHIPPING], **fields)


# --- evaluate(test_cases=..., metrics=...) --------------------------------------------------


def test_the_documented_evaluate_call_scores_and_prints_its_report(capsys):
    metric = ContextualRelevancyMetric(threshold=0.7, model=RuleJudge(), include_reason=True)
    test_case = refund_case()

    result = evaluate(test_cases=[test_case], metrics=[metric])

    assert isinstance(result, EvaluationResult)
    [test] = result.test_results
    [data] = test.metrics_data
    assert (data.name, data.score, data.threshold, data.success) == (
        "Contextual Relevancy",
        1.0,
        0.7,
        True,
    )
    assert data.reason.startswith("1 of 1 statement is relevant.")
    assert data.evaluation_model == "rule" and data.error is None and data.flaky is False
    assert test.success is True and test.name == "test_case_0" and test.index == 0
    assert (test.input, test.retrieval_context) == (QUESTION, [REFUND])
    assert result.test_run_id == result.run.run_id
    # as in DeepEval, evaluate leaves the metric object as it was
    assert metric.score is None and metric.success is None
    out = capsys.readouterr().out
    assert "PASSED Contextual Relevancy (score: 1.0, threshold: 0.7" in out
    assert "Contextual Relevancy: 100.00% pass rate" in out


def test_a_test_case_fails_when_its_metric_does():
    metric = ContextualRelevancyMetric(threshold=0.5, model=RuleJudge())
    result = evaluate(
        [refund_case(name="refund"), shipping_case(name="shipping")],
        [metric],
        display_config=QUIET,
    )
    by_name = {t.name: t for t in result.test_results}
    assert by_name["refund"].success is True
    assert by_name["shipping"].success is False
    [data] = by_name["shipping"].metrics_data
    assert data.score == 0.0 and data.success is False


def test_deepevals_config_objects_reach_the_run():
    judge = RuleJudge()
    result = evaluate(
        test_cases=[refund_case()],
        metrics=[ContextualRelevancyMetric(model=judge)],
        identifier="nightly",
        hyperparameters={"model": "gpt-4.1", "temperature": 0.0},
        async_config=AsyncConfig(max_concurrent=3),
        display_config=QUIET,
        cache_config=CacheConfig(write_cache=False, use_cache=False),
    )
    config = result.run.config
    assert config.name == "nightly" and config.max_concurrency == 3
    assert config.tags == {"model": "gpt-4.1", "temperature": "0.0"}
    assert config.cache == "False"
    with pytest.raises(ValueError, match="max_concurrent must be at least 1"):
        AsyncConfig(max_concurrent=0)


def test_a_metric_that_cannot_score_raises_unless_errors_are_ignored(rule_model):
    broken = ContextualRelevancyMetric(model=rule_model(lambda prompt: "no JSON here"))
    with pytest.raises(MetricComputationError, match=r"Contextual Relevancy: .*no JSON object"):
        evaluate([refund_case()], [broken], display_config=QUIET)
    result = evaluate(
        [refund_case()],
        [broken],
        display_config=QUIET,
        error_config=ErrorConfig(ignore_errors=True),
    )
    [test] = result.test_results
    [data] = test.metrics_data
    assert "no JSON object" in data.error and data.success is False and data.score is None
    assert test.success is False


def test_an_empty_retrieval_context_scores_zero_as_in_deepeval():
    metric = ContextualRelevancyMetric(threshold=0.0, model=RuleJudge())
    result = evaluate([case()], [metric], display_config=QUIET)
    [data] = result.test_results[0].metrics_data
    assert data.score == 0.0 and data.success is True
    assert data.reason.startswith("The retrieval context is empty")


def test_evaluate_refuses_what_deepeval_refuses():
    with pytest.raises(ValueError, match="metrics: give at least one metric"):
        evaluate([refund_case()], [])
    with pytest.raises(ValueError, match="at least one non-flaky metric with a 'threshold'"):
        evaluate([refund_case()], [ContextualRelevancyMetric(threshold=None, model=RuleJudge())])
    with pytest.raises(ValueError, match="at least one non-flaky metric with a 'threshold'"):
        evaluate([refund_case()], [ContextualRelevancyMetric(model=RuleJudge(), flaky=True)])


# --- threshold=None: score-only mode --------------------------------------------------------


def test_threshold_none_scores_without_a_verdict():
    metric = ContextualRelevancyMetric(threshold=None, model=RuleJudge())
    assert metric.threshold is None
    assert metric.measure(case(REFUND, SHIPPING)) == 0.5
    assert metric.score == 0.5 and metric.success is None and metric.is_successful() is None
    assert metric.result.success is None
    graded = ContextualRelevancyMetric(threshold=0.5, model=RuleJudge(), name="graded")
    result = evaluate([refund_case()], [metric, graded], display_config=QUIET)
    scored_only, judged = result.test_results[0].metrics_data
    assert scored_only.score == 1.0 and scored_only.success is None
    assert scored_only.threshold is None and judged.success is True
    assert result.test_results[0].success is True


@pytest.mark.parametrize("bad", [1.5, -0.1])
def test_a_threshold_outside_zero_one_is_refused(bad):
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\] or None"):
        ContextualRelevancyMetric(threshold=bad)
    with pytest.raises(TypeError, match="threshold must be a number"):
        ContextualRelevancyMetric(threshold="0.5")


# --- metric.threshold = x ------------------------------------------------------------------


def test_a_threshold_set_after_measure_is_what_is_successful_judges_by():
    metric = ContextualRelevancyMetric(threshold=0.7, model=RuleJudge())
    metric.measure(case(REFUND, SHIPPING))
    assert metric.score == 0.5 and metric.success is False and metric.is_successful() is False
    metric.threshold = 0.4
    assert metric.threshold == 0.4
    assert metric.is_successful() is True and metric.success is True
    metric.threshold = None
    assert metric.is_successful() is None
    with pytest.raises(ValueError, match="threshold must be in"):
        metric.threshold = 2
    assert metric.threshold is None  # a refused value changes nothing


def test_a_threshold_set_after_construction_reaches_the_next_measure_and_a_run():
    metric = ContextualRelevancyMetric(threshold=0.9, model=RuleJudge())
    metric.threshold = 0.5
    metric.measure(case(REFUND, SHIPPING))
    assert metric.success is True
    run = run_evaluate([case(REFUND, SHIPPING)], [metric], progress=False)
    [item] = run.results
    assert item.score == 0.5 and item.success is True
    metric.threshold = 0.6
    [item] = run_evaluate([case(REFUND, SHIPPING)], [metric], progress=False).results
    assert item.success is False


def test_is_successful_before_any_measure_is_false():
    assert ContextualRelevancyMetric(model=RuleJudge()).is_successful() is False


def test_strict_mode_still_sets_the_threshold_to_one():
    metric = ContextualRelevancyMetric(threshold=0.2, model=RuleJudge(), strict_mode=True)
    assert metric.threshold == 1.0
    assert metric.measure(case(facts(2))) == 0.0 and metric.success is False


# --- flaky ----------------------------------------------------------------------------------


def test_flaky_is_taken_and_kept():
    metric = ContextualRelevancyMetric(threshold=0.7, model=RuleJudge(), flaky=True)
    assert metric.flaky is True
    assert ContextualRelevancyMetric().flaky is False


def test_a_flaky_metric_never_decides_the_test_case():
    steady = ContextualRelevancyMetric(threshold=0.0, model=RuleJudge())
    flaky = ContextualRelevancyMetric(threshold=0.9, model=RuleJudge(), flaky=True, name="f")
    result = evaluate([shipping_case()], [steady, flaky], display_config=QUIET)
    [test] = result.test_results
    steady_data, flaky_data = test.metrics_data
    assert flaky_data.flaky is True and flaky_data.success is False
    assert steady_data.success is True and test.success is True
    # as a standalone, a flaky metric is measured like any other
    flaky.measure(shipping_case())
    assert flaky.score == 0.0 and flaky.success is False


# --- assert_test ----------------------------------------------------------------------------


def test_assert_test_passes_and_fails_with_deepevals_message():
    metric = ContextualRelevancyMetric(threshold=0.7, model=RuleJudge())
    assert_test(refund_case(), [metric])
    with pytest.raises(AssertionError) as info:
        assert_test(test_case=shipping_case(), metrics=[metric])
    message = str(info.value)
    assert message.startswith("Metrics: Contextual Relevancy (score: 0.0, threshold: 0.7")
    assert message.endswith("failed.") and "reason: 0 of 1 statement is relevant." in message


def test_assert_test_ignores_a_flaky_metrics_failure():
    steady = ContextualRelevancyMetric(threshold=0.0, model=RuleJudge())
    flaky = ContextualRelevancyMetric(threshold=0.9, model=RuleJudge(), flaky=True, name="f")
    assert_test(shipping_case(), [steady, flaky])


def test_a_failing_flaky_test_case_warns_instead_of_failing():
    metric = ContextualRelevancyMetric(threshold=0.7, model=RuleJudge())
    with pytest.warns(UserWarning, match=r"Flaky test case failed \(no assertion raised\)"):
        assert_test(shipping_case(flaky=True), [metric])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_test(refund_case(flaky=True), [metric])  # a passing one says nothing
