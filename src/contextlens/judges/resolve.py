"""From whatever a user passes as ``model=`` / ``judge=`` to a :class:`Judge`.

Spec strings (shared with the CLI):

- ``None`` or ``"offline"``: no judge; metrics use their offline algorithm.
- ``"openai:MODEL"`` or a bare model name such as ``"gpt-4o"``: the OpenAI API.
- ``"http://HOST:PORT/v1#MODEL"``: any OpenAI-compatible server (Ollama, vLLM,
  llama.cpp server, LM Studio).
- ``"litellm:PROVIDER/MODEL"`` or ``"PROVIDER/MODEL"``: LiteLLM (extra ``litellm``).

Objects: a :class:`Judge` is used as is; a :class:`ChatBackend` or a LangChain chat
model is wrapped in an :class:`LLMJudge`.
"""

from __future__ import annotations

from typing import Any

from contextlens.engine.cache import Cache, NullCache
from contextlens.engine.retry import RetryPolicy
from contextlens.judges.base import ChatBackend, Judge
from contextlens.judges.langchain import LangChainBackend, is_langchain_model
from contextlens.judges.litellm import LiteLLMBackend
from contextlens.judges.llm import LLMJudge
from contextlens.judges.openai_compat import OpenAICompatBackend
from contextlens.judges.parsing import DEFAULT_BOS, DEFAULT_EOS


def backend_from_spec(
    spec: str,
    *,
    use_structured_output: bool = False,
    temperature: float | None = None,
    seed: int | None = None,
) -> ChatBackend:
    """The chat backend a spec string names; ``temperature`` and ``seed`` go with every
    request when given (the backends' own defaults otherwise)."""
    spec = spec.strip()
    params: dict[str, Any] = {"use_structured_output": use_structured_output}
    if temperature is not None:
        params["temperature"] = temperature
    if seed is not None:
        params["seed"] = seed
    if spec.startswith(("http://", "https://")):
        base_url, sep, model = spec.partition("#")
        if not sep or not model:
            raise ValueError(f"judge spec {spec!r}: expected http://HOST:PORT/v1#MODEL")
        return OpenAICompatBackend(model, base_url=base_url.rstrip("/"), **params)
    prefix, sep, rest = spec.partition(":")
    if sep and prefix == "openai":
        return OpenAICompatBackend(rest, **params)
    if sep and prefix == "litellm":
        return LiteLLMBackend(rest, **params)
    if sep:
        raise ValueError(
            f"judge spec {spec!r}: unknown prefix {prefix!r}; use offline, openai:MODEL, "
            "http://HOST:PORT/v1#MODEL or litellm:PROVIDER/MODEL"
        )
    if "/" in spec:
        return LiteLLMBackend(spec, **params)
    if not spec:
        raise ValueError("empty judge spec")
    return OpenAICompatBackend(spec, **params)


def resolve_judge(
    model: Any,
    *,
    use_structured_output: bool = False,
    bos_json_clause: str = DEFAULT_BOS,
    eos_json_clause: str = DEFAULT_EOS,
    max_concurrency: int = 16,
    cache: Cache | NullCache | None = None,
    retry: RetryPolicy | None = None,
) -> Judge | None:
    """A :class:`Judge` for ``model``, or None for the offline path.

    ``cache`` and ``retry`` configure the :class:`LLMJudge` built around a backend; a
    ready :class:`Judge` is used as is.
    """
    if model is None or (isinstance(model, str) and model.strip().lower() == "offline"):
        return None
    if isinstance(model, Judge):
        return model
    if isinstance(model, str):
        backend: ChatBackend = backend_from_spec(model, use_structured_output=use_structured_output)
    elif isinstance(model, ChatBackend):
        backend = model
    elif is_langchain_model(model):
        backend = LangChainBackend(model, use_structured_output=use_structured_output)
    else:
        raise TypeError(
            f"cannot judge with a {type(model).__name__}: pass a spec string, a LangChain chat "
            "model, a ChatBackend or a Judge"
        )
    return LLMJudge(
        backend,
        max_concurrency=max_concurrency,
        bos_json_clause=bos_json_clause,
        eos_json_clause=eos_json_clause,
        cache=cache,
        retry=retry,
    )
