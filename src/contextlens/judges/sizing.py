"""The size of a judge call before it is sent: the prompt as the backend would send it, the
schema the provider counts as prompt, and the replies it can bring.

:func:`call_size` asks the backend's own format negotiation what it would send (the compact
prompt and the ``response_format`` where the server enforces the schema), so an estimate
counts what the real call pays for. :func:`shortest_reply` and :func:`typical_reply` are
replies in a schema, the smallest valid one and one of the usual length, as JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from contextlens.backend import ChatBackend, Message
from contextlens.judges.schema import reply_token_budget, wire_schema

__all__ = ["CallSize", "call_size", "shortest_reply", "typical_reply"]

#: Free text of a typical reply: this share of the field's length bound.
TYPICAL_TEXT_SHARE = 0.5
#: Entries of a typical reply's list of variable length: this share of its bound.
TYPICAL_LIST_SHARE = 0.25
_FILLER = "the context answers part of what the input asks "


@dataclass(frozen=True)
class CallSize:
    """What one call sends and may bring back: ``messages`` as sent, ``schema_text`` (the
    ``response_format`` schema, counted as prompt by providers; empty when none is sent),
    ``max_tokens`` (the completion tokens the reply may take at most)."""

    messages: list[Message]
    schema_text: str
    max_tokens: int


def call_size(
    backend: ChatBackend | None, messages: Sequence[Message], schema: type[BaseModel]
) -> CallSize:
    """The call ``backend`` would send for ``messages`` and ``schema``, in the reply format it
    uses now; a backend without a format negotiation (or none known) sends the messages as
    they are."""
    formats = backend.formats if backend is not None else None
    max_tokens = backend.max_tokens if backend is not None else None
    if max_tokens is not None and max_tokens <= 0:
        max_tokens = None
    if formats is not None and backend is not None and backend.use_structured_output:
        sent, options = formats.reply_options(schema, messages, max_tokens)
        fmt = options.get("response_format") or {}
        wire = fmt["json_schema"].get("schema") if "json_schema" in fmt else fmt.get("schema")
        return CallSize(
            messages=formats.prompt_for(messages, schema, sent),
            schema_text=json.dumps(wire, separators=(",", ":")) if wire else "",
            max_tokens=int(options.get("max_tokens") or reply_token_budget(schema, messages)),
        )
    return CallSize(list(messages), "", max_tokens or reply_token_budget(schema, messages))


def _fill(node: Any, typical: bool) -> Any:
    if "enum" in node:
        return node["enum"][0]
    kind = node.get("type")
    if kind == "object":
        return {k: _fill(v, typical) for k, v in node.get("properties", {}).items()}
    if kind == "array":
        low = int(node.get("minItems", 0))
        high = int(node.get("maxItems", low))
        count = low
        if typical and high > low:
            count = max(low, round(high * TYPICAL_LIST_SHARE))
        return [_fill(node.get("items", {}), typical) for _ in range(count)]
    if kind == "string":
        if not typical:
            return ""
        length = int(int(node.get("maxLength", 200)) * TYPICAL_TEXT_SHARE)
        return (_FILLER * (length // len(_FILLER) + 1))[:length].strip()
    if kind == "integer":
        return int(node.get("minimum", 0))
    if kind == "number":
        return float(node.get("minimum", 0.0))
    if kind == "boolean":
        return False
    return None


def shortest_reply(schema: type[BaseModel]) -> dict[str, Any]:
    """The smallest reply the wire schema admits: the first of each choice, empty texts,
    the fewest list entries."""
    reply: dict[str, Any] = _fill(wire_schema(schema, bounded=True), typical=False)
    return reply


def typical_reply(schema: type[BaseModel]) -> str:
    """A reply of the usual length, as JSON text: free text at half its bound, a quarter of
    the entries a list of variable length may have."""
    reply = _fill(wire_schema(schema, bounded=True), typical=True)
    return json.dumps(reply, ensure_ascii=False, separators=(",", ":"))
