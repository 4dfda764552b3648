"""The HTTP side of :class:`~contextlens.testing.FakeOpenAIServer`: its threaded server,
its request handler, the slot probes it answers and the turns of a server that serves a
bounded number of requests at once. The handler hands each request to the fake's
``_handle`` (and its probe answers), so what the fake replies lives in one place."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import socket
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "PROBE_FAULTS",
    "SLOTS_VIA",
    "FakeHTTPServer",
    "Turns",
    "content_text",
    "embedding",
    "error_body",
    "estimate_tokens",
    "schema_text",
]

#: Where each kind of server reports its slots (``slots_via``).
SLOTS_VIA = {"props": "/props", "slots": "/slots", "info": "/info"}
#: What a slot probe may do instead of answering (``probe_fault``).
PROBE_FAULTS = ("500", "garbage", "hang")


def estimate_tokens(text: str) -> int:
    """Rough token count: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


def schema_text(response_format: Any) -> str:
    """The reply schema a request carries, as compact JSON: providers count it as prompt."""
    if not isinstance(response_format, dict):
        return ""
    inner = response_format.get("json_schema")
    schema = inner.get("schema") if isinstance(inner, dict) else response_format.get("schema")
    return json.dumps(schema, separators=(",", ":")) if schema else ""


def content_text(content: Any) -> str:
    """The text of a message content (a string, or a list of OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else json.dumps(content)


def embedding(text: str, dim: int) -> list[float]:
    """A unit vector seeded by the SHA-256 of ``text``: same text, same vector."""
    rng = random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, fake: Any, address: tuple[str, int]) -> None:
        self.fake = fake
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.stopped = False
        super().__init__(address, FakeHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet: clients that hang up (e.g. after their own timeout) are expected."""


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes
    server: FakeHTTPServer

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request logging."""

    def do_GET(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._route() == "models":
            self._send(200, fake._models_body())
        elif path in SLOTS_VIA.values() and fake.probe_fault is not None:
            fake._probed(path, dict(self.headers))
            self._probe_fault(fake.probe_fault, fake)
        elif fake.slots is not None and path == SLOTS_VIA[fake.slots_via]:
            fake._probed(path, dict(self.headers))
            self._send(200, fake._slots_body())
        else:
            self._send(404, error_body("not found", "invalid_request_error"))

    def _probe_fault(self, fault: str, fake: Any) -> None:
        if fault == "500":
            self._send(500, error_body("internal server error (injected)", "server_error"))
            return
        if fault == "hang":
            fake._stopping.wait(fake.hang_time)
        data = b"<html>not json</html>"
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client hung up (e.g. after its own timeout)
            self.close_connection = True

    def do_POST(self) -> None:
        route = self._route()
        body = self._read_json()
        if self.server.stopped:  # a stopped server answers nothing, even on an open connection
            self.close_connection = True
        elif route not in ("chat", "embeddings"):
            self._send(404, error_body("not found", "invalid_request_error"))
        elif body is None:
            self._send(400, error_body("invalid JSON body", "invalid_request_error"))
        else:
            status, payload, headers = self.server.fake._handle(route, body, dict(self.headers))
            if self.server.stopped:  # stopped meanwhile: the call is dropped, as in a crash
                self.close_connection = True
            else:
                self._send(status, payload, headers)

    def _route(self) -> str | None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.startswith("/v1/"):
            path = path[3:]
        return {"/chat/completions": "chat", "/embeddings": "embeddings", "/models": "models"}.get(
            path
        )

    def _read_json(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body = json.loads(raw)
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client hung up
            self.close_connection = True


def error_body(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code}}


class Turns:
    """At most ``serves`` requests worked on at once (None: all); the others wait, first come
    first served."""

    def __init__(self, serves: int | None) -> None:
        self.serves = serves
        self._busy = 0
        self._queue: deque[int] = deque()
        self._next = 0
        self._cond = threading.Condition()

    def wait(self, stopping: threading.Event) -> bool:
        """Wait for a turn; whether one was taken (False: no limit, or the server stopped)."""
        if self.serves is None:
            return False
        with self._cond:
            ticket = self._next
            self._next += 1
            self._queue.append(ticket)
            while self._queue[0] != ticket or self._busy >= self.serves:
                if stopping.is_set():
                    self._queue.remove(ticket)
                    self._cond.notify_all()
                    return False
                self._cond.wait(0.05)
            self._queue.popleft()
            self._busy += 1
            self._cond.notify_all()
            return True

    def done(self) -> None:
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()
