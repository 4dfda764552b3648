"""contextlens: measure how well an LLM assistant or a RAG pipeline uses its context."""

from contextlens.errors import ContextLensError, InputError, JudgeError, MetricComputationError
from contextlens.judges import ChatBackend, Judge, Judgement, LLMJudge, resolve_judge
from contextlens.metrics.context import Context
from contextlens.retriever import JsonlRetriever, Retriever
from contextlens.schemas import Batch, ContextInteraction, ContextMetric, Dataset
from contextlens.stats import BayesianMode, Estimate, FrequentistMode, StatisticalMode

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "BayesianMode",
    "ChatBackend",
    "Context",
    "ContextInteraction",
    "ContextLensError",
    "ContextMetric",
    "Dataset",
    "Estimate",
    "FrequentistMode",
    "InputError",
    "JsonlRetriever",
    "Judge",
    "JudgeError",
    "Judgement",
    "LLMJudge",
    "MetricComputationError",
    "Retriever",
    "StatisticalMode",
    "__version__",
    "resolve_judge",
]
