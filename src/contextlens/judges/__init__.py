"""Judges: the Judge protocol, chat backends, and the shared reply parsing."""

from contextlens.backend import (
    ChatBackend,
    Completion,
    FatalError,
    Message,
    RateLimited,
    TransientError,
    Usage,
)
from contextlens.judges.base import Fence, Judge, Judgement
from contextlens.judges.foreign import DeepEvalModelBackend, OpikModelBackend
from contextlens.judges.langchain import LangChainBackend
from contextlens.judges.litellm import LiteLLMBackend
from contextlens.judges.llm import LLMJudge
from contextlens.judges.openai_compat import OpenAICompatBackend
from contextlens.judges.openai_sdk import OpenAIClientBackend
from contextlens.judges.resolve import as_backend, resolve_judge
from contextlens.judges.spec import JudgeSettings, JudgeSpec

__all__ = [
    "ChatBackend",
    "Completion",
    "DeepEvalModelBackend",
    "FatalError",
    "Fence",
    "Judge",
    "JudgeSettings",
    "JudgeSpec",
    "Judgement",
    "LLMJudge",
    "LangChainBackend",
    "LiteLLMBackend",
    "Message",
    "OpenAIClientBackend",
    "OpenAICompatBackend",
    "OpikModelBackend",
    "RateLimited",
    "TransientError",
    "Usage",
    "as_backend",
    "resolve_judge",
]
