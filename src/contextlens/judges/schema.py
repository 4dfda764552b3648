"""Reply schemas on the wire: the JSON Schema a grammar can enforce, and a reply's token budget.

What a backend sends as ``response_format`` (and what a prompt shows) is
:func:`wire_schema`: the pydantic schema with references inlined, titles dropped, every
property required and no extra properties, so it stays within the subset that OpenAI's strict
mode, llama.cpp's grammar converter, vLLM and Ollama all accept. The rules that decide whether a
reply is valid are written so that this subset can express them: a score is one of
:data:`SCORE_ANCHORS` (an ``enum``), a list with one entry per chunk has ``minItems`` =
``maxItems``. A reply that a constrained decoder produces therefore always validates; pydantic
stays the check for replies that were not constrained.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, ValidationInfo, WithJsonSchema

from contextlens.backend import Message

__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "LENIENT",
    "SCORE_ANCHORS",
    "AnchoredScore",
    "Verdict",
    "field_line",
    "reply_token_budget",
    "text_field",
    "verdict_token",
    "wire_schema",
    "wire_schema_json",
]

#: The scores a judge may give: 0.0 to 1.0 in steps of 0.1 (the prompts' anchors and the
#: points between them).
SCORE_ANCHORS: tuple[float, ...] = tuple(round(i / 10, 1) for i in range(11))

#: A judge's score: any number in [0, 1] validates; the wire schema offers the anchors only,
#: so a constrained decoder cannot produce 2.5.
AnchoredScore = Annotated[
    float,
    Field(ge=0.0, le=1.0, allow_inf_nan=False),
    WithJsonSchema({"type": "number", "enum": list(SCORE_ANCHORS), "description": "0.0 to 1.0"}),
]

#: The validation context of a reply that was not decoded under its schema (a judge asked
#: with the prompt alone): fields that allow it read the reply leniently.
LENIENT: dict[str, Any] = {"lenient": True}

#: What may surround a verdict word in a free-text reply: spaces, punctuation, quotes.
_EDGES = " \t\r\n.,;:!?\"'`*_()[]{}"


def verdict_token(value: Any, info: ValidationInfo) -> Any:
    """A verdict of a reply read leniently as ``"yes"`` or ``"no"``: case, the spaces and
    punctuation around it, and text after it that does not continue the word (``"Yes."``,
    ``" NO "``, ``"no, off topic"``) do not count. Anything else, and every verdict of a
    constrained reply, is left for the schema to judge (``"nope"`` and ``"Yes"`` from a
    grammar-constrained reply fail)."""
    if not isinstance(value, str) or not (info.context or {}).get("lenient"):
        return value
    token = value.strip(_EDGES).casefold()
    for word in ("yes", "no"):
        rest = token[len(word) : len(word) + 1]
        if token.startswith(word) and not (rest.isascii() and rest.isalnum()):
            return word
    return value


#: A yes/no verdict of a reply schema; unconstrained replies are read as :func:`verdict_token`
#: says.
Verdict = Annotated[Literal["yes", "no"], BeforeValidator(verdict_token)]

#: Completion tokens allowed for a reply whose schema says nothing of its size.
DEFAULT_REPLY_TOKENS = 512


def text_field(description: str, max_length: int) -> Any:
    """A free-text field of a reply schema. ``max_length`` is a bound for a grammar, so a
    small model cannot write on until its token budget ends mid-string; it is sent only to
    decoders known to take it (:func:`wire_schema` with ``bounded=True``) and never decides
    validity."""
    return Field(description=description, json_schema_extra={"maxLength": max_length})


def _inline(node: Any, defs: dict[str, Any], bounded: bool) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs, bounded)
        dropped = ("title", "$defs") if bounded else ("title", "$defs", "maxLength")
        out = {k: _inline(v, defs, bounded) for k, v in node.items() if k not in dropped}
        if out.get("type") == "object" and "properties" in out:
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_inline(v, defs, bounded) for v in node]
    return node


@lru_cache(maxsize=256)
def _wire(schema: type[BaseModel], bounded: bool) -> str:
    raw = schema.model_json_schema()
    out = _inline(raw, raw.get("$defs", {}), bounded)
    out.pop("description", None)  # the class docstring: prompt text, not a rule
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def wire_schema(schema: type[BaseModel], *, bounded: bool = False) -> dict[str, Any]:
    """The JSON Schema of ``schema`` as sent to a model (a fresh dict per call).
    ``bounded`` keeps the ``maxLength`` of free-text fields, for a grammar that takes it
    (llama.cpp's); OpenAI's strict mode does not, so it is left out by default."""
    return json.loads(_wire(schema, bounded))


def wire_schema_json(schema: type[BaseModel]) -> str:
    """:func:`wire_schema` as compact JSON text (computed once per schema class)."""
    return _wire(schema, False)


#: Characters per token assumed when sizing a reply from its longest form: fewer than the 3
#: to 4 of English text, since a small model that fills a field up to its length bound
#: tends to write repetitive or odd text that tokenises worse.
CHARS_PER_TOKEN = 2.5


def _max_chars(node: Any) -> int | None:
    """The length of the longest JSON text ``node`` (a bounded wire schema) admits, or None
    when it has no bound (a string without ``maxLength``, an array without ``maxItems``)."""
    if "enum" in node:
        return max(len(json.dumps(v)) for v in node["enum"])
    kind = node.get("type")
    if kind == "object":
        parts = [_max_chars(v) for v in node.get("properties", {}).values()]
        if any(p is None for p in parts):
            return None
        keys = sum(len(k) + 4 for k in node.get("properties", {}))
        return 2 + keys + sum(p for p in parts if p is not None)
    if kind == "array":
        item = _max_chars(node.get("items", {}))
        if item is None or "maxItems" not in node:
            return None
        return 2 + node["maxItems"] * (item + 2)
    if kind == "string":
        return node["maxLength"] + 2 if "maxLength" in node else None
    if kind in ("number", "integer"):
        return 24
    if kind == "boolean":
        return 5
    return None


@lru_cache(maxsize=256)
def _longest_reply(schema: type[BaseModel]) -> int | None:
    """:func:`_max_chars` of ``schema``'s bounded wire schema, once per schema class."""
    return _max_chars(wire_schema(schema, bounded=True))


def reply_token_budget(schema: type[BaseModel] | None, messages: Sequence[Message]) -> int:
    """The completion tokens a reply in ``schema`` to ``messages`` needs at most.

    Enough for the longest reply the bounded schema admits (so a grammar-constrained reply is
    never cut off), and at least what the schema asks for with a class method
    ``reply_tokens(messages) -> int`` (a reply that restates the prompt's chunks needs room in
    proportion to them) or :data:`DEFAULT_REPLY_TOKENS`.
    """
    if schema is None:
        return DEFAULT_REPLY_TOKENS
    hint = getattr(schema, "reply_tokens", None)
    budget = int(hint(messages)) if callable(hint) else DEFAULT_REPLY_TOKENS
    longest = _longest_reply(schema)
    if longest is not None:
        budget = max(budget, math.ceil(longest / CHARS_PER_TOKEN) + 32)
    return budget


def _describe(node: dict[str, Any]) -> str:
    """A JSON Schema node in a few words: ``"yes"|"no"``, ``[12 x text]``, ``{a, b}``."""
    if "enum" in node:
        values = node["enum"]
        if len(values) > 6:
            return f"{values[0]}..{values[-1]}"
        return "|".join(json.dumps(v) for v in values)
    kind = node.get("type")
    if kind == "array":
        items = _describe(node.get("items", {}))
        low, high = node.get("minItems"), node.get("maxItems")
        count = f"{low} x " if low is not None and low == high else ""
        return f"[{count}{items}]"
    if kind == "object":
        fields = ", ".join(f"{k}: {_describe(v)}" for k, v in node.get("properties", {}).items())
        return "{" + fields + "}"
    return {
        "string": "text",
        "number": "number",
        "integer": "integer",
        "boolean": "true|false",
    }.get(str(kind), "value")


@lru_cache(maxsize=256)
def field_line(schema: type[BaseModel]) -> str:
    """The reply's fields in one line, for a server that enforces the schema itself (the
    prompt need not print it): ``{reason: text, score: 0.0..1.0}``."""
    return _describe(json.loads(_wire(schema, False)))
