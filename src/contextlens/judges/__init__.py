"""Judges: the Judge protocol, chat backends, and the shared reply parsing."""

from contextlens.judges.base import ChatBackend, Completion, Judge, Judgement, Message, Usage
from contextlens.judges.llm import LLMJudge
from contextlens.judges.resolve import backend_from_spec, resolve_judge

__all__ = [
    "ChatBackend",
    "Completion",
    "Judge",
    "Judgement",
    "LLMJudge",
    "Message",
    "Usage",
    "backend_from_spec",
    "resolve_judge",
]
