"""Test helpers: a fake OpenAI-compatible HTTP server, a fake batch server, and a real
llama.cpp one."""

from contextlens.testing.fake_batches import FakeBatchServer
from contextlens.testing.fake_openai import (
    DEFAULT_REPLY,
    FAULTS,
    FakeOpenAIServer,
    estimate_tokens,
)
from contextlens.testing.llama_server import LlamaServer, smollm2_gguf

__all__ = [
    "DEFAULT_REPLY",
    "FAULTS",
    "FakeBatchServer",
    "FakeOpenAIServer",
    "LlamaServer",
    "estimate_tokens",
    "smollm2_gguf",
]
