"""contextlens: measure how well an LLM assistant or a RAG pipeline uses its context."""

from contextlens.calibration import CalibrationReport, acalibrate, calibrate
from contextlens.compare import Comparison, MetricComparison, compare
from contextlens.compat.deepeval import ContextualRelevancyMetric, ContextualRelevancyTemplate
from contextlens.compat.gaussia import Context, ContextInteraction, ContextMetric
from contextlens.compat.models import DeepEvalBaseLLM, OpikBaseModel
from contextlens.compat.novastack import ContextSimilarityEvaluator, HuggingFaceEmbedding
from contextlens.compat.opik import ContextPrecision, ScoreResult
from contextlens.errors import ContextLensError, InputError, JudgeError, MetricComputationError
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
