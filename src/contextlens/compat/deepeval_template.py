"""DeepEval's template protocol for contextual relevancy: ``evaluation_template`` made into
the :class:`~contextlens.metrics.contextual_relevancy.RelevancyPrompt` the core metric takes.

A DeepEval-shaped template is a class or object with ``generate_verdicts(input, context)``
and optionally ``generate_reason(input, irrelevant_statements, relevant_statements,
score)``; DeepEval before 3.5 named the second ``irrelevancies``, and either name is given
as the template's signature says. Also taken: an object with ``system`` / ``user`` strings,
or a callable. The reply format is always appended, so the reply can still be validated.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from string import Template
from typing import Any

from contextlens.backend import Message
from contextlens.metrics.base import load_prompt
from contextlens.metrics.relevancy_prompt import (
    FORMAT_OVERRIDE,
    SYSTEM_PROMPT,
    USER_PROMPT,
    RelevancyPrompt,
)

__all__ = ["IRRELEVANT_NAMES", "ContextualRelevancyTemplate", "relevancy_prompt"]


class ContextualRelevancyTemplate:
    """DeepEval's template shape, with contextlens's prompts: subclass it and override
    ``generate_verdicts`` and/or ``generate_reason`` (static methods returning the prompt
    text), then pass the class as ``evaluation_template``.

    ``generate_verdicts`` gets the delimited input and every chunk, numbered, at once (one
    judge call per test case); the reply format is appended to what it returns.
    ``generate_reason``, when overridden, is asked in a second call with the statements
    found irrelevant (their reasons), the relevant ones and the computed score.
    """

    @staticmethod
    def generate_verdicts(input: str, context: str) -> str:
        system = load_prompt(SYSTEM_PROMPT).safe_substitute(format="")
        user = load_prompt(USER_PROMPT).safe_substitute(input=input, chunks=context)
        return f"{system.strip()}\n\n{user}"

    @staticmethod
    def generate_reason(
        input: str, irrelevant_statements: list[str], relevant_statements: list[str], score: float
    ) -> str:
        return (
            f"In one or two sentences, say why the retrieved context scores {score} for "
            f"relevance to the input.\n{input}\nIrrelevant, with why: {irrelevant_statements}\n"
            f"Relevant statements: {relevant_statements}"
        )


#: What DeepEval's templates call the reasons of the statements found irrelevant in
#: ``generate_reason``: agensight's and DeepEval's since 3.5, then DeepEval's before.
IRRELEVANT_NAMES = ("irrelevant_statements", "irrelevancies")


def _parameters(fn: Callable[..., Any]) -> tuple[set[str], bool]:
    """The keywords ``fn`` takes by name, and whether it takes ``**kwargs``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return set(), True
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def _verdicts_text(generate: Callable[..., Any], input_block: str, chunks_block: str) -> str:
    """A template's ``generate_verdicts`` prompt; ``multimodal=False`` when it takes that
    keyword (the judge is sent text only)."""
    named, _ = _parameters(generate)
    extra = {"multimodal": False} if "multimodal" in named else {}
    return str(generate(input=input_block, context=chunks_block, **extra))


def _reason_text(
    generate: Callable[..., Any],
    input_block: str,
    irrelevant: list[str],
    relevant: list[str],
    score: float,
) -> str:
    """A template's ``generate_reason`` prompt. The values go by the names its signature
    takes (the irrelevant statements under either of :data:`IRRELEVANT_NAMES`), so an
    override may name only some of them; by position, in DeepEval's order, when it names
    none of them."""
    named, spread = _parameters(generate)
    irrelevant_name = next((n for n in IRRELEVANT_NAMES if n in named), IRRELEVANT_NAMES[0])
    values: dict[str, Any] = {
        "input": input_block,
        irrelevant_name: irrelevant,
        "relevant_statements": relevant,
        "score": score,
        "multimodal": False,
    }
    if spread:
        return str(generate(**{k: v for k, v in values.items() if k != "multimodal" or k in named}))
    taken = {k: v for k, v in values.items() if k in named}
    if not taken:
        return str(generate(input_block, irrelevant, relevant, score))
    return str(generate(**taken))


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"\$(?:{name}\b|\{{{name}\}})", text) is not None


def _overrides(template: Any, method: str) -> bool:
    """Whether a DeepEval-shaped template brings its own ``method``."""
    own = getattr(template, method, None)
    return callable(own) and own is not getattr(ContextualRelevancyTemplate, method)


def relevancy_prompt(template: Any) -> RelevancyPrompt | None:
    """The prompt ``evaluation_template`` stands for (None: the default prompts): a
    DeepEval-shaped template (``generate_verdicts``, optionally ``generate_reason``), an
    object with ``system`` and/or ``user`` ``string.Template`` texts (``$input``,
    ``$chunks``, ``$format``; the format is appended when no text uses it), or a callable
    ``(input=..., chunks=..., format=...) -> str``. A TypeError names what it takes else."""
    if template is None:
        return None
    if hasattr(template, "generate_verdicts"):
        reason = template.generate_reason if _overrides(template, "generate_reason") else None
        own = _overrides(template, "generate_verdicts")
        if not own and reason is None:
            return None  # ours, unchanged: the default prompts
        generate = template.generate_verdicts

        def from_deepeval(input_block: str, chunks_block: str, fmt: str) -> list[Message]:
            text = _verdicts_text(generate, input_block, chunks_block)
            return [{"role": "user", "content": f"{text}\n\n{FORMAT_OVERRIDE}\n{fmt}"}]

        def reason_text(
            input_block: str, irrelevant: list[str], relevant: list[str], score: float
        ) -> str:
            assert reason is not None
            return _reason_text(reason, input_block, irrelevant, relevant, score)

        return RelevancyPrompt(
            from_deepeval if own else None,
            reason_text if reason is not None else None,
            _source(template),
        )
    system = getattr(template, "system", None)
    user = getattr(template, "user", None)
    if isinstance(system, str) or isinstance(user, str):
        system_text = system if isinstance(system, str) else load_prompt(SYSTEM_PROMPT).template
        user_text = user if isinstance(user, str) else load_prompt(USER_PROMPT).template
        has_format = _mentions(system_text, "format") or _mentions(user_text, "format")

        def from_texts(input_block: str, chunks_block: str, fmt: str) -> list[Message]:
            values = {"input": input_block, "chunks": chunks_block, "format": fmt}
            user_msg = Template(user_text).safe_substitute(values)
            if not has_format:
                user_msg += "\n" + fmt
            return [
                {"role": "system", "content": Template(system_text).safe_substitute(values)},
                {"role": "user", "content": user_msg},
            ]

        return RelevancyPrompt(from_texts, source=_source(template))
    if callable(template) and not isinstance(template, type):

        def from_callable(input_block: str, chunks_block: str, fmt: str) -> list[Message]:
            text = str(template(input=input_block, chunks=chunks_block, format=fmt))
            if fmt not in text:
                text += "\n" + fmt
            return [{"role": "user", "content": text}]

        return RelevancyPrompt(from_callable, source=_source(template))
    raise TypeError(
        "evaluation_template must be a DeepEval-style template (generate_verdicts), have a "
        "'system' and/or 'user' string attribute, or be a callable "
        f"(input=..., chunks=..., format=...) -> str; got {template!r}"
    )


def _source(template: Any) -> str:
    """What a template is called in a run's settings: its class or function name."""
    kind = template if isinstance(template, type) or callable(template) else type(template)
    module = getattr(kind, "__module__", "")
    return f"evaluation_template {module}.{getattr(kind, '__qualname__', type(template).__name__)}"
