"""A real HTTP server on 127.0.0.1 that serves batch APIs, for tests.

OpenAI's Batch API: ``POST /v1/files`` (multipart, ``purpose=batch``, a JSONL of requests),
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel`` and ``GET
/v1/files/{id}/content``. Anthropic's Message Batches: ``POST /v1/messages/batches``, ``GET
/v1/messages/batches/{id}``, ``POST .../cancel`` and ``GET .../results``.

A batch is worked on for ``delay`` seconds after it is created, then ends. Its requests are
answered by ``reply(body)`` (default :data:`~contextlens.testing.DEFAULT_REPLY`; one that
raises makes an error line), in shuffled order, except: each request whose index (across the
server's life, from 0) is in ``fail_requests`` gets an error line (HTTP 500); the batches
whose index is in ``expire_batches`` end ``expired``, their requests after the first
``expire_after`` in the error file as ``batch_expired``. A cancelled batch ends at once, its
requests unanswered.

Counters: ``files``, ``batches`` (ids, in order), ``requests`` (every request line
accepted), ``polls``, ``cancelled`` and ``downloads``. ``api_key`` set: a request without it
(``Authorization: Bearer`` or Anthropic's ``x-api-key``) is answered 401.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Collection
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from contextlens.testing.fake_http import error_body, estimate_tokens
from contextlens.testing.fake_openai import DEFAULT_REPLY

__all__ = ["FakeBatchServer"]


class _Batch:
    def __init__(self, batch_id: str, shape: str, requests: list[dict[str, Any]], index: int):
        self.id = batch_id
        self.shape = shape  # "openai" or "anthropic"
        self.requests = requests
        self.index = index
        self.created = time.time()
        self.cancelled_at: float | None = None
        self.output: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.done = False
        self.status = "in_progress"


class FakeBatchServer:
    """A threaded batch server (see the module docstring); a context manager."""

    def __init__(
        self,
        *,
        delay: float = 0.2,
        reply: Callable[[dict[str, Any]], str] | None = None,
        fail_requests: Collection[int] = (),
        expire_batches: Collection[int] = (),
        expire_after: int = 0,
        api_key: str | None = None,
        seed: int = 0,
    ) -> None:
        self.delay = delay
        self.reply = reply
        self.fail_requests = set(fail_requests)
        self.expire_batches = set(expire_batches)
        self.expire_after = expire_after
        self.api_key = api_key
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, _Batch] = {}
        self.files = 0
        self.batches: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.polls = 0
        self.cancelled = 0
        self.downloads = 0
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> FakeBatchServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- requests (handler threads) ----------------------------------------------------

    def handle(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, bytes, str]:
        path = path.split("?", 1)[0].rstrip("/").removeprefix("/v1")
        anthropic = path.startswith("/messages/batches")
        if self.api_key is not None and not self._authorised(headers, anthropic):
            return _json(401, error_body("invalid api key", "authentication_error"))
        parts = path.strip("/").split("/")
        with self._lock:
            if method == "POST" and path == "/files":
                return self._upload(headers, body)
            if method == "POST" and path == "/batches":
                return self._create_openai(body)
            if method == "POST" and path == "/messages/batches":
                return self._create_anthropic(body)
            if parts[0] == "batches" and len(parts) >= 2:
                return self._batch_call(method, parts[1], parts[2:], "openai")
            if parts[:2] == ["messages", "batches"] and len(parts) >= 3:
                return self._batch_call(method, parts[2], parts[3:], "anthropic")
            if method == "GET" and parts[0] == "files" and parts[2:] == ["content"]:
                content = self._files.get(parts[1])
                if content is None:
                    return _json(404, error_body("no such file", "invalid_request_error"))
                self.downloads += 1
                return 200, content, "application/jsonl"
        return _json(404, error_body(f"not found: {method} {path}", "invalid_request_error"))

    def _authorised(self, headers: Any, anthropic: bool) -> bool:
        if anthropic:
            return headers.get("x-api-key") == self.api_key
        return headers.get("Authorization") == f"Bearer {self.api_key}"

    def _upload(self, headers: Any, body: bytes) -> tuple[int, bytes, str]:
        head = f"Content-Type: {headers.get('Content-Type', '')}\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + body)
        fields: dict[Any, Any] = {
            part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.iter_parts()
        }
        if fields.get("purpose") != b"batch" or not fields.get("file"):
            return _json(400, error_body("expected purpose=batch and a file", "invalid_request"))
        file_id = f"file-{uuid.uuid4().hex[:16]}"
        self._files[file_id] = fields["file"]
        self.files += 1
        return _json(200, {"id": file_id, "object": "file", "purpose": "batch"})

    def _create_openai(self, body: bytes) -> tuple[int, bytes, str]:
        data = json.loads(body)
        content = self._files.get(data.get("input_file_id", ""))
        if content is None or data.get("endpoint") != "/v1/chat/completions":
            return _json(400, error_body("bad input_file_id or endpoint", "invalid_request"))
        lines = [json.loads(line) for line in content.splitlines() if line.strip()]
        ids = [line["custom_id"] for line in lines]
        if len(set(ids)) != len(ids):
            return _json(400, error_body("duplicate custom_id", "invalid_request"))
        requests = [{"custom_id": line["custom_id"], "body": line["body"]} for line in lines]
        batch = self._new_batch("batch", "openai", requests)
        return _json(200, self._openai_view(batch))

    def _create_anthropic(self, body: bytes) -> tuple[int, bytes, str]:
        data = json.loads(body)
        requests = [
            {"custom_id": r["custom_id"], "body": r["params"]} for r in data.get("requests", [])
        ]
        if not requests:
            return _json(400, error_body("no requests", "invalid_request_error"))
        batch = self._new_batch("msgbatch", "anthropic", requests)
        return _json(200, self._anthropic_view(batch))

    def _new_batch(self, prefix: str, shape: str, requests: list[dict[str, Any]]) -> _Batch:
        batch = _Batch(f"{prefix}_{uuid.uuid4().hex[:16]}", shape, requests, len(self.batches))
        self._batches[batch.id] = batch
        self.batches.append(batch.id)
        base = len(self.requests)
        self.requests.extend(requests)
        for offset, request in enumerate(requests):
            request["_index"] = base + offset
        return batch

    def _batch_call(
        self, method: str, batch_id: str, rest: list[str], shape: str
    ) -> tuple[int, bytes, str]:
        batch = self._batches.get(batch_id)
        if batch is None or batch.shape != shape:
            return _json(404, error_body("no such batch", "not_found_error"))
        if method == "POST" and rest == ["cancel"]:
            if not batch.done and batch.cancelled_at is None:
                batch.cancelled_at = time.time()
                self.cancelled += 1
        elif method == "GET" and rest == ["results"] and shape == "anthropic":
            self._settle(batch)
            if not batch.done:
                return _json(400, error_body("the batch is still processing", "invalid_request"))
            self.downloads += 1
            return 200, _jsonl(batch.output), "application/jsonl"
        elif method != "GET" or rest:
            return _json(404, error_body("not found", "not_found_error"))
        else:
            self.polls += 1
        self._settle(batch)
        view = self._openai_view(batch) if shape == "openai" else self._anthropic_view(batch)
        return _json(200, view)

    # -- processing --------------------------------------------------------------------

    def _settle(self, batch: _Batch) -> None:
        """Answer the batch's requests once its time has come (or it was cancelled)."""
        if batch.done:
            return
        cancelled = batch.cancelled_at is not None
        if not cancelled and time.time() - batch.created < self.delay:
            return
        expired = batch.index in self.expire_batches
        for position, request in enumerate(batch.requests):
            if cancelled or (expired and position >= self.expire_after):
                self._unanswered(batch, request, "canceled" if cancelled else "expired")
            elif request["_index"] in self.fail_requests:
                self._failed(batch, request)
            else:
                self._answered(batch, request)
        self._rng.shuffle(batch.output)
        self._rng.shuffle(batch.errors)
        batch.status = "cancelled" if cancelled else "expired" if expired else "completed"
        if batch.output and batch.shape == "openai":
            self._files[f"file-out-{batch.id}"] = _jsonl(batch.output)
        if batch.errors and batch.shape == "openai":
            self._files[f"file-err-{batch.id}"] = _jsonl(batch.errors)
        if batch.shape == "anthropic":
            batch.output += batch.errors
        batch.done = True

    def _content(self, body: dict[str, Any]) -> str:
        return self.reply(body) if self.reply is not None else DEFAULT_REPLY

    def _answered(self, batch: _Batch, request: dict[str, Any]) -> None:
        body, rid = request["body"], request["custom_id"]
        try:
            content = self._content(body)
        except Exception:  # a failing ``reply`` function: this request's line is an error
            self._failed(batch, request)
            return
        prompt = sum(estimate_tokens(str(m.get("content", ""))) for m in body["messages"])
        completion = estimate_tokens(content)
        if batch.shape == "anthropic":
            message = {
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": [{"type": "text", "text": content}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": prompt, "output_tokens": completion},
            }
            batch.output.append(
                {"custom_id": rid, "result": {"type": "succeeded", "message": message}}
            )
            return
        reply = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        batch.output.append(
            {
                "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                "custom_id": rid,
                "response": {"status_code": 200, "request_id": uuid.uuid4().hex, "body": reply},
                "error": None,
            }
        )

    def _failed(self, batch: _Batch, request: dict[str, Any]) -> None:
        rid = request["custom_id"]
        if batch.shape == "anthropic":
            error = {"type": "error", "error": {"type": "api_error", "message": "injected"}}
            batch.errors.append({"custom_id": rid, "result": {"type": "errored", "error": error}})
            return
        body = error_body("internal server error (injected)", "server_error")
        batch.errors.append(
            {
                "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                "custom_id": rid,
                "response": {"status_code": 500, "request_id": uuid.uuid4().hex, "body": body},
                "error": None,
            }
        )

    def _unanswered(self, batch: _Batch, request: dict[str, Any], kind: str) -> None:
        rid = request["custom_id"]
        if batch.shape == "anthropic":
            batch.errors.append({"custom_id": rid, "result": {"type": kind}})
        elif kind == "expired":
            error = {"code": "batch_expired", "message": "This request could not be executed"}
            batch.errors.append({"id": "", "custom_id": rid, "response": None, "error": error})

    # -- views -------------------------------------------------------------------------

    def _openai_view(self, batch: _Batch) -> dict[str, Any]:
        if not batch.done:
            status = "cancelling" if batch.cancelled_at is not None else "in_progress"
        else:
            status = batch.status
        failed = len(batch.errors) if batch.done else 0
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "status": status,
            "created_at": int(batch.created),
            "completion_window": "24h",
            "output_file_id": f"file-out-{batch.id}" if batch.done and batch.output else None,
            "error_file_id": f"file-err-{batch.id}" if batch.done and batch.errors else None,
            "request_counts": {
                "total": len(batch.requests),
                "completed": len(batch.output) if batch.done else 0,
                "failed": failed,
            },
            "errors": None,
        }

    def _anthropic_view(self, batch: _Batch) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if not batch.done:
            counts["processing"] = len(batch.requests)
        else:
            for line in batch.output:
                kind = line["result"]["type"]
                counts[kind] = counts.get(kind, 0) + 1
        ended = batch.done
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended"
            if ended
            else "canceling"
            if batch.cancelled_at
            else "in_progress",
            "request_counts": counts,
            "created_at": batch.created,
            "ended_at": time.time() if ended else None,
            "results_url": f"{self.base_url}/messages/batches/{batch.id}/results"
            if ended
            else None,
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeBatchServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            status, data, kind = self.fake.handle(method, self.path, self.headers, body)
        except (ValueError, KeyError, TypeError) as exc:
            status, data, kind = _json(400, error_body(f"bad request: {exc}", "invalid_request"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")


def _json(status: int, payload: Any) -> tuple[int, bytes, str]:
    return status, json.dumps(payload).encode(), "application/json"


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()
