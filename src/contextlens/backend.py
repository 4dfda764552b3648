"""The backend contract: what a chat backend takes, returns and raises.

A backend is transport only. It turns chat messages (and, when it can, a reply schema) into a
:class:`Completion`, and when a call fails it raises one of three kinds of
:class:`BackendError`, so the engine treats every backend alike:

- :class:`RateLimited`: the provider says to slow down (HTTP 429, or 503 / 529 overload). The
  limiter lowers the concurrency of the backend and the call is retried, after the provider's
  ``retry_after`` when it sent one.
- :class:`TransientError`: the same call may succeed later (connection refused or dropped, a
  timeout, HTTP 408 / 409 / 5xx). Retried with back-off.
- :class:`FatalError`: it will not (bad request, authentication, an unusable reply body).
  Not retried.

A backend that enforces the reply schema itself (structured output) raises
:class:`InvalidReply` when the model's answer does not fit it; the judge then re-asks once with
the error, as for any reply that does not validate.

Any other exception from a backend counts as fatal. Backends that wrap another library
(LangChain, LiteLLM, an SDK client) map that library's exceptions into these kinds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypedDict

from pydantic import BaseModel

from contextlens.errors import ContextLensError
from contextlens.redact import redact

__all__ = [
    "BackendConnectionError",
    "BackendError",
    "BackendTimeout",
    "ChatBackend",
    "Completion",
    "FatalError",
    "FormatRefused",
    "InvalidReply",
    "JudgeNotReady",
    "Message",
    "RateLimited",
    "ReplyFormat",
    "TransientError",
    "Usage",
    "http_error",
    "parse_retry_after",
]


class Message(TypedDict):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass
class Usage:
    """Token counts of one or more calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Completion:
    """A backend's raw reply: text, usage, latency, and the parsed object when the
    backend enforced the schema itself (structured output).

    ``cost`` is the USD the backend says the call cost (a user's model that reports its own);
    None lets the price table estimate it from the usage. ``constrained`` says whether the
    reply was decoded under the schema; None leaves it to the backend's ``constrained``. A
    reply that was not is read leniently where a schema allows it (a verdict ``"Yes."`` is
    ``"yes"``); a constrained one stays strict.
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    latency: float = 0.0
    parsed: Any = None
    cost: float | None = None
    constrained: bool | None = None


class ReplyFormat(Protocol):
    """How a backend asks for its replies' format
    (:class:`~contextlens.judges.formats.FormatNegotiation` is the one contextlens has).

    ``mode`` is the setting (``"auto"``, ``"json_schema"``, ``"json_object"``, ``"off"``) and
    part of the cache key; ``current`` the format asked for now (``"off"``: the prompt alone).
    """

    @property
    def mode(self) -> str: ...

    @property
    def current(self) -> str: ...

    def reply_options(
        self, schema: type[BaseModel] | None, messages: Sequence[Message], max_tokens: int | None
    ) -> tuple[str, dict[str, Any]]:
        """The format in use and the request fields that shape the reply (``max_tokens``,
        ``response_format``)."""
        ...

    def prompt_for(
        self, messages: Sequence[Message], schema: type[BaseModel] | None, sent: str
    ) -> list[Message]:
        """The messages as sent in the format ``sent``."""
        ...


class ChatBackend(ABC):
    """Transport to a chat model: messages in, raw reply out. No parsing, no retries.

    A backend subclasses this and declares what it is; what it does not declare keeps the
    default below. The engine reads these attributes of a backend and nothing else. An object
    of another class that has ``name``, ``model``, ``key``, ``params``,
    ``use_structured_output`` and ``complete`` is adapted once, when contextlens is handed it
    (:func:`~contextlens.judges.foreign.as_chat_backend`).

    Every backend declares:
        name: the kind of backend (``"openai-compat"``, ``"langchain"`` ...).
        model: the model name, as shown (and tokenised, where its tokenizer is known).
        key: what shares a concurrency limit: every call with the same key, from any metric
            or run, goes through one limiter. Name the endpoint and the model.
        complete: see below.

    Declared where they differ from the default:
        params: what changes replies besides the messages (endpoint, temperature, seed ...);
            JSON-serialisable. With ``name``, ``model``, ``use_structured_output`` and the
            reply format's ``mode`` it is the backend's part of the cache key. Default none.
        formats: how it asks for the reply's format (None: it sends the messages as they are).
        use_structured_output: whether :meth:`complete` asks the model to follow ``schema``
            (default: it negotiates a format other than ``"off"``).
        constrained: whether its text replies are decoded under the schema (grammar, JSON
            schema), as far as it knows (default: the format it asks for now is not
            ``"off"``; without a format negotiation, ``use_structured_output``). A reply that
            says otherwise (:class:`Completion`) wins.
        concurrency: its slots, the calls in flight at most (None: the engine's default, or
            for a local server what it reports, else what a ramp finds). A run that sets a
            bound of its own uses that.
        timeout: seconds per call, used unless the judge was given a retry policy (None: the
            policy's).
        local: a server on this machine or network: asked as many calls at once as
            :meth:`server_slots` reports, else as many as a ramp over the first calls finds
            it serves without slowing down (one at first, doubled up to the engine's
            default of 16).
        max_tokens: the completion tokens a call may take (None: sized from the reply
            schema).
        price_key: the model name the price table reads its calls' cost by (default
            ``model``; None: its calls have no price, so no cost cap can bound them).
        user_object: it calls an object the user made, whose exceptions are the user's.
        batched: its calls wait for a provider's batch (:mod:`contextlens.judges.batching`):
            they have no per-call timeout, and may wait up to the batch's window.
        preflight: raises :class:`JudgeNotReady` when no call could succeed (a key that is
            not set); called before a run's first call.
        server_slots: how many calls a local server serves at once, when it says (asked
            once, before the first call; an exception is taken for "it does not say").

    :meth:`complete` raises :class:`RateLimited`, :class:`TransientError` or
    :class:`FatalError` (see the module docstring); it never sleeps or retries.
    """

    name: str
    model: str
    formats: ReplyFormat | None = None
    concurrency: int | None = None
    timeout: float | None = None
    local: bool = False
    max_tokens: int | None = None
    user_object: bool = False
    batched: bool = False

    @property
    @abstractmethod
    def key(self) -> str:
        """What shares a concurrency limit: the endpoint and the model."""

    @property
    def params(self) -> Mapping[str, Any]:
        """What changes replies besides the messages (part of the cache key)."""
        return {}

    @property
    def use_structured_output(self) -> bool:
        """Whether :meth:`complete` asks the model to follow the reply schema."""
        return self.formats is not None and self.formats.mode != "off"

    @property
    def constrained(self) -> bool:
        """Whether its text replies are decoded under the schema."""
        if self.formats is not None:
            return self.formats.current != "off"
        return self.use_structured_output

    @property
    def price_key(self) -> str | None:
        """The model name its calls are priced by (None: they have no price)."""
        return self.model

    def preflight(self) -> None:
        """Raise :class:`JudgeNotReady` when no call could succeed; by default, nothing."""
        return None

    async def server_slots(self) -> int | None:
        """How many calls the server serves at once, when it says; by default it does not."""
        return None

    @abstractmethod
    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        """Send the messages; with ``schema`` and ``use_structured_output``, ask the model
        to answer in that schema."""


class JudgeNotReady(ContextLensError):
    """A judge that cannot be called as it is set up (a key variable not set): said before
    the run's first call, naming what to set."""


class BackendError(ContextLensError):
    """A backend call failed. Raise one of its three kinds, not this class itself.

    ``status`` is the HTTP status when there was one; ``retry_after`` the provider's
    ``Retry-After`` in seconds when it sent one.
    """

    kind: ClassVar[str] = "fatal"
    retryable: ClassVar[bool] = False

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = str(self)
        self.status = status
        self.retry_after = retry_after


class RateLimited(BackendError):
    """The provider asks to slow down (429, or 503 / 529 overload): back off and retry."""

    kind = "rate_limited"
    retryable = True


class TransientError(BackendError):
    """A fault that may pass (connection, timeout, 408 / 409 / 5xx): retry with back-off."""

    kind = "transient"
    retryable = True


class FatalError(BackendError):
    """A failure that another try will not mend (4xx, an unusable reply): not retried."""

    kind = "fatal"


class InvalidReply(FatalError):
    """The model answered, but its structured reply does not fit the schema; ``raw`` is the
    reply's text when the backend has it. Re-asked once by the judge."""

    kind = "invalid_reply"

    def __init__(self, message: str, *, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = None if raw is None else redact(raw)


class FormatRefused(TransientError):
    """The server refused the reply format that was asked for (``response_format``); the
    backend has stepped down to the next format it knows, so the call is retried at once."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, status=status, retry_after=0.0)


class BackendTimeout(TransientError):
    """No reply within the time allowed."""


class BackendConnectionError(TransientError):
    """The server could not be reached (``connected=False``: the call never left) or dropped
    the connection before replying (``connected=True``, also when it cannot be told): such a
    call may or may not have reached the server."""

    def __init__(self, message: str, *, connected: bool = True) -> None:
        super().__init__(message)
        self.connected = connected


#: Statuses that mean "too much load": the limiter backs off on them.
OVERLOAD_STATUSES = frozenset({429, 503, 529})


def http_error(status: int, message: str, retry_after: float | None = None) -> BackendError:
    """The kind of error an HTTP error status is, with ``status`` and ``retry_after`` set."""
    kind: type[BackendError]
    if status in OVERLOAD_STATUSES:
        kind = RateLimited
    elif status in (408, 409) or status >= 500:
        kind = TransientError
    else:
        kind = FatalError
    return kind(f"HTTP {status}: {message}", status=status, retry_after=retry_after)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a (possibly fractional) number of
    seconds or an HTTP date; ``None`` when absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from datetime import datetime, timezone
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return seconds if 0 <= seconds < float("inf") else None  # NaN fails the test too


def retry_after_from(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI's) or ``Retry-After`` headers."""
    if not headers:
        return None
    millis = parse_retry_after(_header(headers, "retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    return parse_retry_after(_header(headers, "retry-after"))


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # a plain dict is not case-insensitive
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return None if value is None else str(value)
