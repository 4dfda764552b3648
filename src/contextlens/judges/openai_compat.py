"""A :class:`~contextlens.backend.ChatBackend` for any OpenAI-compatible chat API.

Transport only: one POST to ``{base_url}/chat/completions`` per call, no parsing of the
content, no retries, no sleeping. Failures are raised as the backend contract's kinds
(:mod:`contextlens.backend`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import time
import urllib.request
from collections.abc import AsyncGenerator, Sequence
from functools import cached_property
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
import pydantic_core
from pydantic import BaseModel

from contextlens.backend import (
    BackendConnectionError,
    BackendError,
    BackendTimeout,
    ChatBackend,
    Completion,
    FatalError,
    InvalidReply,
    JudgeNotReady,
    Message,
    Usage,
    http_error,
    retry_after_from,
)
from contextlens.judges.formats import FormatNegotiation
from contextlens.judges.spec import JudgeSpec, backend_kind
from contextlens.redact import logger, redact, register_secret
from contextlens.sync import PerLoop

__all__ = ["DEFAULT_BASE_URL", "OpenAICompatBackend", "is_local"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Seconds per call for a remote API, and for a server on this machine or network (a model on
#: a CPU takes its time, and nobody else is kept waiting).
DEFAULT_TIMEOUT, LOCAL_TIMEOUT = 60.0, 300.0
#: The largest reply body read, in bytes, as sent and as decoded (a gzip body that inflates
#: past it is cut off there): a judge's reply is a few kilobytes of JSON.
DEFAULT_MAX_REPLY_BYTES = 4_000_000
#: Token counts a server may report for one call; larger ones (or negative) are not believed.
MAX_REPORTED_TOKENS = 10_000_000
#: Seconds that asking a local server how many requests it serves at once may take in all,
#: the most of each reply read, and the largest count believed.
PROBE_TIMEOUT, PROBE_MAX_BYTES, MAX_REPORTED_SLOTS = 3.0, 1_000_000, 4096
_MAX_ERROR_CHARS = 300
_READ_CHUNK = 65_536

log = logger("contextlens.judge")


class _LoopSession:
    """The aiohttp session of one event loop, closed when that loop shuts down.

    A session belongs to the loop it was opened in. Besides :meth:`aclose`, an async
    generator parked at its ``yield`` closes it: ``asyncio.run`` (and every runner that
    calls ``loop.shutdown_asyncgens()``) finalises it before closing the loop, so a backend
    used from successive ``asyncio.run`` calls never leaks a session.
    """

    def __init__(self, base_url: str, timeout: float) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
        )
        self.proxy = _env_proxy(base_url)
        self._closer = self._close_at_shutdown()
        self._parked = False

    async def ready(self) -> _LoopSession:
        """The session, its closer parked at the loop's shutdown (on first use)."""
        if not self._parked:
            self._parked = True
            await self._closer.__anext__()
        return self

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self.session.close()

    async def aclose(self) -> None:
        if self._parked:
            await self._closer.aclose()
        else:
            await self.session.close()


class OpenAICompatBackend(ChatBackend):
    """Chat completions over HTTP against OpenAI or any server speaking its API.

    Args:
        model: the model name sent in each request.
        base_url: API root (e.g. ``http://127.0.0.1:8000/v1``); default env
            ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``. Credentials in it
            (``http://user:key@host/v1``) are sent as basic auth (instead of the key) and
            kept out of the URL the backend shows, keys and logs.
        api_key: sent as ``Authorization: Bearer``; default env ``OPENAI_API_KEY``. When
            neither is set (or ``api_key=""``) no Authorization header is sent.
        temperature, seed: sent when not ``None``.
        max_tokens: the completion tokens allowed per call; ``None`` sizes them from the
            reply schema (:func:`~contextlens.judges.schema.reply_token_budget`), so a reply
            cannot run away.
        timeout: seconds per call from when it is sent (connecting, sending, reading);
            default 60, or 300 for a server on this machine or the local network.
        structured_output: ``"auto"`` (default), ``"json_schema"``, ``"json_object"`` or
            ``"off"``: see :mod:`contextlens.judges.formats`. ``use_structured_output``
            (True/False) is the older switch: True is ``"auto"``, False ``"off"``.
        concurrency: calls in flight at most; ``None`` takes what a local server reports
            (:meth:`server_slots`), else what a ramp over the first calls finds for a local
            server, and the engine's default for a remote one.
        extra_body: merged into every request body last (so it may override fields).
        headers: extra HTTP headers.
        max_reply_bytes: the largest reply read (as sent, and as decoded); a larger one is an
            invalid reply, read no further.

    The transport is aiohttp: at dozens of calls in flight it spends a fraction of httpx's
    client CPU per call (``benchmarks/bench_transport.py``). One session is kept per event
    loop, so the object may be used from successive ``asyncio.run`` calls; a loop's session
    is closed when the loop shuts down, or earlier by :meth:`aclose`.
    """

    name = "openai-compat"
    formats: FormatNegotiation
    timeout: float

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float | None = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        use_structured_output: bool | None = None,
        structured_output: str | None = None,
        concurrency: int | None = None,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.model = model
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        url, self._basic = _without_credentials(url.rstrip("/"))
        self.base_url = url  # never holds credentials: it is in keys, messages and the cache
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        register_secret(self._api_key)
        if self._basic is not None:
            register_secret(self._basic.password)
            register_secret(self._basic.encode().split()[-1])  # as a server may echo it
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.local = is_local(self.base_url)
        if timeout is None:
            timeout = LOCAL_TIMEOUT if self.local else DEFAULT_TIMEOUT
        self.timeout = timeout
        self.concurrency = concurrency
        self.formats = FormatNegotiation(
            structured_output if structured_output is not None else use_structured_output
        )
        self.extra_body = dict(extra_body or {})
        self.headers = dict(headers or {})
        if max_reply_bytes < 1:
            raise ValueError(f"max_reply_bytes must be >= 1, got {max_reply_bytes}")
        self.max_reply_bytes = max_reply_bytes
        self._sessions = PerLoop(lambda: _LoopSession(self.base_url, self.timeout))

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
            "structured_output": self.formats.mode,
            "extra_body": self.extra_body,
        }

    def preflight(self) -> None:
        """:class:`JudgeNotReady` for the OpenAI API with no key: no call could succeed."""
        authorised = self._api_key or self._basic is not None
        authorised = authorised or any(h.lower() == "authorization" for h in self.headers)
        if not authorised and urlsplit(self.base_url).hostname == "api.openai.com":
            raise JudgeNotReady(
                f"the judge openai:{self.model} needs an API key: set OPENAI_API_KEY (or "
                "give the URL of a server that needs none: http://HOST:PORT/v1#MODEL)"
            )

    async def server_slots(self) -> int | None:
        """How many requests a local server serves at once, where it says so; None for a
        remote server, or one that does not say within :data:`PROBE_TIMEOUT` seconds.

        Asked in turn, under the server's root: llama.cpp's ``GET /props`` (``total_slots``,
        its ``--parallel``), its ``GET /slots`` (one entry per slot), then TGI's ``GET /info``
        (``max_concurrent_requests``, beyond which it refuses requests). vLLM and Ollama do
        not say over HTTP (vLLM's ``/metrics`` has no ``max_num_seqs``, Ollama's
        ``OLLAMA_NUM_PARALLEL`` is not in ``/api/ps`` or ``/api/show``): None. A probe that
        fails, answers an error or something unreadable is a server that did not say.
        """
        if not self.local:
            return None
        try:
            return await asyncio.wait_for(self._ask_slots(), PROBE_TIMEOUT)
        except asyncio.TimeoutError:
            log.debug("%s: no slot count within %gs", self.base_url, PROBE_TIMEOUT)
            return None

    async def _ask_slots(self) -> int | None:
        opened = await self._sessions.get().ready()
        for path, read in _SLOT_PROBES:
            data = await self._probe(opened, endpoint(self.base_url, path, root=True))
            slots = read(data)
            if slots is not None:
                log.debug("%s: %d slot(s), from GET %s", self.base_url, slots, path)
                return slots
        return None

    async def _probe(self, opened: _LoopSession, url: str) -> Any:
        """The JSON a GET of ``url`` answers with 200, else None (never raises)."""
        try:
            async with opened.session.get(
                url,
                headers=self._request_headers(),
                proxy=opened.proxy,
                allow_redirects=False,
            ) as response:
                if response.status != 200:
                    return None
                if (response.content_length or 0) > PROBE_MAX_BYTES:
                    return None
                body = bytearray()
                async for chunk in response.content.iter_chunked(_READ_CHUNK):
                    body += chunk
                    if len(body) > PROBE_MAX_BYTES:
                        return None
            return json.loads(body)
        except (aiohttp.ClientError, ValueError, RecursionError, UnicodeDecodeError):
            return None

    @property
    def key(self) -> str:
        """Stable identity of the endpoint and model, for caching and rate limiting."""
        return f"openai-compat:{self.base_url}#{self.model}"

    # -- sessions ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the running loop's HTTP session and forget those of closed loops."""
        opened = self._sessions.pop()
        if opened is not None:
            await opened.aclose()

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
        sent, options = self.formats.reply_options(schema, messages, self.max_tokens, shared=True)
        prompt = self.formats.prompt_for(messages, schema, sent)
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in prompt]}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.seed is not None:
            body["seed"] = self.seed
        body.update(options)
        body.update(self.extra_body)
        return body

    def _request_headers(self) -> dict[str, str]:
        """The headers of every request (made once; aiohttp copies them per request)."""
        return self._headers

    @cached_property
    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._basic is not None:  # credentials given in the URL win over the key
            headers["Authorization"] = self._basic.encode()
        elif self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers.update(self.headers)
        return headers

    @cached_property
    def _json_headers(self) -> dict[str, str]:
        return {**self._request_headers(), "Content-Type": "application/json"}

    @cached_property
    def _completions_url(self) -> str:
        return endpoint(self.base_url, "/chat/completions")

    def _redact(self, text: str) -> str:
        """``text`` shortened, with the API key (if any) masked."""
        text = text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return redact(text)

    async def _read(self, response: aiohttp.ClientResponse, limit: int) -> bytes:
        """The reply body, read no further than ``limit`` bytes (sent and decoded)."""
        if response.content_length is not None and response.content_length > limit:
            raise InvalidReply(
                f"the reply is {response.content_length:,} bytes, over the limit of "
                f"{limit:,}; not read"
            )
        if response.content_length is not None and "Content-Encoding" not in response.headers:
            return await response.read()  # no larger than it says: read at once
        body = bytearray()
        async for chunk in response.content.iter_chunked(_READ_CHUNK):
            body += chunk
            if len(body) > limit:
                prefix = bytes(body[:_MAX_ERROR_CHARS]).decode("utf-8", errors="replace")
                raise InvalidReply(
                    f"the reply is over the limit of {limit:,} bytes (decoded); not read further",
                    raw=prefix,
                )
        return bytes(body)

    async def exchange(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        data: Any = None,
        limit: int | None = None,
    ) -> bytes:
        """One request to the server, with this backend's session, headers and key: the body
        of its 2xx reply, read no further than ``limit`` bytes (default
        :attr:`max_reply_bytes`; over it, :class:`InvalidReply`).

        Raises :class:`BackendTimeout` and :class:`BackendConnectionError` on transport
        failures, :class:`FatalError` for a redirect (never followed: the key would go with
        it), and the kind of an error status (:func:`~contextlens.backend.http_error`).
        """
        opened = await self._sessions.get().ready()
        sent = self._request_headers()
        if json_body is not None:
            data, sent = wire_json(json_body), self._json_headers
        try:
            async with opened.session.request(
                method,
                url,
                data=data,
                headers=sent,
                proxy=opened.proxy,
                allow_redirects=False,
            ) as response:
                status, headers, reason = response.status, response.headers, response.reason
                raw = await self._read(response, self.max_reply_bytes if limit is None else limit)
        except asyncio.TimeoutError as exc:  # aiohttp's connect and read timeouts
            raise BackendTimeout(
                f"{type(exc).__name__} after {self.timeout:g}s calling {url}"
            ) from None
        except aiohttp.ClientError as exc:
            raise BackendConnectionError(
                self._redact(f"{type(exc).__name__} calling {url}: {exc}"),
                connected=not isinstance(exc, aiohttp.ClientConnectorError),
            ) from None
        if 300 <= status < 400:
            where = headers.get("Location", "somewhere it does not say")
            raise FatalError(
                self._redact(
                    f"HTTP {status}: {url} redirects to {where}; redirects are not followed "
                    "(the key would go with it): give the judge the URL it ends at"
                ),
                status=status,
            )
        if status >= 400:
            text = raw[: 4 * _MAX_ERROR_CHARS].decode("utf-8", errors="replace")
            raise http_error(
                status, self._redact(_error_message(text, reason)), retry_after_from(headers)
            )
        return raw

    async def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
    ) -> Completion:
        """POST the messages; return the assistant's content, usage and latency.

        Raises what :meth:`exchange` raises (an error status refusing the reply format as
        :meth:`FormatNegotiation.refused` says), and :class:`FatalError` when a 200 reply
        has no usable content.
        """
        sent = self.formats.current
        body = self._body(messages, schema)
        started = time.perf_counter()
        try:
            raw = await self.exchange("POST", self._completions_url, json_body=body)
        except BackendError as error:
            raise (self.formats.refused(sent, error) if schema is not None else error) from None
        latency = time.perf_counter() - started
        text = raw[: 4 * _MAX_ERROR_CHARS].decode("utf-8", errors="replace")  # for messages
        try:
            data = read_json(raw)
        except (ValueError, RecursionError):
            raise FatalError(self._redact(f"reply is not JSON: {text!r}")) from None
        return self._completion(data, text, latency)

    def _completion(self, data: Any, text: str, latency: float) -> Completion:
        """The reply body ``data`` (``text``: its start, for messages) as a completion."""
        return Completion(text=self._content(data, text), usage=_usage(data), latency=latency)

    def _content(self, data: Any, text: str) -> str:
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise FatalError(self._redact(f"reply has no choices[0].message: {text!r}")) from None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content
        refusal = message.get("refusal") if isinstance(message, dict) else None
        detail = f"refusal: {refusal!r}" if refusal else f"message: {message!r}"
        raise FatalError(self._redact(f"reply has no text content ({detail})"))


def wire_json(body: Any) -> bytes:
    """``body`` as the JSON of a request (UTF-8, compact), written by pydantic-core: a
    quarter of the standard library's CPU on each judge call. Text the UTF-8 encoder refuses
    (a lone surrogate) is written as the standard library writes it, escaped."""
    try:
        return pydantic_core.to_json(body)
    except pydantic_core.PydanticSerializationError:
        return json.dumps(body).encode()


def read_json(raw: bytes) -> Any:
    """The JSON value of a reply body, read by pydantic-core; what it refuses and the standard
    library reads (a lone surrogate escape, UTF-16, a byte-order mark) as the library reads
    it. Raises ValueError (or RecursionError) for a body that is not JSON."""
    try:
        return pydantic_core.from_json(raw)
    except ValueError:
        return json.loads(raw)


def _slots(value: Any) -> int | None:
    """``value`` when it is a believable slot count: a whole number in [1,
    :data:`MAX_REPORTED_SLOTS`] (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= MAX_REPORTED_SLOTS else None


def _props_slots(data: Any) -> int | None:
    """llama.cpp's ``GET /props``: ``total_slots``."""
    return _slots(data.get("total_slots")) if isinstance(data, dict) else None


def _slot_list(data: Any) -> int | None:
    """llama.cpp's ``GET /slots``: a list with one object per slot."""
    if not isinstance(data, list) or not all(isinstance(slot, dict) for slot in data):
        return None
    return _slots(len(data))


def _tgi_slots(data: Any) -> int | None:
    """TGI's ``GET /info``: ``max_concurrent_requests``."""
    return _slots(data.get("max_concurrent_requests")) if isinstance(data, dict) else None


#: Where local servers say how many requests they serve at once, in the order asked.
_SLOT_PROBES = (("/props", _props_slots), ("/slots", _slot_list), ("/info", _tgi_slots))


def _without_credentials(url: str) -> tuple[str, aiohttp.BasicAuth | None]:
    """``url`` without its user-info, and that user-info as HTTP basic auth (None: none)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    auth = aiohttp.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
    return parts._replace(netloc=netloc).geturl(), auth


def is_local(url: str) -> bool:
    """Whether ``url`` is on this machine or a private network (a server the user runs)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def endpoint(base_url: str, path: str, *, root: bool = False) -> str:
    """``path`` under ``base_url``, its query kept after it (a gateway's ``?api-version=``):
    ``http://h/v1?v=2`` and ``/chat/completions`` give ``http://h/v1/chat/completions?v=2``;
    ``root``: under the server's root, the API's ``/v1`` left out."""
    parts = urlsplit(base_url)
    prefix = parts.path.rstrip("/")
    if root:
        prefix = prefix.removesuffix("/v1")
    return urlunsplit(parts._replace(path=prefix + path))


def _env_proxy(url: str) -> str | None:
    """The proxy that ``HTTP(S)_PROXY`` / ``NO_PROXY`` give for ``url``, read once per session
    (aiohttp's ``trust_env`` would re-read them in a worker thread on every request)."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _error_message(text: str, reason: str | None) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the raw body."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip() or (reason or "")
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return text.strip() or (reason or "")


def _usage(data: dict[str, Any]) -> Usage:
    """The reply's token counts; a count that is not a whole number in [0,
    :data:`MAX_REPORTED_TOKENS`] is not believed (counted 0: a broken server must not make a
    cost, or fail a valid reply)."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    return Usage(
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if not (0 <= value <= MAX_REPORTED_TOKENS) or value != int(value):
        return 0
    return int(value)


@backend_kind("openai", prefixes=("openai:",), bare=lambda name: "/" not in name)
def _openai(spec: JudgeSpec) -> OpenAICompatBackend:
    """``openai:MODEL``, or a bare model name such as ``gpt-4o``: the OpenAI API."""
    return OpenAICompatBackend(spec.target, **spec.settings.given())


def _check_url(spec: JudgeSpec) -> None:
    """A ``ValueError`` naming the spec for a URL that cannot be reached as written: no
    model, no host, or a port that is not a number in 1-65535 (said now, not after every
    retry of a connection that can never be made)."""
    base_url, _, model = spec.target.partition("#")
    form = "expected http://HOST:PORT/v1#MODEL"
    parts = urlsplit(base_url)
    if not model or not parts.netloc:
        raise ValueError(f"judge spec {spec.target!r}: {form}")
    if not parts.hostname:
        raise ValueError(f"judge spec {spec.target!r}: no host in the URL; {form}")
    try:
        port = parts.port
    except ValueError:
        given = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        if given.isdigit():
            raise ValueError(
                f"judge spec {spec.target!r}: port {int(given)} is out of range (1-65535)"
            ) from None
        raise ValueError(
            f"judge spec {spec.target!r}: port {given!r} is not a number; {form}"
        ) from None
    if port == 0:
        raise ValueError(f"judge spec {spec.target!r}: port 0 is out of range (1-65535)")


@backend_kind("http", prefixes=("http://", "https://"), keep_prefix=True, check=_check_url)
def _http(spec: JudgeSpec) -> OpenAICompatBackend:
    """``http://HOST:PORT/v1#MODEL``: any OpenAI-compatible server."""
    base_url, _, model = spec.target.partition("#")
    return OpenAICompatBackend(model, base_url=base_url.rstrip("/"), **spec.settings.given())
