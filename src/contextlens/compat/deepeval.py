"""DeepEval's (and agensight's) ``ContextualRelevancyMetric``.

    metric = ContextualRelevancyMetric(threshold=0.7, model="gpt-4o-mini")
    metric.measure(ModelTestCase(input=..., actual_output=..., retrieval_context=[...]))
    metric.score, metric.reason, metric.success, metric.verdicts_list

    evaluate(test_cases=[...], metrics=[metric])   # DeepEval's evaluate and assert_test

A thin shell over :class:`~contextlens.metrics.contextual_relevancy.ContextualRelevancyScorer`,
run through :func:`~contextlens.runner.aevaluate`. ``measure`` sets the last result on the
object, as DeepEval does; nothing else about the object changes. ``LLMTestCase`` is
DeepEval's name of :class:`~contextlens.schemas.ModelTestCase`; :class:`DeepEvalBaseLLM` the
base class of a custom judge model. A :class:`ConversationalTestCase` (a list of
:class:`Turn`) is a conversation, read as a session by ``to_dataset()`` for the turn metrics.
"""

from __future__ import annotations

from contextlens.compat.deepeval_conversational import ConversationalTestCase, Turn
from contextlens.compat.deepeval_evaluate import (
    AsyncConfig,
    CacheConfig,
    DisplayConfig,
    ErrorConfig,
    EvaluationResult,
    MetricData,
    TestResult,
    assert_test,
    evaluate,
)
from contextlens.compat.deepeval_metric import (
    ContextualRelevancyMetric,
    ContextualRelevancyVerdict,
    ContextualRelevancyVerdicts,
)
from contextlens.compat.deepeval_template import ContextualRelevancyTemplate
from contextlens.compat.models import DeepEvalBaseLLM
from contextlens.schemas import LLMTestCase, ModelTestCase

__all__ = [
    "AsyncConfig",
    "CacheConfig",
    "ContextualRelevancyMetric",
    "ContextualRelevancyTemplate",
    "ContextualRelevancyVerdict",
    "ContextualRelevancyVerdicts",
    "ConversationalTestCase",
    "DeepEvalBaseLLM",
    "DisplayConfig",
    "ErrorConfig",
    "EvaluationResult",
    "LLMTestCase",
    "MetricData",
    "ModelTestCase",
    "TestResult",
    "Turn",
    "assert_test",
    "evaluate",
]
