"""contextlens: measure how well an LLM assistant or a RAG pipeline uses its context."""

from contextlens.calibration import CalibrationReport, acalibrate, calibrate
from contextlens.compare import Comparison, MetricComparison, compare
from contextlens.errors import ContextLensError, InputError, JudgeError, MetricComputationError
from contextlens.judges import ChatBackend, Judge, Judgement, LLMJudge, resolve_judge
from contextlens.metrics.context import Context
from contextlens.metrics.context_precision import ContextPrecision
from contextlens.metrics.context_similarity import ContextSimilarityEvaluator
from contextlens.metrics.contextual_relevancy import ContextualRelevancyMetric
from contextlens.retriever import JsonlRetriever, Retriever
from contextlens.runner import EvalRun, ItemResult, MetricSummary, aevaluate, evaluate
from contextlens.schemas import (
    Batch,
    ContextInteraction,
    ContextMetric,
    Dataset,
    MetricResult,
    ModelTestCase,
    ScoreResult,
)
from contextlens.stats import BayesianMode, Estimate, FrequentistMode, StatisticalMode
from contextlens.store import RunStore

__version__ = "0.1.0"

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
    "Dataset",
    "Estimate",
    "EvalRun",
    "FrequentistMode",
    "InputError",
    "ItemResult",
    "JsonlRetriever",
    "Judge",
    "JudgeError",
    "Judgement",
    "LLMJudge",
    "MetricComparison",
    "MetricComputationError",
    "MetricResult",
    "MetricSummary",
    "ModelTestCase",
    "Retriever",
    "RunStore",
    "ScoreResult",
    "StatisticalMode",
    "__version__",
    "acalibrate",
    "aevaluate",
    "calibrate",
    "compare",
    "evaluate",
    "resolve_judge",
]
