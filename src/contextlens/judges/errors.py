"""Other libraries' exceptions as the three kinds of the backend contract.

LangChain models, LiteLLM and provider SDKs (openai, anthropic, httpx underneath) raise their
own exception types. :func:`as_backend_error` reads what they share (an HTTP status, the
response headers, the class names of a timeout or a connection failure) without importing any
of them, so a rate limit is retried after its ``Retry-After`` and slows the limiter whichever
library reported it. The original is kept as the mapped error's ``__cause__``;
:func:`user_errors` collects the users' own exceptions that failed a call for good, for a
surface that lets them through.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from contextlens.backend import (
    BackendConnectionError,
    BackendError,
    BackendTimeout,
    FatalError,
    InvalidReply,
    RateLimited,
    http_error,
    retry_after_from,
)
from contextlens.errors import ContextLensError, described

__all__ = ["as_backend_error", "is_reply_error", "note_failure", "user_errors"]

_MAX_CHARS = 300


def _status(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        for attr in ("status_code", "status", "http_status", "code"):
            value = getattr(holder, attr, None)
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
                return value
    return None


def _headers(exc: BaseException) -> Mapping[str, str] | None:
    for value in (
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
        getattr(exc, "litellm_response_headers", None),
    ):
        if isinstance(value, Mapping) and value:
            return value
        if value is not None and hasattr(value, "items") and hasattr(value, "get"):
            return value  # httpx.Headers and the like
    return None


def _names(exc: BaseException) -> str:
    return " ".join(c.__name__.lower() for c in type(exc).__mro__)


def _message(exc: BaseException) -> str:
    text = described(exc)
    return text if len(text) <= _MAX_CHARS else text[:_MAX_CHARS] + "..."


def is_reply_error(exc: BaseException) -> bool:
    """Whether ``exc`` says a structured reply did not parse or validate (pydantic's
    ``ValidationError``, a JSON decode error, LangChain's ``OutputParserException``) rather
    than that the call failed."""
    if isinstance(exc, json.JSONDecodeError):
        return True
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"ValidationError", "OutputParserException", "JSONDecodeError"})


def as_backend_error(exc: BaseException) -> BackendError:
    """``exc`` as a :class:`RateLimited`, transient or :class:`FatalError` error.

    An HTTP status decides when there is one (429 and 503 / 529 rate-limited; 408, 409 and
    5xx transient; other 4xx fatal), with the ``Retry-After`` of the response headers.
    Without one, timeouts and connection failures (by type or class name) are transient and
    a class named for a rate limit is rate-limited; anything else is fatal.
    """
    if isinstance(exc, BackendError):
        return exc
    message = _message(exc)
    headers = _headers(exc)
    retry_after = retry_after_from(headers)
    status = _status(exc)
    names = _names(exc)
    if status is not None:
        return http_error(status, message, retry_after)
    if "ratelimit" in names or "overloaded" in names:
        return RateLimited(message, retry_after=retry_after)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or "timeout" in names:
        return BackendTimeout(message)
    if isinstance(exc, ConnectionRefusedError) or "connecterror" in names:
        return BackendConnectionError(message, connected=False)
    if isinstance(exc, ConnectionError) or "connection" in names:
        return BackendConnectionError(message)
    return FatalError(message)


_user_errors: ContextVar[list[BaseException] | None] = ContextVar(
    "contextlens_user_errors", default=None
)


@contextmanager
def user_errors() -> Iterator[list[BaseException]]:
    """The exceptions of users' models that failed a judge call for good inside the block
    (tasks it starts included), in order: for a surface that lets a model's own exception
    through, as Opik's does."""
    found: list[BaseException] = []
    token = _user_errors.set(found)
    try:
        yield found
    finally:
        _user_errors.reset(token)


def note_failure(exc: BaseException, *, users: bool) -> None:
    """A judge call failed for good with ``exc``: when it is a fatal error caused by the
    exception of an object the user made (``users``: the backend calls one, its
    ``user_object``; it maps the exception and keeps it as ``__cause__``), that exception is
    noted for :func:`user_errors`. A backend of contextlens's own (LiteLLM, the native one)
    lets nothing through: its errors reach the caller masked. Nothing happens outside such a
    block."""
    found = _user_errors.get()
    if not users or found is None or not isinstance(exc, FatalError):
        return
    if isinstance(exc, InvalidReply):
        return
    cause = exc.__cause__
    if cause is not None and not isinstance(cause, ContextLensError):
        found.append(cause)
