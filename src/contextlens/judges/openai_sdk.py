"""An ``openai`` SDK client the user already has (``OpenAI``, ``AsyncOpenAI``, the Azure
ones) as a chat backend.

The client is used, never owned: a blocking client is called in a worker thread, an async one
on contextlens's own event loop (:mod:`contextlens.sync`), so it works from any number of
sync calls, loops and threads. Its own retries are turned off on a copy that shares its
connection pool (``with_options(max_retries=0)``): the engine retries and adapts instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.backend import ChatBackend, Completion, FatalError, Message, Usage
from contextlens.judges.errors import as_backend_error
from contextlens.judges.formats import FormatNegotiation
from contextlens.sync import in_thread, on_home_loop


def is_openai_client(obj: object) -> bool:
    """True for an ``openai`` SDK client (it has ``chat.completions.create``)."""
    completions = getattr(getattr(obj, "chat", None), "completions", None)
    return callable(getattr(completions, "create", None)) and hasattr(obj, "base_url")


class OpenAIClientBackend(ChatBackend):
    """Chat completions through an ``openai`` SDK client.

    Args:
        client: an ``openai.OpenAI``, ``AsyncOpenAI``, ``AzureOpenAI`` ... instance.
        model: the model name sent with each request.
        temperature, seed: sent when not ``None``.
        max_tokens: per call; ``None`` sizes it from the reply schema.
        use_structured_output, structured_output: the reply format, as for
            :class:`~contextlens.judges.openai_compat.OpenAICompatBackend` (constrained by
            default, stepping down when the server refuses it).
        extra: more keyword arguments for ``chat.completions.create``.
    """

    name = "openai-sdk"
    #: It calls the user's own client: a fatal exception of it is the user's.
    user_object = True
    formats: FormatNegotiation

    def __init__(
        self,
        client: Any,
        model: str,
        *,
        temperature: float | None = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        use_structured_output: bool | None = None,
        structured_output: str | None = None,
        **extra: Any,
    ) -> None:
        if not is_openai_client(client):
            raise TypeError(f"{type(client).__name__} is not an openai SDK client")
        with_options = getattr(client, "with_options", None)
        self.client = with_options(max_retries=0) if callable(with_options) else client
        self.is_async = type(client).__name__.startswith("Async")
        self.model = model
        self.base_url = str(client.base_url).rstrip("/")
        self.formats = FormatNegotiation(
            structured_output if structured_output is not None else use_structured_output
        )
        self.max_tokens = max_tokens
        self.request: dict[str, Any] = {
            k: v for k, v in {"temperature": temperature, "seed": seed}.items() if v is not None
        }
        self.request.update(extra)

    @property
    def key(self) -> str:
        return f"openai-sdk:{self.base_url}#{self.model}"

    @property
    def params(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            **self.request,
            "max_tokens": self.max_tokens,
            "structured_output": self.formats.mode,
        }

    def __repr__(self) -> str:
        return f"OpenAIClientBackend(model={self.model!r}, base_url={self.base_url!r})"

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        sent, options = self.formats.reply_options(schema, messages, self.max_tokens)
        prompt = self.formats.prompt_for(messages, schema, sent)
        kwargs: dict[str, Any] = {"model": self.model, "messages": prompt, **self.request}
        kwargs.update(options)
        create = self.client.chat.completions.create
        start = time.perf_counter()
        try:
            if self.is_async:
                reply = await on_home_loop(lambda: create(**kwargs))
            else:
                reply = await in_thread(create, **kwargs)
        except Exception as exc:
            error = as_backend_error(exc)
            structured = "response_format" in options
            raise (self.formats.refused(sent, error) if structured else error) from exc
        return completion_of(reply, time.perf_counter() - start)


def completion_of(reply: Any, latency: float) -> Completion:
    """A :class:`Completion` from a reply object of the ``openai`` SDK's shape (the SDK's
    own, LiteLLM's ``ModelResponse``); :class:`FatalError` when it holds no text."""
    try:
        text = reply.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise FatalError(f"reply has no choices[0].message: {reply!r:.300}") from None
    if not isinstance(text, str):
        raise FatalError(f"reply has no text content: {reply.choices[0].message!r:.300}")
    usage = getattr(reply, "usage", None)
    return Completion(
        text=text,
        usage=Usage(
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
        ),
        latency=latency,
    )
