"""Any LangChain chat model as a chat backend (duck-typed: no hard dependency).

The model is the user's and stays theirs: it is called through its blocking ``invoke`` in
worker threads (:func:`contextlens.sync.call_user`), because a model's async client is bound to
the first event loop that used it and every sync call of contextlens runs a loop of its own; a
runnable may be invoked from several threads at once (LangChain's own ``batch`` does), so it
is taken as thread-safe.
Its exceptions become the backend contract's kinds (:mod:`contextlens.judges.errors`).

A model that retries on its own (``ChatOpenAI(max_retries=2)``, the default) hides the rate
limits it absorbs from contextlens's limiter; give it ``max_retries=0`` to let the engine
retry, honour ``Retry-After`` and adapt the concurrency.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.backend import ChatBackend, Completion, InvalidReply, Message, Usage
from contextlens.judges.errors import as_backend_error, is_reply_error
from contextlens.judges.formats import FormatNegotiation
from contextlens.judges.openai_compat import is_local
from contextlens.sync import call_user

#: Attributes that name where a LangChain model sends its requests.
_ENDPOINT_ATTRS = ("openai_api_base", "base_url", "api_base", "azure_endpoint", "endpoint_url")


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


def bound_kwargs(chat_model: Any) -> dict[str, Any] | None:
    """The arguments of a LangChain binding (``chat.bind(temperature=1.0)``), None for a
    model that is not one. A binding passes every other attribute to the model it wraps, so
    its ``with_structured_output`` is the bare model's and would drop them."""
    kwargs = getattr(chat_model, "kwargs", None)
    if getattr(chat_model, "bound", None) is None or not isinstance(kwargs, dict):
        return None
    return kwargs


def _json_safe(value: Any) -> Any:
    """``value`` with anything JSON cannot hold dropped (no reprs with memory addresses)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        if isinstance(value, dict):
            safe = {str(k): _json_safe(v) for k, v in value.items()}
            return {k: v for k, v in safe.items() if v is not None}
        return None


class LangChainBackend(ChatBackend):
    """Transport through a LangChain chat model.

    The reply schema goes through the model's ``with_structured_output`` (constrained
    decoding where the provider has it) unless ``use_structured_output=False``; a model
    without it, or a server that refuses the format, is asked with the prompt alone from then
    on. The result is validated by the shared parser either way, and a reply the model's
    own parser rejects is read from its raw text.
    """

    name = "langchain"
    #: It calls the user's own model: a fatal exception of it is the user's.
    user_object = True
    formats: FormatNegotiation

    def __init__(self, chat_model: Any, *, use_structured_output: bool | None = None) -> None:
        if not is_langchain_model(chat_model):
            raise TypeError(f"{type(chat_model).__name__} has neither ainvoke nor invoke")
        self.chat_model = chat_model
        self.formats = FormatNegotiation(use_structured_output)
        self.bound = bound_kwargs(chat_model)
        self.model = str(
            (self.bound or {}).get("model")
            or getattr(chat_model, "model_name", None)
            or getattr(chat_model, "model", None)
            or type(chat_model).__name__
        )
        self.endpoint = next(
            (str(v) for a in _ENDPOINT_ATTRS if (v := getattr(chat_model, a, None))), None
        )
        self._structured: dict[tuple[str, type[BaseModel]], Any] = {}
        self.local = bool(self.endpoint) and is_local(str(self.endpoint))

    @property
    def key(self) -> str:
        """One limiter per endpoint and model (per object when the endpoint is unknown)."""
        where = self.endpoint or f"object-{id(self.chat_model)}"
        return f"langchain:{type(self.chat_model).__name__}:{where}#{self.model}"

    @property
    def params(self) -> dict[str, Any]:
        """What changes replies besides the prompt (part of the cache key)."""
        identifying = getattr(self.chat_model, "_identifying_params", None)
        return {
            "class": type(self.chat_model).__name__,
            "endpoint": self.endpoint,
            "identifying": _json_safe(dict(identifying)) if isinstance(identifying, dict) else None,
            "temperature": _json_safe(getattr(self.chat_model, "temperature", None)),
            "bound": _json_safe(self.bound) if self.bound else None,
            "structured_output": self.formats.mode,
        }

    def __repr__(self) -> str:
        return f"LangChainBackend({type(self.chat_model).__name__}, model={self.model!r})"

    def _runnable(self, schema: type[BaseModel] | None) -> tuple[Any, str]:
        """What to invoke for ``schema`` and the reply format it asks for: the model's
        ``with_structured_output`` (``json_schema``), the model bound to llama.cpp's
        ``response_format`` (``json_object``, after a server refused the first), or the
        model itself (``off``). A user's binding is bound to the ``response_format`` of the
        format in use, ``json_schema`` included, and its reply read from its text."""
        mode = self.formats.current
        if schema is None or mode == "off":
            return self.chat_model, "off"
        runnable = self._structured.get((mode, schema))
        if runnable is None:
            try:
                if mode == "json_schema" and self.bound is None:
                    runnable = self.chat_model.with_structured_output(schema, include_raw=True)
                else:  # a binding keeps its arguments when it is bound again
                    _, response_format = self.formats.response_format(schema)
                    runnable = self.chat_model.bind(response_format=response_format)
            except (NotImplementedError, AttributeError, TypeError, ValueError):
                if self.formats.mode != "auto":
                    raise
                self.formats.current = "off"  # the model has no structured output
                return self.chat_model, "off"
            self._structured[(mode, schema)] = runnable
        return runnable, mode

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        runnable, sent = self._runnable(schema)
        prompt = self.formats.prompt_for(messages, schema, sent)
        payload = [{"role": m["role"], "content": m["content"]} for m in prompt]
        start = time.perf_counter()
        try:
            result = await call_user(runnable, "invoke", "ainvoke", payload, thread_safe=True)
        except Exception as exc:
            if sent == "json_schema" and is_reply_error(exc):
                raise InvalidReply(f"the structured reply does not fit the schema: {exc}") from exc
            error = as_backend_error(exc)
            raise (self.formats.refused(sent, error) if sent != "off" else error) from exc
        latency = time.perf_counter() - start
        if sent != "json_schema" or self.bound is not None:
            return Completion(text=_text(result), usage=_usage(result), latency=latency)
        if isinstance(result, dict) and "raw" in result:
            raw = result["raw"]
            return Completion(
                text=_text(raw), usage=_usage(raw), latency=latency, parsed=result.get("parsed")
            )
        return Completion(text=str(result), latency=latency, parsed=result)
