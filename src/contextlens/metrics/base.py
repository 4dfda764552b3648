"""What every metric shares: the services it is given and how prompts are built."""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from string import Template
from typing import TYPE_CHECKING, Any, Protocol

from contextlens.judges.base import Judge, Message
from contextlens.judges.parsing import DEFAULT_BOS, DEFAULT_EOS, format_instructions
from contextlens.judges.resolve import resolve_judge

if TYPE_CHECKING:
    from pydantic import BaseModel

    from contextlens.embeddings.base import Embedder


#: Which repeat of an item is being judged (``evaluate(..., repeats=k)``); part of the cache key.
current_repeat: ContextVar[int] = ContextVar("contextlens_repeat", default=0)


def _default_embedder() -> Embedder:
    from contextlens.embeddings.minilm import default_embedder

    return default_embedder()


@dataclass(frozen=True)
class Services:
    """What a metric may call: a judge (None means the offline path) and an embedder."""

    judge: Judge | None = None
    embedder: Embedder = field(default_factory=_default_embedder)
    bos_json_clause: str = DEFAULT_BOS
    eos_json_clause: str = DEFAULT_EOS


def make_services(
    model: Any = None,
    *,
    embedder: Embedder | None = None,
    use_structured_output: bool = False,
    bos_json_clause: str = DEFAULT_BOS,
    eos_json_clause: str = DEFAULT_EOS,
) -> Services:
    """Services for a facade's ``model=`` (anything :func:`resolve_judge` takes)."""
    judge = resolve_judge(
        model,
        use_structured_output=use_structured_output,
        bos_json_clause=bos_json_clause,
        eos_json_clause=eos_json_clause,
    )
    extra: dict[str, Any] = {"embedder": embedder} if embedder is not None else {}
    return Services(
        judge=judge, bos_json_clause=bos_json_clause, eos_json_clause=eos_json_clause, **extra
    )


class Metric(Protocol):
    """A metric: configuration plus one stateless coroutine.

    ``compute`` may be called by many tasks at once with the same object; it returns a
    result object and changes nothing on ``self``.
    """

    name: str
    case_type: type

    async def compute(self, case: Any, services: Services) -> Any: ...


#: The pass mark of a metric that has no threshold of its own (scores are probabilities).
DEFAULT_PASS = 0.5


def metric_threshold(metric: Any) -> float | None:
    """A metric's own pass mark: its ``threshold`` (DeepEval style) or ``score_threshold``
    attribute, ``None`` when it has neither."""
    for attr in ("threshold", "score_threshold"):
        value = getattr(metric, attr, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


@cache
def load_prompt(name: str) -> Template:
    """A prompt template shipped in ``contextlens/metrics/prompts/``."""
    text = resources.files("contextlens.metrics.prompts").joinpath(name).read_text("utf-8")
    return Template(text)


def data_block(tag: str, text: str) -> str:
    """``text`` inside ``<tag>`` delimiters, with any copy of the delimiters in it defused.

    Evaluated text is data: it must not be able to close its block and speak as the prompt.
    """
    defused = _delimiter(tag).sub(lambda m: f"&lt;{m.group(1)}&gt;", text)
    return f"<{tag}>\n{defused}\n</{tag}>"


@cache
def _delimiter(tag: str) -> re.Pattern[str]:
    """``<tag>`` and ``</tag>`` in any case and spacing."""
    return re.compile(rf"<(\s*/?\s*{re.escape(tag)}\s*)>", re.IGNORECASE)


def build_messages(
    system: str,
    user: str,
    schema: type[BaseModel],
    services: Services,
    *,
    system_values: Mapping[str, str] | None = None,
    **values: str,
) -> list[Message]:
    """System and user messages from two prompt files.

    ``values`` fill the user prompt and are already-delimited data blocks; ``system_values``
    fill the system prompt's own placeholders besides ``$format``.
    """
    instructions = format_instructions(schema, services.bos_json_clause, services.eos_json_clause)
    system_text = load_prompt(system).substitute(format=instructions, **(system_values or {}))
    return [
        {"role": "system", "content": system_text},
        {"role": "user", "content": load_prompt(user).substitute(**values)},
    ]
