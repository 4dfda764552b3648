"""From whatever a user passes as ``model=`` / ``judge=`` to a backend, then to a :class:`Judge`.

- ``None``: no preference (a metric then takes the run's judge; a run without one is offline).
- ``"offline"``: the offline algorithms, explicitly.
- a spec string (``"openai:MODEL"``, ``"http://HOST:PORT/v1#MODEL"``, ...) or a
  :class:`~contextlens.judges.spec.JudgeSpec`: the backend it names (see
  :mod:`contextlens.judges.spec`).
- a :class:`Judge` is used as is; a :class:`ChatBackend` (or an object of its shape, adapted
  once), a DeepEval-shaped or Opik-shaped model class (:mod:`contextlens.judges.foreign`), a
  LangChain chat model or an ``openai`` SDK client wrapped in :class:`OpenAIClientBackend`
  become an :class:`LLMJudge`.

:func:`as_backend` only builds objects (it changes no shared state, so a metric may call it
when constructed); :func:`resolve_judge` attaches the engine: cache, the run's limiters,
retries.
"""

from __future__ import annotations

from typing import Any

from contextlens.backend import ChatBackend
from contextlens.engine.cache import Cache, NullCache
from contextlens.engine.limiter import Limits
from contextlens.engine.retry import RetryPolicy
from contextlens.judges.anthropic import AnthropicBackend
from contextlens.judges.anthropic_batch import AnthropicBatches
from contextlens.judges.base import Judge
from contextlens.judges.batching import BatchBackend
from contextlens.judges.foreign import (
    DeepEvalModelBackend,
    OpikModelBackend,
    UserBackend,
    is_chat_backend,
    is_deepeval_model,
    is_opik_model,
)
from contextlens.judges.langchain import LangChainBackend, is_langchain_model
from contextlens.judges.llm import LLMJudge
from contextlens.judges.openai_batch import OpenAIBatches
from contextlens.judges.openai_compat import OpenAICompatBackend
from contextlens.judges.openai_sdk import is_openai_client
from contextlens.judges.spec import OFFLINE, JudgeSettings, JudgeSpec, is_offline

__all__ = [
    "OFFLINE",
    "JudgeChoice",
    "as_backend",
    "as_spec",
    "batched",
    "is_offline",
    "resolve_judge",
]

#: What :func:`as_backend` returns: a backend, a ready judge, ``"offline"``, or ``None``.
JudgeChoice = ChatBackend | Judge | str | None


def as_spec(model: Any, settings: JudgeSettings | None = None) -> Any:
    """``model`` with a spec string parsed into a :class:`JudgeSpec` (``settings`` set over
    its own) and ``"offline"`` as ``"offline"``; anything else as it is."""
    if isinstance(model, str):
        if is_offline(model):
            return OFFLINE
        model = JudgeSpec.parse(model)
    if isinstance(model, JudgeSpec) and settings is not None:
        return model.with_settings(settings)
    return model


def as_backend(
    model: Any,
    *,
    use_structured_output: bool | None = None,
    temperature: float | None = None,
    seed: int | None = None,
) -> JudgeChoice:
    """What ``model`` names, built but not yet on the engine.

    ``None`` stays ``None`` (no preference) and ``"offline"`` stays ``"offline"``; a spec
    becomes its backend (``use_structured_output``, ``temperature`` and ``seed`` apply to
    specs, under the spec's own settings); a DeepEval-shaped model is wrapped in a
    :class:`DeepEvalModelBackend`, an Opik-shaped one in an :class:`OpikModelBackend`, a
    LangChain model in a :class:`LangChainBackend` (``use_structured_output`` applies to
    them too); a backend or a judge is kept, an object of a backend's shape adapted in a
    :class:`~contextlens.judges.foreign.UserBackend`.
    """
    if model is None:
        return None
    defaults = JudgeSettings(
        structured_output=use_structured_output, temperature=temperature, seed=seed
    )
    spec = as_spec(model)
    if spec == OFFLINE:
        return OFFLINE
    if isinstance(spec, JudgeSpec):
        return spec.model_copy(update={"settings": spec.settings.over(defaults)}).build()
    if isinstance(model, (Judge, ChatBackend)):
        return model
    if is_chat_backend(model):
        return UserBackend(model)
    if is_openai_client(model):
        raise TypeError(
            f"an {type(model).__name__} client does not say which model to ask: pass "
            "OpenAIClientBackend(client, 'MODEL') from contextlens.judges"
        )
    if is_deepeval_model(model):
        return DeepEvalModelBackend(model, use_structured_output=use_structured_output)
    if is_opik_model(model):
        return OpikModelBackend(model, use_structured_output=use_structured_output)
    if is_langchain_model(model):
        return LangChainBackend(model, use_structured_output=use_structured_output)
    if callable(getattr(model, "judge", None)):
        missing = [m for m in ("connection_key", "max_connections") if not hasattr(model, m)]
        raise TypeError(
            f"{type(model).__name__} is not a whole Judge: it lacks {', '.join(missing)} "
            "(the key its calls share a concurrency bound under, and that bound)"
        )
    raise TypeError(
        f"cannot judge with a {type(model).__name__}: pass a spec string, a LangChain chat "
        "model, a DeepEval-shaped model (get_model_name, generate / a_generate), an "
        "Opik-shaped model (generate_string / agenerate_string), a ChatBackend or a Judge"
    )


def batched(backend: ChatBackend, **options: Any) -> BatchBackend:
    """``backend``'s calls made through its provider's batch API (``options``: those of
    :class:`~contextlens.judges.batching.BatchBackend`); a ValueError for a backend whose
    provider has none that contextlens speaks."""
    if isinstance(backend, BatchBackend):
        return backend
    if isinstance(backend, AnthropicBackend):  # before its base class
        return BatchBackend(AnthropicBatches(backend), **options)
    if isinstance(backend, OpenAICompatBackend):
        return BatchBackend(OpenAIBatches(backend), **options)
    raise ValueError(
        f"batch judging goes through a provider's batch API: give an OpenAI judge "
        f"(openai:MODEL, or http://HOST:PORT/v1#MODEL for a server that serves /v1/batches) "
        f"or anthropic:MODEL; the {backend.name} judge {backend.model} has none"
    )


def resolve_judge(
    model: Any,
    *,
    limits: Limits | None = None,
    cache: Cache | NullCache | None = None,
    retry: RetryPolicy | None = None,
    batch: bool = False,
) -> Judge | None:
    """A :class:`Judge` for ``model``, or None for the offline path.

    A backend gets an :class:`LLMJudge` with ``cache``, ``retry`` and the limiter
    ``limits`` gives its key (the process-wide one by default). A ready :class:`LLMJudge`
    is used as is unless ``limits`` sets a bound, which a copy of it gets; any other
    :class:`Judge` is used as is. ``batch``: the backend's calls go through its provider's
    batch API (:func:`batched`; a ready :class:`LLMJudge` keeps its cache).
    """
    limits = limits or Limits()
    choice = as_backend(model)
    if choice is None or isinstance(choice, str):
        return None
    if batch and isinstance(choice, LLMJudge):
        cache = choice.cache if cache is None else cache
        choice = choice.backend
    if batch and isinstance(choice, ChatBackend):
        choice = batched(choice)
    elif batch and isinstance(choice, Judge):
        raise ValueError(f"batch judging: the judge {choice.name} makes its own calls")
    if isinstance(choice, LLMJudge):
        if limits.bound is None:
            return choice
        return choice.with_limiter(limits.limiter(choice.connection_key()))
    if isinstance(choice, Judge):
        return choice
    limiter = limits.limiter(choice.key, choice.concurrency)
    return LLMJudge(choice, limiter=limiter, cache=cache, retry=retry)
