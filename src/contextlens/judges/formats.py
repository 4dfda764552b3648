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

import copy
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from contextlens.backend import BackendError, FormatRefused, Message
from contextlens.judges.parsing import INSTRUCTIONS_OPENING
from contextlens.judges.schema import (
    field_line,
    reply_token_budget,
    wire_schema,
    wire_schema_json,
)
from contextlens.redact import logger

__all__ = [
    "ENFORCED",
    "STRUCTURED_MODES",
    "FormatNegotiation",
    "compact_instructions",
    "enforced_instructions",
    "structured_mode",
]

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "off")
#: The formats in which the server itself enforces the reply schema.
ENFORCED = frozenset({"json_schema", "json_object"})
_STEPS = ("json_schema", "json_object", "off")
_NAMES_FORMAT = re.compile(r"response[_ ]?format|json[_ ]?schema|json[_ ]?object", re.I)
_REFUSAL_STATUSES = frozenset({400, 422, 500, 501})
log = logger("contextlens.judge")


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


def enforced_instructions(schema: type[BaseModel]) -> str:
    """What the prompt says of the reply format when the server enforces the schema."""
    return f"Answer with one JSON object (the reply format is enforced): {field_line(schema)}"


def compact_instructions(messages: Sequence[Message], schema: type[BaseModel]) -> list[Message]:
    """``messages`` with the printed schema of ``schema`` (in the instructions
    :func:`~contextlens.judges.parsing.format_instructions` writes, with any fence) replaced
    by :func:`enforced_instructions`."""
    return [
        {**m, "content": _compact(m["content"], schema)}
        if INSTRUCTIONS_OPENING in m["content"]
        else m
        for m in messages
    ]


#: The longest text whose compacted form is remembered: a metric's system prompt, the same
#: for every call, is rewritten once; a prompt that also holds the data is not kept.
_MEMO_CHARS = 16_384


def _rewritten(content: str, schema: type[BaseModel]) -> str:
    """``content`` with the printed schema of ``schema`` replaced by one line."""
    short = enforced_instructions(schema)
    return _instructions(schema).sub(lambda _: short, content)


_remembered = lru_cache(maxsize=128)(_rewritten)


def _compact(content: str, schema: type[BaseModel]) -> str:
    return (_remembered if len(content) <= _MEMO_CHARS else _rewritten)(content, schema)


@lru_cache(maxsize=256)
def _instructions(schema: type[BaseModel]) -> re.Pattern[str]:
    schema_json = re.escape(wire_schema_json(schema))
    return re.compile(
        re.escape(INSTRUCTIONS_OPENING) + r", between .{1,40}? and "
        r".{1,40}?:\n" + schema_json
    )


@lru_cache(maxsize=256)
def _response_format(schema: type[BaseModel], sent: str) -> dict[str, Any]:
    if sent == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": wire_schema(schema), "strict": True},
        }
    return {"type": "json_object", "schema": wire_schema(schema, bounded=True)}


class FormatNegotiation:
    """The reply format of one backend object: what to send, and what to do on a refusal."""

    def __init__(self, mode: str | bool | None = "auto") -> None:
        self.mode = structured_mode(mode)
        self.current = "json_schema" if self.mode == "auto" else self.mode
        self._lock = threading.Lock()

    def response_format(
        self, schema: type[BaseModel] | None, *, shared: bool = False
    ) -> tuple[str, dict[str, Any] | None]:
        """The format in use and the ``response_format`` to send for ``schema`` (None: none).
        ``shared``: the dict made once per schema and format, which is not to be changed (a
        backend that only serialises it); else a fresh one, for a library that may."""
        sent = self.current
        if schema is None or sent == "off":
            return sent, None
        made = _response_format(schema, sent)
        return sent, made if shared else copy.deepcopy(made)

    def reply_options(
        self,
        schema: type[BaseModel] | None,
        messages: Sequence[Message],
        max_tokens: int | None,
        *,
        shared: bool = False,
    ) -> tuple[str, dict[str, Any]]:
        """The format in use and the request fields that shape the reply: ``max_tokens``
        (``max_tokens``, else sized from ``schema``) and ``response_format`` (``shared``: as
        for :meth:`response_format`)."""
        sent, response_format = self.response_format(schema, shared=shared)
        options: dict[str, Any] = {}
        if max_tokens is None and schema is not None:
            max_tokens = reply_token_budget(schema, messages)
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if response_format is not None:
            options["response_format"] = response_format
        return sent, options

    def prompt_for(
        self, messages: Sequence[Message], schema: type[BaseModel] | None, sent: str
    ) -> list[Message]:
        """The messages as sent in format ``sent``. Where the server enforces the reply
        schema (``json_schema``, or llama.cpp's ``json_object`` with a schema), the schema the
        prompt prints is said in one line instead (:func:`enforced_instructions`): it would
        be paid for twice. With the prompt alone it stays whole."""
        if schema is None or sent not in ENFORCED:
            return list(messages)
        return compact_instructions(messages, schema)

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
