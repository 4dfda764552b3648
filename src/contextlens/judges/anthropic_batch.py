"""Anthropic's Message Batches: ``POST /messages/batches`` with the requests inline, polled
at ``GET /messages/batches/{id}`` until its ``processing_status`` is ``ended``, then read from
``GET /messages/batches/{id}/results``: a JSONL line per request, in any order, each
``succeeded`` (with the message), ``errored``, ``canceled`` or ``expired``.

The requests are built as :class:`~contextlens.judges.anthropic.AnthropicBackend` builds its
live calls, on its key and headers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextlens.backend import BackendError, FatalError, TransientError, http_error
from contextlens.judges.anthropic import AnthropicBackend, message_completion
from contextlens.judges.batching import BatchLine, BatchState, count_in, text_field
from contextlens.judges.openai_batch import BatchHTTP
from contextlens.judges.openai_compat import read_json

__all__ = ["AnthropicBatches"]


class AnthropicBatches(BatchHTTP):
    """The Message Batches endpoints of the API ``live`` calls."""

    def __init__(self, live: AnthropicBackend) -> None:
        super().__init__(live)

    def refused(self, request: Mapping[str, Any], error: BackendError) -> BackendError:
        return error  # the API has no reply format to step down from

    async def submit(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> str:
        created = await self._json(
            "POST",
            "/messages/batches",
            json_body={"requests": [{"custom_id": rid, "params": body} for rid, body in requests]},
        )
        return text_field(created, "id", "POST /messages/batches")

    async def state(self, batch_id: str) -> BatchState:
        return _state(await self._json("GET", f"/messages/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchState:
        return _state(await self._json("POST", f"/messages/batches/{batch_id}/cancel"))

    async def results(self, batch_id: str) -> dict[str, BatchLine]:
        content = await self._call("GET", f"/messages/batches/{batch_id}/results")
        out: dict[str, BatchLine] = {}
        for number, raw in enumerate(content.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                data = read_json(raw)
            except (ValueError, RecursionError):
                continue
            rid = data.get("custom_id") if isinstance(data, dict) else None
            if isinstance(rid, str):
                out[rid] = self._line(data.get("result"), f"{batch_id} results line {number}")
        return out

    def _line(self, result: Any, where: str) -> BatchLine:
        kind = result.get("type") if isinstance(result, dict) else None
        if kind == "succeeded" and isinstance(result, dict):
            message = result.get("message")
            try:
                return BatchLine(
                    reply=message_completion(
                        message, json.dumps(message)[:1200], self._live._redact
                    )
                )
            except FatalError as exc:
                return BatchLine(error=exc)
        if kind == "errored" and isinstance(result, dict):
            error = result.get("error")
            inner = error.get("error") if isinstance(error, dict) else None
            detail = inner if isinstance(inner, dict) else error if isinstance(error, dict) else {}
            message = self._live._redact(str(detail.get("message") or detail.get("type")))
            if detail.get("type") == "invalid_request_error":
                return BatchLine(error=http_error(400, message))
            return BatchLine(error=TransientError(f"errored: {message}"))
        return BatchLine(error=TransientError(f"{where}: {kind or 'no result'}"))


def _state(data: Mapping[str, Any]) -> BatchState:
    counts = data.get("request_counts")
    done = count_in(counts, "succeeded")
    failed = sum(count_in(counts, name) for name in ("errored", "canceled", "expired"))
    status = str(data.get("processing_status") or "unknown")
    return BatchState(
        batch_id=text_field(data, "id", "a message batch"),
        status=status,
        ended=status == "ended",
        done=done,
        failed=failed,
        total=done + failed + count_in(counts, "processing"),
    )
