"""A tool call an assistant made: its name, its input and its output.

:class:`ToolCall` reads DeepEval's ``ToolCall`` (``name``, ``description``,
``input_parameters``, ``output``), the OpenAI shape (``{"type": "function", "function":
{"name", "arguments"}}``, with the result as ``output``, ``result`` or ``content``) and the MCP
shape (``name``, ``arguments``, a ``result`` or ``content`` list of ``{"type": "text",
"text"}`` parts). :func:`tool_calls` turns a case field into a list of them, or says which
field and which item is not a tool call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

__all__ = ["TOOL_FIELDS", "ToolCall", "labelled", "labelled_calls", "tool_calls"]

_OUTPUT_KEYS = ("output", "result", "content", "response")
_INPUT_KEYS = ("input", "input_parameters", "arguments", "args", "parameters")


class ToolCall(BaseModel):
    """One tool call: ``name``, its ``input`` (the arguments) and its ``output`` as text
    (None when the call has no output); ``description`` when the caller gave one."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    description: str | None = None
    input: dict[str, Any] | str | None = None
    output: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shapes(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            value = _attributes(value)
        if not isinstance(value, dict):
            return value
        data = dict(value)
        function = data.get("function")
        if isinstance(function, dict):  # OpenAI: {"type": "function", "function": {...}}
            data = {**function, **{k: v for k, v in data.items() if k != "function"}}
        out: dict[str, Any] = {"name": data.get("name"), "description": data.get("description")}
        out["input"] = _first(data, _INPUT_KEYS)
        if isinstance(out["input"], str):
            try:
                parsed = json.loads(out["input"])
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                out["input"] = parsed
        output = _first(data, _OUTPUT_KEYS)
        out["output"] = None if output is None else _text(output)
        return out


def _attributes(value: Any) -> Any:
    """A DeepEval ``ToolCall`` or another object with ``name``: its attributes as a dict."""
    if isinstance(value, BaseModel):
        return value.model_dump()
    if hasattr(value, "name") and not isinstance(value, str | bytes):
        keys = ("name", "description", *_INPUT_KEYS, *_OUTPUT_KEYS)
        return {k: getattr(value, k) for k in keys if hasattr(value, k)}
    return value


def _first(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


def _text(output: Any) -> str:
    """A tool's output as text: MCP's list of text parts joined, other values as JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and "content" in output and len(output) <= 2:
        return _text(output["content"])
    if isinstance(output, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in output
    ):
        return "\n".join(str(p.get("text", "")) for p in output)
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def tool_calls(value: Any, field: str) -> list[ToolCall] | None:
    """``value`` (a list of tool calls in any shape :class:`ToolCall` reads, or None) as
    tool calls; ValueError naming ``field`` and the item when it is not one."""
    if value is None:
        return None
    if isinstance(value, dict | str | bytes) or not isinstance(value, list | tuple):
        raise ValueError(
            f"{field} must be a list of tool calls (each with a name), not {type(value).__name__}"
        )
    calls = []
    for k, item in enumerate(value):
        if isinstance(item, ToolCall):
            calls.append(item)
            continue
        try:
            calls.append(ToolCall.model_validate(item))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "item"
            raise ValueError(f"{field}[{k}] is not a tool call: {where}: {first['msg']}") from None
    return calls


#: The case fields that hold tool calls, in the order their outputs are shown.
TOOL_FIELDS = ("tools_called", "mcp_tools_called")


def labelled(calls: Sequence[ToolCall], field: str = "tools_called") -> list[tuple[str, ToolCall]]:
    """``calls`` (the tool calls of ``field``), each with the label the claims and the report
    name it by: ``tools_called[0] (weather)``."""
    return [(f"{field}[{k}] ({call.name})", call) for k, call in enumerate(calls)]


def labelled_calls(holder: Any) -> list[tuple[str, ToolCall]]:
    """The tool calls of ``holder`` (a case or a turn) in :data:`TOOL_FIELDS`, labelled."""
    return [
        pair
        for field in TOOL_FIELDS
        for pair in labelled(getattr(holder, field, None) or [], field)
    ]
