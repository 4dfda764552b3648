"""A judge that answers any reply schema with its smallest valid instance, read from the
schema's JSON schema: for tests that need every metric's judged path without writing a
reply per metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextlens.backend import Usage
from contextlens.judges.base import DEFAULT_FENCE, Fence, Judgement
from contextlens.testing.schemas import smallest


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
