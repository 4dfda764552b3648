"""Any LangChain chat model as a chat backend (duck-typed: no hard dependency)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.judges.base import Completion, Message, Usage


def is_langchain_model(obj: object) -> bool:
    """True for objects that look like a LangChain chat model or runnable."""
    return callable(getattr(obj, "ainvoke", None)) or callable(getattr(obj, "invoke", None))


def _text(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text", "") for p in content]
        return "".join(str(p) for p in parts)
    return str(content)


def _usage(message: Any) -> Usage:
    meta = getattr(message, "usage_metadata", None) or {}
    if meta:
        return Usage(int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0)))
    tokens = (getattr(message, "response_metadata", None) or {}).get("token_usage") or {}
    return Usage(int(tokens.get("prompt_tokens", 0)), int(tokens.get("completion_tokens", 0)))


class LangChainBackend:
    """Transport through a LangChain chat model's ``ainvoke`` (or ``invoke`` in a thread).

    With ``use_structured_output=True`` the schema is enforced by the model's
    ``with_structured_output``; the result is still validated by the shared parser.
    """

    name = "langchain"

    def __init__(self, chat_model: Any, *, use_structured_output: bool = False) -> None:
        if not is_langchain_model(chat_model):
            raise TypeError(f"{type(chat_model).__name__} has neither ainvoke nor invoke")
        self.chat_model = chat_model
        self.use_structured_output = use_structured_output
        self.model = str(
            getattr(chat_model, "model_name", None)
            or getattr(chat_model, "model", None)
            or type(chat_model).__name__
        )

    @property
    def key(self) -> str:
        """One limiter per chat model object."""
        return f"langchain:{self.model}:{id(self.chat_model)}"

    @property
    def params(self) -> dict[str, Any]:
        """What changes replies besides the prompt (part of the cache key)."""
        return {
            "class": type(self.chat_model).__name__,
            "temperature": getattr(self.chat_model, "temperature", None),
        }

    def __repr__(self) -> str:
        return f"LangChainBackend({type(self.chat_model).__name__}, model={self.model!r})"

    async def _invoke(self, runnable: Any, messages: list[dict[str, str]]) -> Any:
        if callable(getattr(runnable, "ainvoke", None)):
            return await runnable.ainvoke(messages)
        return await asyncio.to_thread(runnable.invoke, messages)

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        payload = [{"role": m["role"], "content": m["content"]} for m in messages]
        start = time.perf_counter()
        if self.use_structured_output and schema is not None:
            runnable = self.chat_model.with_structured_output(schema, include_raw=True)
            result = await self._invoke(runnable, payload)
            latency = time.perf_counter() - start
            if isinstance(result, dict) and "raw" in result:
                raw = result["raw"]
                return Completion(
                    text=_text(raw), usage=_usage(raw), latency=latency, parsed=result.get("parsed")
                )
            return Completion(text=str(result), latency=latency, parsed=result)
        reply = await self._invoke(self.chat_model, payload)
        return Completion(
            text=_text(reply), usage=_usage(reply), latency=time.perf_counter() - start
        )
