"""The smallest valid instance of a JSON schema: what fake judges answer any reply schema
with, so a test or a benchmark can run every metric's judged path without a reply per metric."""

from __future__ import annotations

from typing import Any

__all__ = ["smallest"]


def smallest(node: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The smallest value the JSON schema ``node`` accepts (the first enum value, the
    lower bound, the fewest items, a one-letter string); ``defs``: its ``$defs``."""
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
    return False if kind == "boolean" else None
