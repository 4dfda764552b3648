"""The judge protocol: prompt messages and a reply schema in, a validated reply out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict

from contextlens.backend import Message, Usage

T = TypeVar("T", bound=BaseModel)

DEFAULT_BOS = "```json"
DEFAULT_EOS = "```"


class Reply(BaseModel):
    """Base of the reply schemas a judge fills in. Strict: a number must be a JSON number
    (``"0.9"`` and ``true`` are refused, not coerced), text must be text."""

    model_config = ConfigDict(strict=True)


@dataclass(frozen=True)
class Fence:
    """The markers a judge is asked to put its JSON reply between, and that the reply is
    read from (gaussia's ``bos_json_clause`` / ``eos_json_clause``)."""

    bos: str = DEFAULT_BOS
    eos: str = DEFAULT_EOS


DEFAULT_FENCE = Fence()


@dataclass
class Judgement(Generic[T]):
    """A validated judge reply."""

    output: T
    raw: str
    usage: Usage
    latency: float
    attempts: int = 1


@runtime_checkable
class Judge(Protocol):
    """Prompt messages and a pydantic schema in, a validated :class:`Judgement` out.

    ``fence`` says where the prompt asked for the JSON reply. Raises
    :class:`contextlens.errors.JudgeError` when no valid reply could be had.
    ``connection_key()`` names what its calls share a concurrency bound with (the endpoint
    and model), ``max_connections()`` is that bound (as Inspect AI's model API says them),
    so a runner sizes its work without knowing the judge's class.
    """

    @property
    def name(self) -> str:
        """The judge as shown and accounted: its kind and model."""
        ...

    def connection_key(self) -> str: ...

    def max_connections(self) -> int: ...

    async def judge(
        self, messages: Sequence[Message], schema: type[T], *, fence: Fence = DEFAULT_FENCE
    ) -> Judgement[T]: ...
