""":class:`LLMJudge`: a chat backend made into a :class:`Judge`.

The one place where a judge call happens: limiter, backend, parsing, and the single
re-ask with the validation error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel

from contextlens.engine.limiter import Limiter
from contextlens.errors import JudgeError
from contextlens.judges.base import ChatBackend, Judgement, Message, Usage
from contextlens.judges.parsing import (
    DEFAULT_BOS,
    DEFAULT_EOS,
    ReplyError,
    parse_reply,
    reask_messages,
)

T = TypeVar("T", bound=BaseModel)
log = logging.getLogger("contextlens.judge")


class LLMJudge:
    """Judge through a chat backend.

    A reply that does not parse or validate is re-asked once with the error; a second
    bad reply raises :class:`JudgeError` with the reason. ``max_concurrency`` bounds the
    calls in flight through this judge, whoever makes them.
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        max_concurrency: int = 16,
        bos_json_clause: str = DEFAULT_BOS,
        eos_json_clause: str = DEFAULT_EOS,
        limiter: Limiter | None = None,
    ) -> None:
        self.backend = backend
        self.bos, self.eos = bos_json_clause, eos_json_clause
        self.limiter = limiter or Limiter(max_concurrency)

    @property
    def name(self) -> str:
        return f"{self.backend.name}:{self.backend.model}"

    def __repr__(self) -> str:
        return f"LLMJudge({self.backend!r})"

    async def judge(self, messages: Sequence[Message], schema: type[T]) -> Judgement[T]:
        convo = list(messages)
        usage, latency, raw = Usage(), 0.0, ""
        for attempt in (1, 2):
            try:
                async with self.limiter.slot():
                    reply = await self.backend.complete(convo, schema=schema)
            except Exception as exc:
                raise JudgeError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
            usage, latency, raw = usage + reply.usage, latency + reply.latency, reply.text
            try:
                output = parse_reply(
                    reply.text, schema, parsed=reply.parsed, bos=self.bos, eos=self.eos
                )
            except ReplyError as exc:
                if attempt == 2:
                    raise JudgeError(f"invalid reply after one re-ask: {exc}", raw=raw) from None
                log.debug("re-asking %s after an invalid reply: %s", self.name, exc)
                convo = reask_messages(list(messages), reply.text, str(exc), self.bos, self.eos)
                continue
            return Judgement(output=output, raw=raw, usage=usage, latency=latency, attempts=attempt)
        raise AssertionError("unreachable")
