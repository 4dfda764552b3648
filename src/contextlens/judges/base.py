"""The judge protocols: what a backend sends and what a judge returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypedDict, TypeVar, runtime_checkable

from pydantic import BaseModel

from contextlens.errors import ContextLensError

T = TypeVar("T", bound=BaseModel)


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
    backend enforced the schema itself (structured output)."""

    text: str
    usage: Usage = field(default_factory=Usage)
    latency: float = 0.0
    parsed: Any = None


@dataclass
class Judgement(Generic[T]):
    """A validated judge reply."""

    output: T
    raw: str
    usage: Usage
    latency: float
    attempts: int = 1


@runtime_checkable
class ChatBackend(Protocol):
    """Transport to a chat model: messages in, raw reply out. No parsing, no retries."""

    name: str
    model: str

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        """Send the messages; when ``schema`` is given and the backend supports it, ask
        the model to answer in that schema."""
        ...


@runtime_checkable
class Judge(Protocol):
    """Prompt messages and a pydantic schema in, a validated :class:`Judgement` out.

    Raises :class:`contextlens.errors.JudgeError` when no valid reply could be had.
    """

    name: str

    async def judge(self, messages: Sequence[Message], schema: type[T]) -> Judgement[T]: ...


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


class BackendError(ContextLensError):
    """A backend call failed (transport, HTTP status or an unusable reply body)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self._retryable = retryable

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed when tried again."""
        return self._retryable


class BackendHTTPError(BackendError):
    """The server answered with an error status.

    ``retry_after`` is the server's ``Retry-After`` in seconds, when it sent one.
    Retryable for 408, 409, 429 and 5xx.
    """

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(
            f"HTTP {status}: {message}",
            retryable=status in (408, 409, 429) or status >= 500,
        )
        self.status = status
        self.retry_after = retry_after


class BackendTimeout(BackendError):
    """The call did not complete within the backend's timeout (retryable)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class BackendConnectionError(BackendError):
    """The server could not be reached or dropped the connection (retryable)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)
