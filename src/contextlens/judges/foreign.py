"""Objects of the user's as chat backends: backends of their own, and model classes written
for DeepEval or Opik.

A backend of the user's that does not subclass :class:`~contextlens.backend.ChatBackend` (it
has ``name``, ``model``, ``key``, ``params``, ``use_structured_output`` and ``complete``) is
adapted once by :func:`as_chat_backend`: what it declares of the rest (``concurrency``,
``timeout``, ``local`` ...) is read then, the defaults stand for what it does not.

Users of DeepEval or Opik wrap any provider in a class of their own; such an object is used as
it is, recognised by the methods it has (neither library is imported):

- DeepEval-shaped (``DeepEvalBaseLLM``): ``get_model_name()`` and ``generate(prompt,
  schema=None)`` and/or ``async a_generate(prompt, schema=None)`` (``load_model()`` is the
  user's own business). It is handed the reply schema when its method takes ``schema``.
- Opik-shaped (``OpikBaseModel``): ``generate_string(input, **kwargs)`` and/or ``async
  agenerate_string``, with ``generate_provider_response(messages, **kwargs)`` /
  ``agenerate_provider_response`` as the way in when the string methods are missing or not
  implemented; Opik's newer ``generate_chat_completion(messages, response_format=None)`` /
  ``agenerate_chat_completion`` (a ``{"role", "content"}`` reply), when it has them, first.
  It is handed the reply schema as ``response_format`` when its method takes it.

What they return is a reply like any other: text (the JSON is found and validated by
:mod:`contextlens.judges.parsing`), a ``(reply, cost)`` pair whose cost is counted, an
instance of the schema they were handed, or (Opik) a provider response with
``choices[0].message.content`` and its token usage. Their exceptions become the backend
contract's kinds (:mod:`contextlens.judges.errors`) with the original as ``__cause__``.
Like every user object they are used, never owned, and called as
:func:`contextlens.sync.call_either` says: a model that declares ``thread_safe = True`` (on
the object or its class) has its blocking method called in contextlens's worker threads, as
many calls at once as the judge's limit; else its async method, when it has one, is awaited on
contextlens's own event loop; else its blocking method is called one call at a time (the
backend's ``concurrency`` is 1 then), in a thread of its own. A call that does not return
within the judge's timeout is abandoned to its daemon thread, which never keeps the process
from ending.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel

from contextlens.backend import (
    BackendError,
    ChatBackend,
    Completion,
    InvalidReply,
    Message,
    Usage,
)
from contextlens.errors import user_text
from contextlens.judges.errors import as_backend_error, is_reply_error
from contextlens.judges.formats import FormatNegotiation
from contextlens.sync import call_either, is_thread_safe

__all__ = [
    "DeepEvalModelBackend",
    "OpikModelBackend",
    "UserBackend",
    "as_chat_backend",
    "is_chat_backend",
    "is_deepeval_model",
    "is_opik_model",
]

#: Attributes that may name where a user's model sends its requests (part of the cache key).
_ENDPOINT_ATTRS = ("base_url", "api_base", "openai_api_base", "endpoint", "host", "url")
#: Attribute names that hold credentials: never part of an object's settings.
_SECRET_ATTR = re.compile(r"key|token|secret|passw|auth|credential", re.IGNORECASE)
_SCALARS = (str, int, float, bool, type(None))


def _has(obj: object, *names: str) -> bool:
    return any(callable(getattr(obj, n, None)) for n in names)


#: What an object has to be used as a chat backend without subclassing ChatBackend.
_BACKEND_ATTRS = ("name", "model", "key", "params", "use_structured_output")


def is_chat_backend(obj: object) -> bool:
    """True for a :class:`ChatBackend`, or an object with its shape: ``name``, ``model``,
    ``key``, ``params``, ``use_structured_output`` and ``complete``."""
    if isinstance(obj, ChatBackend):
        return True
    return all(hasattr(obj, a) for a in _BACKEND_ATTRS) and _has(obj, "complete")


def as_chat_backend(obj: object) -> ChatBackend:
    """``obj`` as a :class:`ChatBackend`: itself when it is one, else adapted once in a
    :class:`UserBackend`. ``TypeError`` for an object without a backend's shape."""
    if isinstance(obj, ChatBackend):
        return obj
    if not is_chat_backend(obj):
        missing = [a for a in (*_BACKEND_ATTRS, "complete") if not hasattr(obj, a)]
        raise TypeError(
            f"{type(obj).__name__} is not a chat backend: it lacks {', '.join(missing)}"
        )
    return UserBackend(obj)


def _count(value: object) -> int | None:
    """``value`` when it is a whole number above 0 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value > 0 else None


def _seconds(value: object) -> float | None:
    """``value`` as seconds when it is a number above 0 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value > 0 else None


class UserBackend(ChatBackend):
    """A backend of the user's that does not subclass :class:`ChatBackend`, adapted once.

    ``key``, ``params``, ``use_structured_output`` and :meth:`complete` are the object's own,
    read at each use. What else it declares is read here, once: ``concurrency`` and
    ``max_tokens`` (a whole number above 0), ``timeout`` (seconds above 0), ``local``,
    ``constrained`` (a bool), ``price_key``, ``user_object``, ``formats`` (a
    :class:`~contextlens.judges.formats.FormatNegotiation`), and whether it has
    ``preflight()`` and ``async server_slots()``; what it does not declare keeps the
    :class:`ChatBackend` default.
    """

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.name = user_text(obj, lambda: obj.name, "its name")
        self.model = user_text(obj, lambda: obj.model, "its model")
        self.concurrency = _count(getattr(obj, "concurrency", None))
        self.max_tokens = _count(getattr(obj, "max_tokens", None))
        self.timeout = _seconds(getattr(obj, "timeout", None))
        self.local = bool(getattr(obj, "local", False))
        self.user_object = bool(getattr(obj, "user_object", False))
        formats = getattr(obj, "formats", None)
        self.formats = formats if isinstance(formats, FormatNegotiation) else None
        constrained = getattr(obj, "constrained", None)
        self._constrained = constrained if isinstance(constrained, bool) else None
        price_key = getattr(obj, "price_key", self.model)
        self._price_key = price_key if isinstance(price_key, str) or price_key is None else None
        self._checks = callable(getattr(obj, "preflight", None))
        self._reports_slots = callable(getattr(obj, "server_slots", None))

    def __repr__(self) -> str:
        return f"UserBackend({self.obj!r})"

    @property
    def key(self) -> str:
        return str(self.obj.key)

    @property
    def params(self) -> Mapping[str, Any]:
        params: Mapping[str, Any] = self.obj.params
        return params

    @property
    def use_structured_output(self) -> bool:
        return bool(self.obj.use_structured_output)

    @property
    def constrained(self) -> bool:
        return super().constrained if self._constrained is None else self._constrained

    @property
    def price_key(self) -> str | None:
        return self._price_key

    def preflight(self) -> None:
        if self._checks:
            self.obj.preflight()

    async def server_slots(self) -> int | None:
        if not self._reports_slots:
            return None
        return _count(await self.obj.server_slots())

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        completion: Completion = await self.obj.complete(messages, schema=schema)
        return completion


def is_deepeval_model(obj: object) -> bool:
    """True for a DeepEval-shaped model: ``get_model_name`` and ``generate`` or
    ``a_generate``."""
    return _has(obj, "get_model_name") and _has(obj, "generate", "a_generate")


def is_opik_model(obj: object) -> bool:
    """True for an Opik-shaped model: ``generate_string`` or ``agenerate_string``,
    ``generate_chat_completion`` or ``agenerate_chat_completion``, or both provider-response
    methods."""
    return _has(obj, *_STRING, *_CHAT) or (
        _has(obj, "generate_provider_response") and _has(obj, "agenerate_provider_response")
    )


#: Opik's ways in, each a blocking method and its async twin.
_STRING = ("generate_string", "agenerate_string")
_CHAT = ("generate_chat_completion", "agenerate_chat_completion")
_PROVIDER = ("generate_provider_response", "agenerate_provider_response")


@cache
def _takes(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` accepts the keyword ``name`` (by name, or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in params
    )


def _bound(obj: object, name: str) -> Callable[..., Any] | None:
    method = getattr(obj, name, None)
    return method if callable(method) else None


def _async_method(obj: object, name: str) -> Callable[..., Any] | None:
    """``obj``'s async method ``name``; None when it has none, or only the default of Opik's
    base class, which raises ``NotImplementedError`` (its blocking twin is the model's own)."""
    method = _bound(obj, name)
    owner = next((c for c in type(obj).__mro__ if name in vars(c)), None)
    opik_default = owner is not None and (owner.__module__.split(".")[0], owner.__qualname__)
    return None if opik_default == ("opik", "OpikBaseModel") else method


def _unbound(method: Callable[..., Any]) -> Callable[..., Any]:
    """The function behind a bound method (hashable and shared by instances, for :func:`_takes`)."""
    return getattr(method, "__func__", method)


def prompt_text(messages: Sequence[Message]) -> str:
    """The messages as the one prompt string a string API takes: their texts, in order."""
    return "\n\n".join(m["content"] for m in messages)


def _cost(value: Any) -> float | None:
    """A reported cost in USD, when it is one (a finite number >= 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def own_settings(obj: Any) -> dict[str, Any]:
    """The plain values an object of the user's holds (a deployment, a model name, a
    temperature...) as it is handed over: its public attributes that are text, numbers,
    booleans or None, credentials left out. Two objects of one class whose
    ``get_model_name()`` is the same may still judge differently; their settings tell them
    apart in the cache."""
    try:
        attrs = vars(obj)
    except TypeError:
        return {}
    return {
        name: value
        for name, value in sorted(attrs.items())
        if not name.startswith("_")
        and not _SECRET_ATTR.search(name)
        and isinstance(value, _SCALARS)
        and not (isinstance(value, float) and not math.isfinite(value))
        and len(str(value)) <= 1000
    }


def _json_safe(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None


class _UserModelBackend(ChatBackend):
    """What the DeepEval- and Opik-shaped backends share: identity, the call, the reply."""

    name = "user-model"
    #: It calls the user's own model: a fatal exception of it is the user's.
    user_object = True
    #: Text replies are the user's model's own: not known to follow the schema.
    constrained = False
    #: Whether the model is handed the reply schema (when its method takes one).
    use_structured_output = True
    #: Its async methods: with none of them and no ``thread_safe = True``, one call at a time.
    async_methods: tuple[str, ...] = ()

    def __init__(self, obj: Any, model: str, *, use_structured_output: bool | None) -> None:
        self.obj = obj
        self.model = model
        self.use_structured_output = use_structured_output is not False
        self.endpoint = next(
            (str(v) for a in _ENDPOINT_ATTRS if isinstance(v := getattr(obj, a, None), str) and v),
            None,
        )
        self.settings = own_settings(obj)  # once: a count the object keeps does not move it
        if not is_thread_safe(obj) and not any(_async_method(obj, n) for n in self.async_methods):
            self.concurrency = 1  # blocking methods alone, not said to be thread-safe

    @property
    def key(self) -> str:
        """One limiter per object (its endpoint is not known in general)."""
        return f"{self.name}:{type(self.obj).__qualname__}:object-{id(self.obj)}#{self.model}"

    @property
    def params(self) -> dict[str, Any]:
        """What changes replies besides the prompt (part of the cache key)."""
        cls = type(self.obj)
        return {
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "endpoint": self.endpoint,
            "temperature": _json_safe(getattr(self.obj, "temperature", None)),
            "settings": self.settings,
            "structured_output": self.use_structured_output,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.obj).__name__}, model={self.model!r})"

    async def _ask(self, messages: Sequence[Message], schema: type[BaseModel] | None) -> Any:
        raise NotImplementedError

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        handed = schema if self.use_structured_output else None
        start = time.perf_counter()
        try:
            result = await self._ask(messages, handed)
        except BackendError:
            raise
        except Exception as exc:
            if handed is not None and is_reply_error(exc):
                raise InvalidReply(f"the structured reply does not fit the schema: {exc}") from exc
            raise as_backend_error(exc) from exc
        return self._completion(result, time.perf_counter() - start)

    def _completion(self, result: Any, latency: float) -> Completion:
        """The user's return value as a reply: ``(reply, cost)``, a schema instance, a
        mapping, text, or what a provider response said."""
        cost = None
        if isinstance(result, tuple) and len(result) == 2:
            result, cost = result[0], _cost(result[1])
        if isinstance(result, _Said):
            return Completion(
                text=result.text,
                usage=result.usage,
                latency=latency,
                cost=result.cost if cost is None else cost,
                constrained=False,
            )
        if isinstance(result, BaseModel):
            return Completion(
                text=result.model_dump_json(),
                latency=latency,
                parsed=result,
                cost=cost,
                constrained=True,
            )
        if isinstance(result, dict):
            return Completion(
                text=json.dumps(_json_safe(result) or {}),
                latency=latency,
                parsed=result,
                cost=cost,
                constrained=True,
            )
        if isinstance(result, str):
            return Completion(text=result, latency=latency, cost=cost, constrained=False)
        raise InvalidReply(
            f"{type(self.obj).__name__} returned a {type(result).__name__}, not a reply "
            "(text, a (text, cost) pair or an instance of the schema)",
            raw=None if result is None else repr(result)[:200],
        )


class DeepEvalModelBackend(_UserModelBackend):
    """Transport through a DeepEval-shaped model (``DeepEvalBaseLLM``).

    The prompt is the messages' texts joined; ``a_generate`` (on contextlens's loop) is
    preferred to ``generate``, as DeepEval's own async mode does, unless the model declares
    ``thread_safe = True``: then ``generate``, in worker threads. Either is left for the other
    when it is missing or raises ``NotImplementedError``; a model with ``generate`` alone is
    called one call at a time. ``use_structured_output=False`` never hands it the schema. The
    model name is ``get_model_name()``.
    """

    name = "deepeval-model"
    async_methods = ("a_generate",)

    def __init__(self, obj: Any, *, use_structured_output: bool | None = None) -> None:
        if not is_deepeval_model(obj):
            raise TypeError(
                f"{type(obj).__name__} is not DeepEval-shaped: it needs get_model_name and "
                "generate or a_generate"
            )
        super().__init__(
            obj,
            user_text(obj, obj.get_model_name, "get_model_name()"),
            use_structured_output=use_structured_output,
        )

    async def _ask(self, messages: Sequence[Message], schema: type[BaseModel] | None) -> Any:
        return await _either(
            self.obj, "generate", "a_generate", (prompt_text(messages),), ("schema", schema)
        )


class OpikModelBackend(_UserModelBackend):
    """Transport through an Opik-shaped model (``OpikBaseModel``).

    As Opik's own metrics call it: ``generate_chat_completion(messages)`` when it has it,
    else ``generate_string(input=prompt)`` with the messages' texts joined as the prompt, else
    the provider-response methods with the messages as they are (each way is left for the
    next when missing or raising ``NotImplementedError``). Of each way, the async method
    (``agenerate_...``, on contextlens's loop) is preferred to the blocking one unless the
    model declares ``thread_safe = True`` (then the blocking one, in worker threads); one that
    raises ``NotImplementedError`` is left for the other. A model with blocking methods alone
    is called one call at a time. The model name is its ``model_name``.
    """

    name = "opik-model"
    async_methods = (_CHAT[1], _STRING[1], _PROVIDER[1])

    def __init__(self, obj: Any, *, use_structured_output: bool | None = None) -> None:
        if not is_opik_model(obj):
            raise TypeError(
                f"{type(obj).__name__} is not Opik-shaped: it needs generate_string or "
                "agenerate_string, or the provider-response methods"
            )
        model = user_text(
            obj, lambda: getattr(obj, "model_name", None) or type(obj).__name__, "model_name"
        )
        super().__init__(obj, model, use_structured_output=use_structured_output)

    async def _ask(self, messages: Sequence[Message], schema: type[BaseModel] | None) -> Any:
        payload = [{"role": m["role"], "content": m["content"]} for m in messages]
        ways = [
            (names, args, given)
            for names, args, given in (
                (_CHAT, (), {"messages": payload}),
                (_STRING, (), {"input": prompt_text(messages)}),
                (_PROVIDER, (payload,), {}),
            )
            if _has(self.obj, *names)
        ]
        for i, (names, args, given) in enumerate(ways):
            try:
                reply = await _either(self.obj, *names, args, ("response_format", schema), given)
            except NotImplementedError:
                if i == len(ways) - 1:
                    raise
                continue
            return _provider_reply(reply)
        raise NotImplementedError(f"{type(self.obj).__name__} has no Opik method to call")


async def _either(
    obj: Any,
    sync_name: str,
    async_name: str,
    args: tuple[Any, ...],
    option: tuple[str, Any],
    given: dict[str, Any] | None = None,
) -> Any:
    """``obj``'s blocking or async method, as :func:`contextlens.sync.call_either` chooses
    (one that raises ``NotImplementedError`` is left for the other); each gets ``given`` and,
    when it takes it and its value is not None, the keyword ``option``."""
    sync, amethod = _bound(obj, sync_name), _async_method(obj, async_name)
    if sync is None and amethod is None:
        raise NotImplementedError(f"{type(obj).__name__} has neither {sync_name} nor {async_name}")
    blocking = functools.partial(_with(sync, option, given), *args) if sync else None
    awaited = functools.partial(_with(amethod, option, given), *args) if amethod else None
    return await call_either(obj, blocking, awaited, names=(sync_name, async_name))


def _with(
    method: Callable[..., Any], option: tuple[str, Any], given: dict[str, Any] | None
) -> Callable[..., Any]:
    """``method`` with the keywords ``given`` and ``option`` (see :func:`_either`)."""
    extra = dict(given or {})
    name, value = option
    if value is not None and _takes(_unbound(method), name):
        extra[name] = value

    def call(*args: Any) -> Any:
        return method(*args, **extra)

    return call


@dataclass(frozen=True)
class _Said:
    """What a provider response said: its text, token usage and (LiteLLM's) cost."""

    text: str
    usage: Usage
    cost: float | None


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _provider_reply(response: Any) -> Any:
    """A provider response (LiteLLM's, OpenAI's, or a dict of that shape) as :class:`_Said`,
    a chat message (``{"role": "assistant", "content": ...}``) as its text; anything else
    (text, a schema instance, a pair) as it is."""
    if isinstance(response, dict) and set(response) <= {"role", "content", "name"}:
        content = response.get("content")
        return content if isinstance(content, str) else response
    choices = _field(response, "choices")
    if isinstance(response, (str, BaseModel, tuple)) or not choices:
        return response
    content = _field(_field(choices[0], "message"), "content")
    if not isinstance(content, str):
        return response
    usage = _field(response, "usage")
    prompt, completion = _field(usage, "prompt_tokens"), _field(usage, "completion_tokens")
    hidden = getattr(response, "_hidden_params", None)
    return _Said(
        content,
        Usage(
            prompt if isinstance(prompt, int) else 0,
            completion if isinstance(completion, int) else 0,
        ),
        _cost(hidden.get("response_cost")) if isinstance(hidden, dict) else None,
    )
