"""The OpenAI Batch API (and any server that serves ``/v1/files`` and ``/v1/batches``).

A batch is a JSONL file of requests, each ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}``, uploaded with ``purpose=batch`` (``POST /files``), then a
batch created on it (``POST /batches`` with ``completion_window: 24h``), polled (``GET
/batches/{id}``: ``validating``, ``in_progress``, ``finalizing``, then ``completed``,
``failed``, ``expired`` or ``cancelled``) and read: its output file holds a line per request
answered, its error file one per request that failed or expired, in any order, each with the
request's ``custom_id``.

The requests are built as :class:`~contextlens.judges.openai_compat.OpenAICompatBackend`
builds its live calls (the same body, headers and key), and their replies read as it reads
them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
from pydantic import BaseModel

from contextlens.backend import (
    BackendError,
    FatalError,
    InvalidReply,
    Message,
    TransientError,
    http_error,
)
from contextlens.judges.batching import BatchLine, BatchState, count_in, text_field
from contextlens.judges.openai_compat import (
    OpenAICompatBackend,
    _error_message,
    endpoint,
    read_json,
)

__all__ = ["BatchHTTP", "OpenAIBatches"]

#: The batch statuses after which nothing more happens to a batch.
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
COMPLETION_WINDOW = "24h"
CHAT_URL = "/v1/chat/completions"
#: The largest output or error file read, in bytes (OpenAI's input files are 200 MB at most).
MAX_FILE_BYTES = 512_000_000


class BatchHTTP:
    """The HTTP side of a batch API on the server ``live`` calls: its requests go through
    the live backend's :meth:`~contextlens.judges.openai_compat.OpenAICompatBackend.exchange`
    (its session, headers, key and error kinds)."""

    def __init__(self, live: OpenAICompatBackend) -> None:
        self._live = live

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._live.base_url!r}, model={self._live.model!r})"

    @property
    def live(self) -> OpenAICompatBackend:
        return self._live

    @property
    def key(self) -> str:
        return f"{self._live.key}@batch"

    def request(
        self, messages: Sequence[Message], schema: type[BaseModel] | None
    ) -> dict[str, Any]:
        return self._live._body(messages, schema)

    async def aclose(self) -> None:
        await self._live.aclose()

    async def _call(
        self, method: str, path: str, *, json_body: Any = None, data: Any = None
    ) -> bytes:
        url = endpoint(self._live.base_url, path)
        try:
            return await self._live.exchange(
                method, url, json_body=json_body, data=data, limit=MAX_FILE_BYTES
            )
        except InvalidReply as exc:  # a file over the limit is no reply to re-ask
            raise FatalError(f"{method} {url}: {exc.message}") from None

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        body = await self._call(method, path, **kwargs)
        try:
            data = read_json(body)
        except (ValueError, RecursionError):
            raise FatalError(f"{method} {path}: the reply is not JSON") from None
        if not isinstance(data, dict):
            raise FatalError(f"{method} {path}: the reply is not a JSON object")
        return data


class OpenAIBatches(BatchHTTP):
    """The OpenAI batch endpoints of the server ``live`` calls (see the module docstring)."""

    def refused(self, request: Mapping[str, Any], error: BackendError) -> BackendError:
        if error.status is None or "response_format" not in request:
            return error
        sent = str(request["response_format"].get("type", "off"))
        return self._live.formats.refused(sent, error)

    async def submit(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> str:
        lines = "".join(
            json.dumps(
                {"custom_id": rid, "method": "POST", "url": CHAT_URL, "body": body},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            + "\n"
            for rid, body in requests
        )
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field(
            "file",
            lines.encode("utf-8", "surrogatepass"),
            filename="contextlens-requests.jsonl",
            content_type="application/jsonl",
        )
        uploaded = await self._json("POST", "/files", data=form)
        file_id = text_field(uploaded, "id", "POST /files")
        created = await self._json(
            "POST",
            "/batches",
            json_body={
                "input_file_id": file_id,
                "endpoint": CHAT_URL,
                "completion_window": COMPLETION_WINDOW,
                "metadata": {"made_by": "contextlens"},
            },
        )
        return text_field(created, "id", "POST /batches")

    async def state(self, batch_id: str) -> BatchState:
        return _state(await self._json("GET", f"/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchState:
        return _state(await self._json("POST", f"/batches/{batch_id}/cancel"))

    async def results(self, batch_id: str) -> dict[str, BatchLine]:
        batch = await self._json("GET", f"/batches/{batch_id}")
        out: dict[str, BatchLine] = {}
        for name in ("output_file_id", "error_file_id"):
            file_id = batch.get(name)
            if not isinstance(file_id, str) or not file_id:
                continue
            content = await self._call("GET", f"/files/{file_id}/content")
            for number, raw in enumerate(content.splitlines(), 1):
                if raw.strip():
                    rid, line = self._line(raw, f"{batch_id} {name} line {number}")
                    if rid is not None:
                        out[rid] = line
        if batch.get("status") == "failed" and not out:  # refused whole: it has no lines
            errors = batch.get("errors")
            raise FatalError(f"{batch_id} failed: {json.dumps(errors)[:300]}")
        return out

    def _line(self, raw: bytes, where: str) -> tuple[str | None, BatchLine]:
        """One line of an output or error file: its custom id and outcome."""
        try:
            data = read_json(raw)
        except (ValueError, RecursionError):
            return None, BatchLine(error=TransientError(f"{where} is not JSON"))
        if not isinstance(data, dict) or not isinstance(data.get("custom_id"), str):
            return None, BatchLine(error=TransientError(f"{where} has no custom_id"))
        rid = data["custom_id"]
        error = data.get("error")
        response = data.get("response")
        if isinstance(response, dict):
            status = response.get("status_code")
            body = response.get("body")
            if status == 200 and isinstance(body, dict):
                try:  # read as the live backend reads its replies
                    reply = self._live._completion(body, json.dumps(body)[:1200], 0.0)
                except FatalError as exc:
                    return rid, BatchLine(error=exc)
                return rid, BatchLine(reply=reply)
            if isinstance(status, int) and status >= 400:
                message = _error_message(json.dumps(body), None) if body is not None else ""
                return rid, BatchLine(error=http_error(status, self._live._redact(message)))
        if isinstance(error, dict):  # batch_expired, or a request the batch could not make
            code = str(error.get("code") or "error")
            message = str(error.get("message") or code)
            return rid, BatchLine(error=TransientError(f"{code}: {self._live._redact(message)}"))
        return rid, BatchLine(error=TransientError(f"{where}: neither a reply nor an error"))


def _state(data: Mapping[str, Any]) -> BatchState:
    counts = data.get("request_counts")
    status = str(data.get("status") or "unknown")
    return BatchState(
        batch_id=text_field(data, "id", "a batch"),
        status=status,
        ended=status in ENDED,
        done=count_in(counts, "completed"),
        failed=count_in(counts, "failed"),
        total=count_in(counts, "total"),
    )
