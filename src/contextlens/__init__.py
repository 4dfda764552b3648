"""contextlens: measure how well an LLM assistant or a RAG pipeline uses its context.

The names below are imported when first used, so ``contextlens --version``, ``--help`` and
a pytest session that never calls ``assert_context`` do not load the engine, the judges and
the offline models.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlens.calibration import CalibrationReport, acalibrate, calibrate
    from contextlens.compare import Comparison, MetricComparison, compare
    from contextlens.compat.deepeval import (
        ContextualRelevancyMetric,
        ContextualRelevancyTemplate,
    )
    from contextlens.compat.gaussia import Context, ContextInteraction, ContextMetric
    from contextlens.compat.models import DeepEvalBaseLLM, OpikBaseModel
    from contextlens.compat.novastack import ContextSimilarityEvaluator, HuggingFaceEmbedding
    from contextlens.compat.opik import ContextPrecision, ScoreResult
    from contextlens.errors import (
        ContextLensError,
        InputError,
        JudgeError,
        MetricComputationError,
    )
    from contextlens.judges import ChatBackend, Judge, Judgement, LLMJudge, resolve_judge
    from contextlens.metrics.base import Services
    from contextlens.metrics.metric import Metric, Score
    from contextlens.metrics.registry import MetricInfo, metric
    from contextlens.metrics.registry import get as get_metric
    from contextlens.metrics.registry import registered as list_metrics
    from contextlens.results import EvalRun, ItemResult, MetricSummary
    from contextlens.retriever import JsonlRetriever, Retriever
    from contextlens.runner import aevaluate, evaluate
    from contextlens.schemas import (
        Batch,
        Dataset,
        IterationLevel,
        LLMTestCase,
        MetricResult,
        ModelTestCase,
        SessionMetadata,
        StreamedBatch,
    )
    from contextlens.stats import BayesianMode, Estimate, FrequentistMode, StatisticalMode
    from contextlens.store import RunStore

__version__ = "0.1.0"

#: Each public name: the module that defines it, and its name there.
_EXPORTS: dict[str, tuple[str, str]] = {
    **{n: ("contextlens.calibration", n) for n in ("CalibrationReport", "acalibrate", "calibrate")},
    **{n: ("contextlens.compare", n) for n in ("Comparison", "MetricComparison", "compare")},
    **{
        n: ("contextlens.compat.deepeval", n)
        for n in ("ContextualRelevancyMetric", "ContextualRelevancyTemplate")
    },
    **{
        n: ("contextlens.compat.gaussia", n)
        for n in ("Context", "ContextInteraction", "ContextMetric")
    },
    **{n: ("contextlens.compat.models", n) for n in ("DeepEvalBaseLLM", "OpikBaseModel")},
    **{
        n: ("contextlens.compat.novastack", n)
        for n in ("ContextSimilarityEvaluator", "HuggingFaceEmbedding")
    },
    **{n: ("contextlens.compat.opik", n) for n in ("ContextPrecision", "ScoreResult")},
    **{
        n: ("contextlens.errors", n)
        for n in ("ContextLensError", "InputError", "JudgeError", "MetricComputationError")
    },
    **{
        n: ("contextlens.judges", n)
        for n in ("ChatBackend", "Judge", "Judgement", "LLMJudge", "resolve_judge")
    },
    "Services": ("contextlens.metrics.base", "Services"),
    **{n: ("contextlens.metrics.metric", n) for n in ("Metric", "Score")},
    **{n: ("contextlens.metrics.registry", n) for n in ("MetricInfo", "metric")},
    "get_metric": ("contextlens.metrics.registry", "get"),
    "list_metrics": ("contextlens.metrics.registry", "registered"),
    **{n: ("contextlens.results", n) for n in ("EvalRun", "ItemResult", "MetricSummary")},
    **{n: ("contextlens.retriever", n) for n in ("JsonlRetriever", "Retriever")},
    **{n: ("contextlens.runner", n) for n in ("aevaluate", "evaluate")},
    **{
        n: ("contextlens.schemas", n)
        for n in (
            "Batch",
            "Dataset",
            "IterationLevel",
            "LLMTestCase",
            "MetricResult",
            "ModelTestCase",
            "SessionMetadata",
            "StreamedBatch",
        )
    },
    **{
        n: ("contextlens.stats", n)
        for n in ("BayesianMode", "Estimate", "FrequentistMode", "StatisticalMode")
    },
    "RunStore": ("contextlens.store", "RunStore"),
}

__all__ = [
    "Batch",
    "BayesianMode",
    "CalibrationReport",
    "ChatBackend",
    "Comparison",
    "Context",
    "ContextInteraction",
    "ContextLensError",
    "ContextMetric",
    "ContextPrecision",
    "ContextSimilarityEvaluator",
    "ContextualRelevancyMetric",
    "ContextualRelevancyTemplate",
    "Dataset",
    "DeepEvalBaseLLM",
    "Estimate",
    "EvalRun",
    "FrequentistMode",
    "HuggingFaceEmbedding",
    "InputError",
    "ItemResult",
    "IterationLevel",
    "JsonlRetriever",
    "Judge",
    "JudgeError",
    "Judgement",
    "LLMJudge",
    "LLMTestCase",
    "Metric",
    "MetricComparison",
    "MetricComputationError",
    "MetricInfo",
    "MetricResult",
    "MetricSummary",
    "ModelTestCase",
    "OpikBaseModel",
    "Retriever",
    "RunStore",
    "Score",
    "ScoreResult",
    "Services",
    "SessionMetadata",
    "StatisticalMode",
    "StreamedBatch",
    "__version__",
    "acalibrate",
    "aevaluate",
    "calibrate",
    "compare",
    "evaluate",
    "get_metric",
    "list_metrics",
    "metric",
    "resolve_judge",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then kept here)."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'contextlens' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


class _Package(types.ModuleType):
    """The package, whose public names stay what they are when a submodule of the same
    name is first imported (``contextlens.compare`` the function, not the module)."""

    def __setattr__(self, name: str, value: Any) -> None:
        module, attr = _EXPORTS.get(name, ("", ""))
        if isinstance(value, types.ModuleType) and value.__name__ == module:
            value = getattr(value, attr)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
