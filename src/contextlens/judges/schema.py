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
from collections.abc import Sequence
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, Field, WithJsonSchema

from contextlens.backend import Message

__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "SCORE_ANCHORS",
    "Score",
    "reply_token_budget",
    "text_field",
    "wire_schema",
    "wire_schema_json",
]

#: The scores a judge may give: 0.0 to 1.0 in steps of 0.1 (the prompts' anchors and the
#: points between them).
SCORE_ANCHORS: tuple[float, ...] = tuple(round(i / 10, 1) for i in range(11))

#: A judge's score: any number in [0, 1] validates; the wire schema offers the anchors only,
#: so a constrained decoder cannot produce 2.5.
Score = Annotated[
    float,
    Field(ge=0.0, le=1.0, allow_inf_nan=False),
    WithJsonSchema({"type": "number", "enum": list(SCORE_ANCHORS), "description": "0.0 to 1.0"}),
]

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


def reply_token_budget(schema: type[BaseModel] | None, messages: Sequence[Message]) -> int:
    """The completion tokens a reply in ``schema`` to ``messages`` needs at most.

    A schema says so with a class method ``reply_tokens(messages) -> int`` (a reply that
    restates the prompt's chunks needs room in proportion to them); otherwise
    :data:`DEFAULT_REPLY_TOKENS`.
    """
    budget = getattr(schema, "reply_tokens", None)
    if callable(budget):
        return int(budget(messages))
    return DEFAULT_REPLY_TOKENS
