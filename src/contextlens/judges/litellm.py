"""LiteLLM as a chat backend: ``provider/name`` model strings (extra ``litellm``).

``litellm.completion`` runs in a worker thread, with LiteLLM's own retries off: the engine
retries, honours ``Retry-After`` and adapts the concurrency, and LiteLLM's exceptions are
mapped into the backend contract's kinds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.backend import ChatBackend, Completion, JudgeNotReady, Message
from contextlens.errors import MissingExtraError
from contextlens.judges.errors import as_backend_error
from contextlens.judges.formats import FormatNegotiation
from contextlens.judges.openai_compat import is_local
from contextlens.judges.openai_sdk import completion_of
from contextlens.judges.spec import JudgeSpec, backend_kind
from contextlens.sync import in_thread

#: Keyword arguments that say how to reach the model, not what it answers: kept out of the
#: cache key (the key and the headers may differ between runs).
_TRANSPORT_KWARGS = frozenset({"api_key", "extra_headers", "timeout", "num_retries", "max_retries"})


class LiteLLMBackend(ChatBackend):
    """Transport through ``litellm.completion``; needs ``pip install 'contextlens[litellm]'``.

    ``params`` (``api_base``, ``api_key``, ``max_tokens`` ...) go with every call. The reply
    schema goes as ``response_format`` (``structured_output``: ``"auto"`` by default, see
    :mod:`contextlens.judges.formats`), and ``max_tokens``, unless given, is sized from it.
    """

    name = "litellm"
    formats: FormatNegotiation

    def __init__(
        self,
        model: str,
        *,
        temperature: float | None = 0.0,
        use_structured_output: bool | None = None,
        structured_output: str | None = None,
        timeout: float | None = None,
        concurrency: int | None = None,
        **params: Any,
    ) -> None:
        try:
            import litellm
        except ImportError as exc:
            raise MissingExtraError("litellm", "litellm") from exc
        # LiteLLM prints a help banner with every exception it raises; the engine reports
        # each failure with its reason, and a run under rate limits raises many.
        litellm.suppress_debug_info = True
        self._litellm = litellm
        self.model = model
        self.formats = FormatNegotiation(
            structured_output if structured_output is not None else use_structured_output
        )
        self.request = {"num_retries": 0, "max_retries": 0, **params}
        if temperature is not None:
            self.request["temperature"] = temperature
        self.timeout = timeout
        if timeout is not None:
            self.request["timeout"] = timeout
        self.concurrency = concurrency
        given = params.get("max_tokens")
        self.max_tokens = given if isinstance(given, int) and given > 0 else None
        self.api_base = params.get("api_base") or params.get("base_url")
        self.local = bool(self.api_base) and is_local(str(self.api_base))

    def preflight(self) -> None:
        """:class:`JudgeNotReady` when LiteLLM says the provider's key variables are not
        set (and no key or local server is given)."""
        if self.local or self.request.get("api_key"):
            return
        try:
            check = self._litellm.validate_environment(model=self.model)
        except Exception:
            return
        missing = check.get("missing_keys") if isinstance(check, dict) else None
        if missing and not check.get("keys_in_environment"):
            raise JudgeNotReady(
                f"the judge litellm:{self.model} needs {', '.join(map(str, missing))} set "
                "(or an api_key passed to it)"
            )

    @property
    def key(self) -> str:
        return f"litellm:{self.api_base or 'default'}#{self.model}"

    @property
    def params(self) -> dict[str, Any]:
        """What changes replies besides the prompt (part of the cache key)."""
        params = {k: v for k, v in self.request.items() if k not in _TRANSPORT_KWARGS}
        return {**params, "structured_output": self.formats.mode}

    def __repr__(self) -> str:
        return f"LiteLLMBackend(model={self.model!r})"

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        kwargs = dict(self.request)
        sent, options = self.formats.reply_options(schema, messages, kwargs.get("max_tokens"))
        kwargs.update(options)
        messages = self.formats.prompt_for(messages, schema, sent)
        start = time.perf_counter()
        try:
            reply = await in_thread(
                self._litellm.completion, model=self.model, messages=list(messages), **kwargs
            )
        except Exception as exc:
            error = as_backend_error(exc)
            structured = "response_format" in options
            raise (self.formats.refused(sent, error) if structured else error) from exc
        return completion_of(reply, time.perf_counter() - start)


@backend_kind("litellm", prefixes=("litellm:",), bare=lambda name: "/" in name, extra="litellm")
def _litellm(spec: JudgeSpec) -> LiteLLMBackend:
    """``litellm:PROVIDER/MODEL``, or a bare ``PROVIDER/MODEL``: LiteLLM."""
    return LiteLLMBackend(spec.target, **spec.settings.given())
