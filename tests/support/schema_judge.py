"""A judge that answers any reply schema with its smallest valid instance, read from the
schema's JSON schema: for tests that need every metric's judged path without writing a
reply per metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextlens.backend import Usage
from contextlens.judges.base import DEFAULT_FENCE, Fence, Judgement


def smallest(node: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The smallest value the JSON schema ``node`` accepts (the first enum value, the
    lower bound, the fewest items, a one-letter string)."""
    if "$ref" in node:
        return smallest(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            return smallest(node[key][0], defs)
    if "enum" in node:
        return node["enum"][0]
    if "const" in node:
        return node["const"]
    kind = node.get("type")
    if kind == "object":
        props = node.get("properties", {})
        return {name: smallest(props[name], defs) for name in node.get("required", [])}
    if kind == "array":
        return [smallest(node.get("items", {}), defs) for _ in range(node.get("minItems", 0))]
    if kind == "string":
        return "x" * max(1, node.get("minLength", 1))
    if kind in ("number", "integer"):
        return node.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


class SchemaJudge:
    """Replies to every call with the smallest valid instance of its schema; counts calls."""

    name = "schema-judge"

    def __init__(self) -> None:
        self.calls = 0

    def connection_key(self) -> str:
        return self.name

    def max_connections(self) -> int:
        return 4

    async def judge(
        self, messages: Sequence[Any], schema: type[Any], *, fence: Fence = DEFAULT_FENCE
    ) -> Judgement[Any]:
        self.calls += 1
        wire = schema.model_json_schema()
        reply = smallest(wire, wire.get("$defs", {}))
        return Judgement(schema.model_validate(reply), str(reply), Usage(10, 5), 0.0)
