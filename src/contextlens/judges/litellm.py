"""LiteLLM as a chat backend: ``provider/name`` model strings (extra ``litellm``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.errors import MissingExtraError
from contextlens.judges.base import Completion, Message, Usage


class LiteLLMBackend:
    """Transport through ``litellm.acompletion``; needs ``pip install 'contextlens[litellm]'``."""

    name = "litellm"

    def __init__(
        self,
        model: str,
        *,
        temperature: float | None = 0.0,
        use_structured_output: bool = False,
        **params: Any,
    ) -> None:
        try:
            import litellm
        except ImportError as exc:
            raise MissingExtraError("litellm", "litellm") from exc
        self._litellm = litellm
        self.model = model
        self.use_structured_output = use_structured_output
        self.params = {"temperature": temperature, **params} if temperature is not None else params
        self.key = f"litellm:{model}"

    def __repr__(self) -> str:
        return f"LiteLLMBackend(model={self.model!r})"

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        kwargs = dict(self.params)
        if self.use_structured_output and schema is not None:
            kwargs["response_format"] = schema
        start = time.perf_counter()
        reply = await self._litellm.acompletion(model=self.model, messages=list(messages), **kwargs)
        latency = time.perf_counter() - start
        usage = getattr(reply, "usage", None)
        return Completion(
            text=reply.choices[0].message.content or "",
            usage=Usage(
                int(getattr(usage, "prompt_tokens", 0) or 0),
                int(getattr(usage, "completion_tokens", 0) or 0),
            ),
            latency=latency,
        )
