"""Test helpers: a fake OpenAI-compatible HTTP server."""

from contextlens.testing.fake_openai import (
    DEFAULT_REPLY,
    FAULTS,
    FakeOpenAIServer,
    estimate_tokens,
)

__all__ = ["DEFAULT_REPLY", "FAULTS", "FakeOpenAIServer", "estimate_tokens"]
