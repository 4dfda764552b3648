"""A :class:`~contextlens.judges.base.ChatBackend` for any OpenAI-compatible chat API.

Transport only: one POST to ``{base_url}/chat/completions`` per call, no parsing of the
content, no retries, no sleeping. Failures become :class:`~contextlens.judges.base.BackendError`
subclasses that say whether a retry may help.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

import httpx
from pydantic import BaseModel

from contextlens.judges.base import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    Completion,
    Message,
    Usage,
    parse_retry_after,
)

__all__ = ["DEFAULT_BASE_URL", "OpenAICompatBackend"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_MAX_ERROR_CHARS = 300
_CALLS_PER_CLIENT = 8
_MAX_CLIENTS = 64


_ssl_contexts: dict[bool, ssl.SSLContext] = {}
_ssl_lock = threading.Lock()


def _ssl_context(base_url: str) -> ssl.SSLContext:
    """One shared context: verifying (loading the CA bundle takes ~50 ms) for https, a bare
    one for plain http, where it is never used (redirects are not followed)."""
    https = base_url.lower().startswith("https:")
    with _ssl_lock:
        if https not in _ssl_contexts:
            _ssl_contexts[https] = (
                httpx.create_ssl_context() if https else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            )
        return _ssl_contexts[https]


class _ClientShards:
    """The HTTP clients of one event loop.

    httpx's connection pool does work proportional to (queued requests x connections) on
    every request, so at a few dozen concurrent calls one client burns more CPU on pool
    bookkeeping than on I/O (a known httpx issue). Calls are therefore spread over several
    small clients, a new one opened when all have ``_CALLS_PER_CLIENT`` calls in flight.
    """

    def __init__(self, timeout: float, ssl_context: ssl.SSLContext) -> None:
        self._timeout = httpx.Timeout(timeout, pool=None)
        self._ssl_context = ssl_context
        self.clients: list[httpx.AsyncClient] = []
        self.loads: list[int] = []

    @contextlib.contextmanager
    def acquire(self) -> Iterator[httpx.AsyncClient]:
        """The least busy client (opening one more when all are busy), for one call."""
        index = min(range(len(self.loads)), key=self.loads.__getitem__, default=-1)
        if index < 0 or (
            self.loads[index] >= _CALLS_PER_CLIENT and len(self.clients) < _MAX_CLIENTS
        ):
            self.clients.append(
                httpx.AsyncClient(
                    timeout=self._timeout,
                    verify=self._ssl_context,
                    limits=httpx.Limits(
                        max_connections=_CALLS_PER_CLIENT,
                        max_keepalive_connections=_CALLS_PER_CLIENT,
                        keepalive_expiry=30,
                    ),
                )
            )
            self.loads.append(0)
            index = len(self.clients) - 1
        self.loads[index] += 1
        try:
            yield self.clients[index]
        finally:
            self.loads[index] -= 1

    async def aclose(self) -> None:
        clients, self.clients, self.loads = self.clients, [], []
        for client in clients:
            await client.aclose()


class OpenAICompatBackend:
    """Chat completions over HTTP against OpenAI or any server speaking its API.

    Args:
        model: the model name sent in each request.
        base_url: API root (e.g. ``http://127.0.0.1:8000/v1``); default env
            ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``.
        api_key: sent as ``Authorization: Bearer``; default env ``OPENAI_API_KEY``. When
            neither is set (or ``api_key=""``) no Authorization header is sent.
        temperature, seed, max_tokens: sent when not ``None``.
        timeout: seconds for connecting, sending and reading (waiting for a free pooled
            connection does not count).
        use_structured_output: when a schema is given, ask for it via
            ``response_format={"type": "json_schema", ...}``.
        extra_body: merged into every request body last (so it may override fields).
        headers: extra HTTP headers.

    HTTP clients are kept per event loop, so the object may be used from successive
    ``asyncio.run`` calls; :meth:`aclose` closes the current loop's clients.
    """

    name = "openai-compat"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float | None = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        use_structured_output: bool = False,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.use_structured_output = use_structured_output
        self.extra_body = dict(extra_body or {})
        self.headers = dict(headers or {})
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _ClientShards]
        self._clients = weakref.WeakKeyDictionary()
        self._clients_lock = threading.Lock()

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"OpenAICompatBackend(model={self.model!r}, base_url={self.base_url!r}, api_key={key})"
        )

    @property
    def params(self) -> dict[str, Any]:
        """The request parameters that change replies (part of the cache key)."""
        return {
            "base_url": self.base_url,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "extra_body": self.extra_body,
        }

    @property
    def key(self) -> str:
        """Stable identity of the endpoint and model, for caching and rate limiting."""
        return f"openai-compat:{self.base_url}#{self.model}"

    # -- clients -----------------------------------------------------------------------

    def _shards(self) -> _ClientShards:
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            shards = self._clients.get(loop)
            if shards is None:
                shards = _ClientShards(self.timeout, _ssl_context(self.base_url))
                self._clients[loop] = shards
            return shards

    async def aclose(self) -> None:
        """Close the running loop's HTTP clients and forget those of closed loops."""
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            shards = self._clients.pop(loop, None)
            for other in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[other]
        if shards is not None:
            await shards.aclose()

    async def __aenter__(self) -> OpenAICompatBackend:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- calls -------------------------------------------------------------------------

    def _body(self, messages: Sequence[Message], schema: type[BaseModel] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.seed is not None:
            body["seed"] = self.seed
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.use_structured_output and schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema.__name__,
                    "schema": schema.model_json_schema(),
                    "strict": False,
                },
            }
        body.update(self.extra_body)
        return body

    def _request_headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers.update(self.headers)
        return headers

    def _redact(self, text: str) -> str:
        """``text`` shortened, with the API key (if any) masked."""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        """POST the messages; return the assistant's content, usage and latency.

        Raises :class:`BackendHTTPError` on an error status, :class:`BackendTimeout` and
        :class:`BackendConnectionError` on transport failures, and a non-retryable
        :class:`BackendError` when a 200 reply has no usable content.
        """
        url = f"{self.base_url}/chat/completions"
        body = self._body(messages, schema)
        started = time.perf_counter()
        try:
            with self._shards().acquire() as client:
                response = await client.post(url, json=body, headers=self._request_headers())
        except httpx.TimeoutException as exc:
            raise BackendTimeout(
                f"{type(exc).__name__} after {self.timeout:g}s calling {url}"
            ) from None
        except httpx.TransportError as exc:
            raise BackendConnectionError(
                self._redact(f"{type(exc).__name__} calling {url}: {exc}")
            ) from None
        latency = time.perf_counter() - started
        if response.status_code >= 400:
            raise BackendHTTPError(
                response.status_code,
                self._redact(_error_message(response)),
                _retry_after(response.headers),
            )
        try:
            data = response.json()
        except ValueError:
            raise BackendError(
                self._redact(f"reply is not JSON: {response.text!r}"), retryable=False
            ) from None
        return Completion(text=self._content(data, response), usage=_usage(data), latency=latency)

    def _content(self, data: Any, response: httpx.Response) -> str:
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(
                self._redact(f"reply has no choices[0].message: {response.text!r}"),
                retryable=False,
            ) from None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content
        refusal = message.get("refusal") if isinstance(message, dict) else None
        detail = f"refusal: {refusal!r}" if refusal else f"message: {message!r}"
        raise BackendError(self._redact(f"reply has no text content ({detail})"), retryable=False)


def _error_message(response: httpx.Response) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the raw body."""
    try:
        data = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return response.text.strip() or response.reason_phrase


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI's) or ``Retry-After``."""
    millis = parse_retry_after(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    return parse_retry_after(headers.get("retry-after"))


def _usage(data: dict[str, Any]) -> Usage:
    try:
        usage = data.get("usage") or {}
        return Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
    except (TypeError, ValueError, AttributeError):
        return Usage()
