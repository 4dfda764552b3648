"""A :class:`~contextlens.backend.ChatBackend` for Anthropic's Messages API.

Transport only, over the same HTTP client as the OpenAI-compatible backend: one ``POST
{base_url}/messages`` per call, with ``x-api-key`` and ``anthropic-version``. The system
messages go into ``system``, the others into ``messages``; ``max_tokens`` (which the API
requires) is sized from the reply schema unless given. Anthropic has no ``response_format``,
so the prompt describes the reply (structured output ``off``) and replies are read leniently
where the schema allows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from contextlens.backend import Completion, FatalError, JudgeNotReady, Message, Usage
from contextlens.judges.openai_compat import OpenAICompatBackend, _count, endpoint
from contextlens.judges.schema import reply_token_budget
from contextlens.judges.spec import JudgeSpec, backend_kind

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_ANTHROPIC_URL", "AnthropicBackend"]

DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicBackend(OpenAICompatBackend):
    """Claude models through the Messages API.

    Args:
        model: the model name (``claude-3-5-haiku-latest``).
        base_url: API root; default env ``ANTHROPIC_BASE_URL``, else
            ``https://api.anthropic.com/v1``.
        api_key: sent as ``x-api-key``; default env ``ANTHROPIC_API_KEY``.
        temperature, max_tokens, timeout, concurrency, headers, max_reply_bytes: as for
            :class:`~contextlens.judges.openai_compat.OpenAICompatBackend`.
        structured_output: only ``"off"`` (or None): the API has no reply format.
        seed: not sent (the API takes none); accepted so that a spec's settings apply.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        structured_output: str | None = None,
        use_structured_output: bool | None = None,
        **settings: Any,
    ) -> None:
        if structured_output not in (None, "off") or use_structured_output:
            raise ValueError(
                f"anthropic:{model}: the Messages API has no reply format; structured output "
                "can only be off (the prompt describes the reply)"
            )
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY", "")
        super().__init__(model, url, key, structured_output="off", **settings)

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return f"AnthropicBackend(model={self.model!r}, base_url={self.base_url!r}, api_key={key})"

    @property
    def key(self) -> str:
        return f"anthropic:{self.base_url}#{self.model}"

    def preflight(self) -> None:
        """:class:`JudgeNotReady` for Anthropic's API with no key."""
        if not self._api_key and urlsplit(self.base_url).hostname == "api.anthropic.com":
            raise JudgeNotReady(
                f"the judge anthropic:{self.model} needs an API key: set ANTHROPIC_API_KEY"
            )

    @cached_property
    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        headers.update(self.headers)
        return headers

    @cached_property
    def _completions_url(self) -> str:
        return endpoint(self.base_url, "/messages")

    def _body(self, messages: Sequence[Message], schema: type[BaseModel] | None) -> dict[str, Any]:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [
            {"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"
        ]
        max_tokens = self.max_tokens or reply_token_budget(schema, messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": turns}
        if system:
            body["system"] = system
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.extra_body)
        return body

    def _completion(self, data: Any, text: str, latency: float) -> Completion:
        return message_completion(data, text, self._redact, latency)


def message_completion(
    data: Any, text: str, redact: Callable[[str], str], latency: float = 0.0
) -> Completion:
    """A Messages API reply (a ``message`` object) as a completion: its text blocks joined,
    its ``usage`` as counted (a count not believable is 0)."""
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list):
        raise FatalError(redact(f"reply has no content: {text!r}"))
    parts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    texts = [p for p in parts if isinstance(p, str)]
    if not texts or len(texts) != len(parts):
        raise FatalError(redact(f"reply has no text content: {text!r}"))
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return Completion(
        text="".join(texts),
        usage=Usage(_count(usage.get("input_tokens")), _count(usage.get("output_tokens"))),
        latency=latency,
    )


@backend_kind("anthropic", prefixes=("anthropic:",))
def _anthropic(spec: JudgeSpec) -> AnthropicBackend:
    """``anthropic:MODEL``: Anthropic's Messages API."""
    return AnthropicBackend(spec.target, **spec.settings.given())
