"""Turning a judge's reply into a validated object: JSON extraction, validation, re-ask.

Every backend that returns text goes through here; no backend parses on its own.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contextlens.backend import Message
from contextlens.judges.base import DEFAULT_BOS, DEFAULT_EOS
from contextlens.judges.schema import LENIENT, wire_schema_json

T = TypeVar("T", bound=BaseModel)


class ReplyError(ValueError):
    """A reply that holds no valid object; the message says what was wrong."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


#: ``strict=False``: a raw newline or tab inside a string is taken as it is. Models write them,
#: and llama.cpp's JSON grammar lets them through.
_decoder = json.JSONDecoder(parse_constant=_reject_constant, strict=False)


def _objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in ``text``, in order."""
    found: list[dict[str, Any]] = []
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = _decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        pos = text.find("{", end)
    return found


def _fenced(text: str, bos: str, eos: str) -> list[str]:
    """The blocks between ``bos`` and ``eos`` markers."""
    blocks: list[str] = []
    start = text.find(bos) if bos else -1
    while start != -1:
        body_start = start + len(bos)
        end = text.find(eos, body_start) if eos else -1
        if end == -1:
            blocks.append(text[body_start:])  # unterminated: let the decoder judge it
            break
        blocks.append(text[body_start:end])
        start = text.find(bos, end + len(eos))
    return blocks


def extract_json(text: str, bos: str = DEFAULT_BOS, eos: str = DEFAULT_EOS) -> dict[str, Any]:
    """The JSON object of a reply.

    Looks between ``bos`` and ``eos`` first, then for a bare object anywhere in the text.
    When the reply holds several, the last is taken: a judge states its verdict at the end,
    after any text it quoted from the evaluated data. ``NaN`` and ``Infinity`` are rejected.
    """
    for block in reversed(_fenced(text, bos, eos)):
        objects = _objects(block)
        if objects:
            return objects[-1]
    objects = _objects(text)
    if objects:
        return objects[-1]
    if "{" in text:
        raise ReplyError("the reply has an unfinished or malformed JSON object (truncated?)")
    raise ReplyError("the reply holds no JSON object")


def _valid_unicode(value: Any) -> Any:
    """``value`` with each lone surrogate in its text (a JSON ``"\\ud800"`` escape, which
    cannot be written as UTF-8) replaced by U+FFFD."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {_valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid_unicode(v) for v in value]
    return value


def validate(data: Any, schema: type[T], *, lenient: bool = False) -> T:
    """Validate ``data`` (an object, dict or JSON string) against ``schema``; ``lenient``
    for a reply that was not decoded under the schema (see
    :func:`~contextlens.judges.schema.verdict_token`)."""
    if isinstance(data, schema):
        return data
    if isinstance(data, BaseModel):
        data = data.model_dump()
    context = LENIENT if lenient else None
    try:
        if isinstance(data, str):
            return schema.model_validate_json(data, context=context)
        return schema.model_validate(_valid_unicode(data), context=context)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}" for e in exc.errors()
        )
        raise ReplyError(f"the reply does not match the schema: {problems}") from None


def parse_reply(
    text: str,
    schema: type[T],
    *,
    parsed: Any = None,
    bos: str = DEFAULT_BOS,
    eos: str = DEFAULT_EOS,
    constrained: bool = True,
) -> T:
    """A validated ``schema`` object from a backend's reply.

    ``parsed`` is what a backend with structured output already decoded; it is validated
    the same way as text, strictly. Text that was not decoded under the schema
    (``constrained=False``: a judge asked with the prompt alone) is read leniently where the
    schema allows it: a verdict ``"Yes."`` counts as ``"yes"``, as DeepEval reads it.
    """
    if parsed is not None:
        return validate(parsed, schema)
    return validate(extract_json(text, bos, eos), schema, lenient=not constrained)


def compact_schema_json(schema: type[BaseModel]) -> str:
    """The reply schema as the prompt shows it and a backend sends it: compact JSON of
    :func:`~contextlens.judges.schema.wire_schema`."""
    return wire_schema_json(schema)


#: How the closing instruction of a prompt begins (what a server that enforces the schema
#: has replaced, :func:`~contextlens.judges.formats.compact_instructions`).
INSTRUCTIONS_OPENING = "Answer with one JSON object that follows this JSON schema"


@lru_cache(maxsize=256)
def format_instructions(
    schema: type[BaseModel], bos: str = DEFAULT_BOS, eos: str = DEFAULT_EOS
) -> str:
    """The closing instruction of a prompt: answer with one JSON object of this schema."""
    schema_json = compact_schema_json(schema)
    return f"{INSTRUCTIONS_OPENING}, between {bos} and {eos}:\n{schema_json}"


#: Characters of an invalid reply, and of what was wrong with it, sent back in the re-ask: a
#: reply that ran on (or a hostile one of megabytes) is not sent back whole.
MAX_REASK_CHARS = 2000


def _cut(text: str) -> str:
    return text if len(text) <= MAX_REASK_CHARS else text[:MAX_REASK_CHARS] + " [...]"


def reask_messages(
    messages: list[Message], reply: str, error: str, bos: str = DEFAULT_BOS, eos: str = DEFAULT_EOS
) -> list[Message]:
    """The conversation for the one re-ask after an invalid reply: the prompt, the reply (its
    first :data:`MAX_REASK_CHARS` characters) and what was wrong with it."""
    reply, error = _cut(reply), _cut(error)
    return [
        *messages,
        {"role": "assistant", "content": reply},
        {
            "role": "user",
            "content": (
                f"Your reply could not be used: {error}. Reply again with only the JSON "
                f"object, between {bos} and {eos}, following the schema given above."
            ),
        },
    ]
