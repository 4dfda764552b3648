"""Which reply format a chat backend asks for, and stepping down when a server refuses one.

Modes (:data:`STRUCTURED_MODES`):

- ``"auto"`` (the default): constrained output where the server supports it. First OpenAI's
  ``{"type": "json_schema", "json_schema": {name, schema, strict}}``; when the server refuses
  it (an HTTP 400, 422 or 500 whose message names the response format), llama-cpp-python's
  ``{"type": "json_object", "schema": ...}``; when that is refused too, the prompt alone. What
  the server accepted is kept for the life of the backend object (a run).
- ``"json_schema"``, ``"json_object"``: that format only; a refusal is an error.
- ``"off"``: no ``response_format``; the prompt describes the reply (it always does).

The schema sent is :func:`~contextlens.judges.schema.wire_schema`, which a grammar can enforce.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.backend import BackendError, FormatRefused, Message
from contextlens.judges.schema import reply_token_budget, wire_schema

__all__ = ["STRUCTURED_MODES", "FormatNegotiation", "structured_mode"]

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "off")
_STEPS = ("json_schema", "json_object", "off")
_NAMES_FORMAT = re.compile(r"response[_ ]?format|json[_ ]?schema|json[_ ]?object", re.I)
_REFUSAL_STATUSES = frozenset({400, 422, 500, 501})
log = logging.getLogger("contextlens.judge")


def structured_mode(value: str | bool | None) -> str:
    """The mode a setting names: ``None`` is ``"auto"``, ``True`` ``"auto"``, ``False``
    ``"off"``; a string must be one of :data:`STRUCTURED_MODES`."""
    if value is None or value is True:
        return "auto"
    if value is False:
        return "off"
    mode = str(value).strip().lower().replace("-", "_")
    if mode not in STRUCTURED_MODES:
        raise ValueError(
            f"structured output {value!r}: expected one of {', '.join(STRUCTURED_MODES)}"
        )
    return mode


class FormatNegotiation:
    """The reply format of one backend object: what to send, and what to do on a refusal."""

    def __init__(self, mode: str | bool | None = "auto") -> None:
        self.mode = structured_mode(mode)
        self.current = "json_schema" if self.mode == "auto" else self.mode
        self._lock = threading.Lock()

    def response_format(self, schema: type[BaseModel] | None) -> tuple[str, dict[str, Any] | None]:
        """The format in use and the ``response_format`` to send for ``schema`` (None: none)."""
        sent = self.current
        if schema is None or sent == "off":
            return sent, None
        if sent == "json_schema":
            return sent, {
                "type": "json_schema",
                "json_schema": {
                    "name": schema.__name__,
                    "schema": wire_schema(schema),
                    "strict": True,
                },
            }
        return sent, {"type": "json_object", "schema": wire_schema(schema, bounded=True)}

    def reply_options(
        self, schema: type[BaseModel] | None, messages: Sequence[Message], max_tokens: int | None
    ) -> tuple[str, dict[str, Any]]:
        """The format in use and the request fields that shape the reply: ``max_tokens``
        (``max_tokens``, else sized from ``schema``) and ``response_format``."""
        sent, response_format = self.response_format(schema)
        options: dict[str, Any] = {}
        if max_tokens is None and schema is not None:
            max_tokens = reply_token_budget(schema, messages)
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if response_format is not None:
            options["response_format"] = response_format
        return sent, options

    def refused(self, sent: str, error: BackendError) -> BackendError:
        """``error`` as raised for a call sent with format ``sent``: in auto mode, a refusal
        of that format steps down to the next and becomes :class:`FormatRefused`."""
        if (
            self.mode != "auto"
            or sent == "off"
            or error.status not in _REFUSAL_STATUSES
            or not _NAMES_FORMAT.search(error.message)
        ):
            return error
        with self._lock:
            if self.current == sent:
                self.current = _STEPS[_STEPS.index(sent) + 1]
                log.warning(
                    "the server refused response_format %s (HTTP %s); asking with %s from now on",
                    sent,
                    error.status,
                    self.current if self.current != "off" else "the prompt alone",
                )
        return FormatRefused(
            f"response_format {sent} refused ({error.message}); retrying with {self.current}",
            status=error.status,
        )
