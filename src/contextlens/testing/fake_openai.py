"""A real HTTP server on 127.0.0.1 that speaks a subset of the OpenAI API, for tests.

Endpoints (each also answered without the ``/v1`` prefix):

* ``POST /v1/chat/completions`` - a chat completion whose content comes from ``replies``
  (consumed in order) then ``reply(request_json)``;
* ``POST /v1/embeddings`` - deterministic pseudo-embeddings (hash-seeded, unit length);
* ``GET /v1/models`` - one model;
* when ``slots`` is set, the count as one kind of server reports it (``slots_via``):
  llama.cpp's ``GET /props`` (``total_slots``), llama.cpp's ``GET /slots`` (one entry per
  slot) or TGI's ``GET /info`` (``max_concurrent_requests``); ``probe_fault`` makes those
  endpoints fail instead.

``serves`` is how many chat or embeddings requests the server works on at once: the others
wait their turn, in order of arrival, and their ``latency`` runs from when their turn comes,
so a call's latency grows when more are in flight than the server serves.

``formats`` lists the ``response_format`` types the server accepts; a chat request with
another is answered 500 with the message llama-cpp-python's server gives ("response_format:
Input should be ..."), as a server without that mode does.

Faults apply to chat calls only. For each chat call the fault is, in this order:

1. the next entry of ``script`` (popped), one of :data:`FAULTS`;
2. otherwise drawn from the rates with a uniform number that depends only on ``seed`` and
   the call index (so a run is reproducible whatever the thread timing): the rates are
   stacked in the order 429, 500, 503, timeout, truncated, garbage, and their sum must be
   <= 1. ``503`` is an overloaded server, with the ``Retry-After`` header.

Independently of faults, when more than ``max_in_flight`` requests (chat or embeddings)
are in flight, the extra ones get 429 at once, with the ``Retry-After`` header.

Tokens are estimated as ``ceil(len(text) / 4)`` characters per text (per message content,
and the ``response_format`` schema as compact JSON, for the prompt, as providers count it;
the content for the completion; per input for embeddings).
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

from contextlens.testing.fake_http import (
    PROBE_FAULTS,
    SLOTS_VIA,
    FakeHTTPServer,
    Turns,
    content_text,
    embedding,
    error_body,
    estimate_tokens,
    schema_text,
)

__all__ = [
    "DEFAULT_REPLY",
    "FAULTS",
    "PROBE_FAULTS",
    "SLOTS_VIA",
    "FakeOpenAIServer",
    "estimate_tokens",
]

DEFAULT_REPLY = '{"reason": "ok", "score": 1.0}'
"""The assistant content returned when neither ``replies`` nor ``reply`` decide."""

FAULTS = ("ok", "429", "500", "503", "timeout", "truncated", "garbage")
"""The fault names ``script`` accepts."""

GARBAGE = "Sorry, I can't answer that in the requested format."
_HISTORY = 10_000


class FakeOpenAIServer:
    """A threaded OpenAI-compatible HTTP server on 127.0.0.1 with latency, faults and counters.

    Use it as a context manager (or call :meth:`start` / :meth:`stop`)::

        with FakeOpenAIServer(latency=0.2) as server:
            backend = OpenAICompatBackend("fake-model", base_url=server.base_url)

    Args:
        latency: seconds from the arrival of a chat or embeddings call to its answer.
        max_in_flight: when set, requests beyond this many in flight get 429 at once.
        reply: request JSON -> assistant content; default returns :data:`DEFAULT_REPLY`.
        replies: scripted contents used first, in order (only by calls that answer content).
        script: fault names per chat call, consumed in order before the rates apply.
        fail_429_rate, fail_500_rate, fail_503_rate, timeout_rate, truncated_rate,
        garbage_rate: chances
            of each fault per chat call, drawn deterministically from ``seed`` and the call
            index. ``truncated`` cuts the content in the middle (``finish_reason="length"``);
            ``garbage`` answers content that is not JSON; ``timeout`` waits ``hang_time``
            seconds before answering normally.
        retry_after: the ``Retry-After`` header value of 429 and 503 replies (seconds, may
            be fractional); ``None`` sends none.
        hang_time: how long a ``timeout`` fault waits.
        seed: seed of the fault draws.
        model: the model id the server reports when the request names none.
        embedding_dim: length of the embedding vectors.
        port: 0 picks a free port.
        formats: the ``response_format`` types accepted (``"text"`` is a request without one).
        slots: the requests the server says it serves at once (None: it does not say; its
            slot endpoints answer 404, as a server without them).
        slots_via: where it says so, as which server: ``"props"`` (llama.cpp's ``GET
            /props``, ``total_slots``), ``"slots"`` (llama.cpp's ``GET /slots``, one entry
            per slot) or ``"info"`` (TGI's ``GET /info``, ``max_concurrent_requests``).
        probe_fault: one of :data:`PROBE_FAULTS`: every slot endpoint fails that way.
        serves: the chat and embeddings requests worked on at once (None: all); the others
            queue, in order of arrival, their ``latency`` starting when their turn comes.

    Counters (all reset by :meth:`reset`): ``calls`` (chat requests received, rejected ones
    included), ``embedding_calls``, ``prompt_tokens`` / ``completion_tokens`` (chat, estimated
    by :func:`estimate_tokens`), ``embedding_tokens``, ``status_counts`` (status -> count),
    ``in_flight`` / ``peak_in_flight`` (requests received and not yet answered, queued ones
    included), ``probes`` (the paths of the slot endpoints asked) with ``probe_headers``
    (their headers), and the bounded lists :attr:`requests`, :attr:`request_headers` and
    :attr:`response_formats`.
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        max_in_flight: int | None = None,
        reply: Callable[[dict[str, Any]], str] | None = None,
        replies: list[str] | None = None,
        script: list[str] | None = None,
        fail_429_rate: float = 0.0,
        fail_500_rate: float = 0.0,
        fail_503_rate: float = 0.0,
        timeout_rate: float = 0.0,
        truncated_rate: float = 0.0,
        garbage_rate: float = 0.0,
        retry_after: float | str | None = "0.05",
        hang_time: float = 10.0,
        seed: int = 0,
        model: str = "fake-model",
        embedding_dim: int = 384,
        host: str = "127.0.0.1",
        port: int = 0,
        formats: tuple[str, ...] = ("text", "json_object", "json_schema"),
        slots: int | None = None,
        slots_via: str = "props",
        probe_fault: str | None = None,
        serves: int | None = None,
    ) -> None:
        rates = (
            fail_429_rate,
            fail_500_rate,
            fail_503_rate,
            timeout_rate,
            truncated_rate,
            garbage_rate,
        )
        if any(r < 0 for r in rates) or sum(rates) > 1.0 + 1e-9:
            raise ValueError("fault rates must be >= 0 and sum to at most 1")
        unknown = [name for name in script or [] if name not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault names {unknown}; use {FAULTS}")
        if slots_via not in SLOTS_VIA:
            raise ValueError(f"slots_via must be one of {sorted(SLOTS_VIA)}, got {slots_via!r}")
        if probe_fault is not None and probe_fault not in PROBE_FAULTS:
            raise ValueError(f"probe_fault must be one of {PROBE_FAULTS}, got {probe_fault!r}")
        if serves is not None and serves < 1:
            raise ValueError(f"serves must be >= 1, got {serves}")
        self.latency = latency
        self.max_in_flight = max_in_flight
        self.reply = reply
        self.replies: list[str] = list(replies or [])
        self.script: list[str] = list(script or [])
        self.fail_429_rate = fail_429_rate
        self.fail_500_rate = fail_500_rate
        self.fail_503_rate = fail_503_rate
        self.timeout_rate = timeout_rate
        self.truncated_rate = truncated_rate
        self.garbage_rate = garbage_rate
        self.retry_after = retry_after
        self.hang_time = hang_time
        self.seed = seed
        self.model = model
        self.embedding_dim = embedding_dim
        self.host = host
        self.port = port
        self.formats = formats
        self.slots = slots
        self.slots_via = slots_via
        self.probe_fault = probe_fault
        self.serves = serves
        self._lock = threading.Lock()
        self._turns = Turns(serves)
        self._stopping = threading.Event()
        self._server: FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.in_flight = 0
        self.reset()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Bind and serve in a background daemon thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = FakeHTTPServer(self, (self.host, self.port))
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-openai-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers and close open connections."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stopped = True
        self._stopping.set()
        self._drop_connections(server)
        server.shutdown()
        server.server_close()
        self._drop_connections(server)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    @staticmethod
    def _drop_connections(server: FakeHTTPServer) -> None:
        with server.connections_lock:
            connections = list(server.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what an OpenAI client takes as its base URL."""
        if self._server is None:
            raise RuntimeError("the server is not running")
        return f"http://{self.host}:{self.port}/v1"

    # -- counters ----------------------------------------------------------------------

    def reset(self) -> None:
        """Zero the counters and forget the recorded requests (``script`` and ``replies``
        keep what is left of them; ``peak_in_flight`` restarts from the current count)."""
        with self._lock:
            self.calls = 0
            self.embedding_calls = 0
            self.prompt_tokens = 0
            self.completion_tokens = 0
            self.embedding_tokens = 0
            self.status_counts: dict[int, int] = {}
            self.peak_in_flight = self.in_flight
            self.probes: list[str] = []
            self.probe_headers: list[dict[str, str]] = []
            self._requests: deque[dict[str, Any]] = deque(maxlen=_HISTORY)
            self._headers: deque[dict[str, str]] = deque(maxlen=_HISTORY)
            self._response_formats: deque[dict[str, Any]] = deque(maxlen=_HISTORY)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the last 10,000 POST requests, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of the last 10,000 POST requests (same order as :attr:`requests`)."""
        with self._lock:
            return list(self._headers)

    @property
    def response_formats(self) -> list[dict[str, Any]]:
        """The ``response_format`` of chat requests that asked for ``json_schema``."""
        with self._lock:
            return list(self._response_formats)

    # -- request handling (called from handler threads) --------------------------------

    def _handle(
        self, route: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            over = self.max_in_flight is not None and self.in_flight > self.max_in_flight
            if route == "chat":
                index = self.calls
                self.calls += 1
                fmt = body.get("response_format")
                if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
                    self._response_formats.append(fmt)
            else:
                self.embedding_calls += 1
        served = False
        try:
            if not over:  # its turn, then the reply leaves `latency` after it
                served = self._turns.wait(self._stopping)
            due = time.monotonic() + self.latency
            if over:
                status, payload, extra = self._rate_limited("too many requests in flight")
            elif route == "chat":
                status, payload, extra = self._chat(body, index, due)
            else:
                status, payload, extra = 200, self._embeddings(body), {}
                self._wait_until(due)
        except Exception as exc:  # e.g. a failing ``reply`` function: show it to the client
            status, payload, extra = (
                500,
                error_body(f"fake server error: {exc!r}", "server_error"),
                {},
            )
        finally:
            if served:
                self._turns.done()
            with self._lock:
                self.in_flight -= 1
        with self._lock:
            self.status_counts[status] = self.status_counts.get(status, 0) + 1
        return status, payload, extra

    def _probed(self, path: str, headers: dict[str, str]) -> None:
        with self._lock:
            self.probes.append(path)
            self.probe_headers.append(headers)

    def _slots_body(self) -> Any:
        """``slots`` as the server of ``slots_via`` reports it."""
        if self.slots_via == "slots":
            return [
                {"id": i, "id_task": -1, "is_processing": False} for i in range(self.slots or 0)
            ]
        if self.slots_via == "info":
            return {
                "model_id": self.model,
                "max_concurrent_requests": self.slots,
                "router": "text-generation-router",
            }
        return {"total_slots": self.slots, "model_path": f"/models/{self.model}.gguf"}

    def _fault(self, index: int) -> str:
        with self._lock:
            if self.script:
                return self.script.pop(0)
        u = random.Random(self.seed * 1_000_003 + index).random()
        for name, rate in (
            ("429", self.fail_429_rate),
            ("500", self.fail_500_rate),
            ("503", self.fail_503_rate),
            ("timeout", self.timeout_rate),
            ("truncated", self.truncated_rate),
            ("garbage", self.garbage_rate),
        ):
            if u < rate:
                return name
            u -= rate
        return "ok"

    def _retry_after_header(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}

    def _rate_limited(self, message: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        body = error_body(message, "rate_limit_error", "rate_limit_exceeded")
        return 429, body, self._retry_after_header()

    def _wait_until(self, due: float) -> None:
        self._stopping.wait(max(0.0, due - time.monotonic()))

    def _chat(
        self, body: dict[str, Any], index: int, due: float
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """The reply to one chat call, sent at ``due`` (``hang_time`` later for a timeout);
        the reply is made while waiting, so its cost does not add to the latency."""
        kind = (body.get("response_format") or {}).get("type", "text")
        if kind not in self.formats:
            accepted = " or ".join(repr(f) for f in self.formats)
            message = f"response_format.type: Input should be {accepted}"
            return 500, error_body(message, "server_error"), {}
        fault = self._fault(index)
        if fault == "429":
            result = self._rate_limited("rate limit reached (injected)")
        elif fault == "500":
            result = 500, error_body("internal server error (injected)", "server_error"), {}
        elif fault == "503":
            body = error_body("the server is overloaded (injected)", "server_error")
            result = 503, body, self._retry_after_header()
        else:
            finish = "stop"
            if fault == "garbage":
                content = GARBAGE
            else:
                content = self._next_reply(body)
                if fault == "truncated":
                    content, finish = content[: len(content) // 2], "length"
            result = 200, self._chat_body(body, content, finish), {}
        self._wait_until(due)
        if fault == "timeout":
            self._stopping.wait(self.hang_time)
        return result

    def _next_reply(self, body: dict[str, Any]) -> str:
        with self._lock:
            if self.replies:
                return self.replies.pop(0)
        return self.reply(body) if self.reply is not None else DEFAULT_REPLY

    def _chat_body(self, request: dict[str, Any], content: str, finish: str) -> dict[str, Any]:
        messages = request.get("messages") or []
        prompt = sum(
            estimate_tokens(content_text(m.get("content"))) for m in messages if isinstance(m, dict)
        )
        prompt += estimate_tokens(schema_text(request.get("response_format")))
        completion = estimate_tokens(content)
        with self._lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _embeddings(self, request: dict[str, Any]) -> dict[str, Any]:
        raw = request.get("input", "")
        inputs = [raw] if isinstance(raw, str) else [content_text(x) for x in raw]
        tokens = sum(estimate_tokens(text) for text in inputs)
        with self._lock:
            self.embedding_tokens += tokens
        return {
            "object": "list",
            "model": request.get("model") or self.model,
            "data": [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": embedding(text, self.embedding_dim),
                }
                for i, text in enumerate(inputs)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _models_body(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "contextlens"}
            ],
        }
