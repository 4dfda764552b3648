"""From whatever a user passes as ``model=`` / ``judge=`` to a backend, then to a :class:`Judge`.

Spec strings (shared with the CLI):

- ``None``: no preference (a metric then takes the run's judge; a run without one is offline).
- ``"offline"``: the offline algorithms, explicitly.
- ``"openai:MODEL"`` or a bare model name such as ``"gpt-4o"``: the OpenAI API.
- ``"http://HOST:PORT/v1#MODEL"``: any OpenAI-compatible server (Ollama, vLLM,
  llama.cpp server, LM Studio).
- ``"litellm:PROVIDER/MODEL"`` or ``"PROVIDER/MODEL"``: LiteLLM (extra ``litellm``).
- ``"llama:PATH.gguf"``: a GGUF model run in this process by llama-cpp-python (extra
  ``llama``).

Any of them may end in settings: ``http://127.0.0.1:8080/v1#MODEL?timeout=300&max_tokens=400``
(:data:`SPEC_SETTINGS`: ``timeout``, ``max_tokens``, ``concurrency``, ``structured_output``
or ``structured`` (auto, json_schema, json_object, off), ``temperature``, ``seed``).

Objects: a :class:`Judge` is used as is; a :class:`ChatBackend`, a LangChain chat model or
an ``openai`` SDK client wrapped in :class:`OpenAIClientBackend` become an :class:`LLMJudge`.

:func:`as_backend` only builds objects (it changes no shared state, so a metric may call it
when constructed); :func:`resolve_judge` attaches the engine: cache, shared limiter, retries.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode

from contextlens.backend import ChatBackend
from contextlens.engine.cache import Cache, NullCache
from contextlens.engine.retry import RetryPolicy
from contextlens.judges.base import Judge
from contextlens.judges.formats import structured_mode
from contextlens.judges.langchain import LangChainBackend, is_langchain_model
from contextlens.judges.litellm import LiteLLMBackend
from contextlens.judges.llm import LLMJudge
from contextlens.judges.openai_compat import OpenAICompatBackend
from contextlens.judges.openai_sdk import is_openai_client

OFFLINE = "offline"

#: What :func:`as_backend` returns: a backend, a ready judge, ``"offline"``, or ``None``.
JudgeChoice = ChatBackend | Judge | str | None


#: Settings a spec string may carry after ``?`` (``...#MODEL?timeout=300&max_tokens=400``).
SPEC_SETTINGS = {
    "timeout": float,
    "max_tokens": int,
    "concurrency": int,
    "structured_output": structured_mode,
    "temperature": float,
    "seed": int,
}
_SETTING_ALIASES = {"structured": "structured_output"}


def spec_settings(query: str, spec: str) -> dict[str, Any]:
    """The settings of a spec's ``?key=value&...`` part, converted; a ValueError names an
    unknown key or a value that does not convert."""
    settings: dict[str, Any] = {}
    for key, values in parse_qs(query, keep_blank_values=True, strict_parsing=False).items():
        name = _SETTING_ALIASES.get(key, key)
        convert = SPEC_SETTINGS.get(name)
        if convert is None:
            raise ValueError(
                f"judge spec {spec!r}: unknown setting {key!r}; use "
                + ", ".join(sorted(SPEC_SETTINGS))
            )
        try:
            value = convert(values[-1])
        except ValueError as exc:
            raise ValueError(f"judge spec {spec!r}: {key}={values[-1]!r}: {exc}") from None
        if name in ("timeout", "max_tokens", "concurrency") and not value > 0:
            raise ValueError(f"judge spec {spec!r}: {key} must be > 0, got {values[-1]!r}")
        settings[name] = value
    return settings


def with_settings(spec: str, **settings: Any) -> str:
    """``spec`` with ``settings`` (those not None) added to its ``?`` part; the CLI's
    ``--judge-timeout`` and friends go through here."""
    given = {k: v for k, v in settings.items() if v is not None}
    if not given:
        return spec
    sep = "&" if "?" in spec.partition("#")[2] or ("#" not in spec and "?" in spec) else "?"
    return spec + sep + urlencode(given)


def backend_from_spec(
    spec: str,
    *,
    use_structured_output: bool | None = None,
    temperature: float | None = None,
    seed: int | None = None,
) -> ChatBackend:
    """The chat backend a spec string names; ``temperature`` and ``seed`` go with every
    request when given (the backends' own defaults otherwise). Settings after ``?``
    (:data:`SPEC_SETTINGS`) override them."""
    spec = spec.strip()
    params: dict[str, Any] = {}
    if use_structured_output is not None:
        params["structured_output"] = structured_mode(use_structured_output)
    if temperature is not None:
        params["temperature"] = temperature
    if seed is not None:
        params["seed"] = seed
    if spec.startswith(("http://", "https://")):
        base_url, sep, model = spec.partition("#")
        model, _, query = model.partition("?")
        if not sep or not model:
            raise ValueError(f"judge spec {spec!r}: expected http://HOST:PORT/v1#MODEL")
        params.update(spec_settings(query, spec))
        return OpenAICompatBackend(model, base_url=base_url.rstrip("/"), **params)
    spec_body, _, query = spec.partition("?")
    params.update(spec_settings(query, spec))
    prefix, sep, rest = spec_body.partition(":")
    if sep and prefix == "openai":
        return OpenAICompatBackend(rest, **params)
    if sep and prefix == "litellm":
        return LiteLLMBackend(rest, **params)
    if sep and prefix == "llama":
        from contextlens.judges.llama_cpp import LlamaCppBackend

        return LlamaCppBackend(rest, **params)
    if sep:
        raise ValueError(
            f"judge spec {spec!r}: unknown prefix {prefix!r}; use offline, openai:MODEL, "
            "http://HOST:PORT/v1#MODEL, litellm:PROVIDER/MODEL or llama:PATH.gguf"
        )
    if "/" in spec_body:
        return LiteLLMBackend(spec_body, **params)
    if not spec_body:
        raise ValueError("empty judge spec")
    return OpenAICompatBackend(spec_body, **params)


def is_offline(choice: Any) -> bool:
    """Whether ``choice`` explicitly asks for the offline algorithms."""
    return isinstance(choice, str) and choice.strip().lower() == OFFLINE


def as_backend(
    model: Any,
    *,
    use_structured_output: bool | None = None,
    temperature: float | None = None,
    seed: int | None = None,
) -> JudgeChoice:
    """What ``model`` names, built but not yet on the engine.

    ``None`` stays ``None`` (no preference) and ``"offline"`` stays ``"offline"``; a spec
    string becomes its backend (``temperature`` and ``seed`` apply to spec strings only); a
    LangChain model is wrapped in a :class:`LangChainBackend`; a backend or a judge is kept.
    """
    if model is None:
        return None
    if isinstance(model, str):
        if is_offline(model):
            return OFFLINE
        return backend_from_spec(
            model, use_structured_output=use_structured_output, temperature=temperature, seed=seed
        )
    if isinstance(model, (Judge, ChatBackend)):
        return model
    if is_openai_client(model):
        raise TypeError(
            f"an {type(model).__name__} client does not say which model to ask: pass "
            "OpenAIClientBackend(client, 'MODEL') from contextlens.judges"
        )
    if is_langchain_model(model):
        return LangChainBackend(model, use_structured_output=use_structured_output)
    raise TypeError(
        f"cannot judge with a {type(model).__name__}: pass a spec string, a LangChain chat "
        "model, a ChatBackend or a Judge"
    )


def resolve_judge(
    model: Any,
    *,
    use_structured_output: bool | None = None,
    max_concurrency: int | None = None,
    cache: Cache | NullCache | None = None,
    retry: RetryPolicy | None = None,
) -> Judge | None:
    """A :class:`Judge` for ``model``, or None for the offline path.

    A backend gets an :class:`LLMJudge` with ``cache``, ``retry`` and the limiter its key
    shares (``max_concurrency`` sets that limiter's bound; None leaves it as it is). A ready
    :class:`Judge` is used as is (an :class:`LLMJudge`'s limiter takes ``max_concurrency``).
    """
    choice = as_backend(model, use_structured_output=use_structured_output)
    if choice is None or isinstance(choice, str):
        return None
    if isinstance(choice, Judge):
        if isinstance(choice, LLMJudge) and max_concurrency is not None:
            choice.limiter.configure(max_concurrency)
            choice.limiter.origin = f"set to {max_concurrency}"
        return choice
    return LLMJudge(choice, max_concurrency=max_concurrency, cache=cache, retry=retry)
