"""What every metric is given and shares: :class:`Services`, how prompts are built, and the
size limits of what a metric sends to a judge or an embedder (the contract itself is
:mod:`contextlens.metrics.metric`)."""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from string import Template
from typing import TYPE_CHECKING, Any

from contextlens.backend import Message
from contextlens.errors import JudgeError
from contextlens.judges.base import DEFAULT_FENCE, Fence, Judge
from contextlens.judges.parsing import format_instructions
from contextlens.schemas import MetricDetails

if TYPE_CHECKING:
    from pydantic import BaseModel

    from contextlens.embeddings.base import Embedder

#: The pass mark of a metric that has no threshold of its own (scores are probabilities).
DEFAULT_PASS = 0.5


class ReaderDetails(MetricDetails):
    """The details of a metric with an offline reader: offline, which one scored
    (``offline_model``, ``offline_model_is``) and, for a case not in English, what that
    meant (``language``; see :mod:`contextlens.offline.routes`)."""

    offline_model: str | None = None
    offline_model_is: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class Triage:
    """A triage run's part of a metric's services (see
    :meth:`~contextlens.metrics.metric.Metric.score`). ``counter``: a judge that makes no
    call, asked what the judge would have been sent for each item the offline scorer
    decides, so the run can say what it saved (None: not counted)."""

    counter: Judge | None = None


@dataclass(frozen=True)
class Services:
    """What a metric may call: a judge (None means its offline algorithm) and an embedder;
    ``triage`` in a triage run (the offline scorer decides the items outside the metric's
    band, the judge the rest)."""

    judge: Judge | None
    embedder: Embedder
    triage: Triage | None = None


@cache
def load_prompt(name: str, package: str = "contextlens.metrics.prompts") -> Template:
    """A prompt template shipped as a package file (default ``contextlens/metrics/prompts/``)."""
    text = resources.files(package).joinpath(name).read_text("utf-8")
    return Template(text)


#: The names of the data blocks the prompts use (a name first used by :class:`DataBlocks`
#: joins): what a forged block would have to be called.
DATA_TAGS: set[str] = {
    "input",
    "output",
    "expected_output",
    "context",
    "chunk",
    "user_query",
    "assistant_reply",
    "reference_reply",
    "observation",
}
_tags_lock = threading.Lock()


class DataBlocks:
    """The data blocks of one prompt, with boundaries the data cannot contain.

    Evaluated text is data: it must not be able to close its block, open another, and speak
    as the prompt. Each block is ``<NAME_MARK>``, a newline, the text exactly as given, a
    newline, ``</NAME_MARK>``. ``MARK`` is derived from a hash of every text of the prompt
    (given to the constructor), and re-derived in the rare case that any of them holds
    ``_MARK>``: no text can hold a boundary of its prompt, so none can end its block early
    or forge another, and nothing in a text is rewritten. The same texts give the same mark,
    so the same case gives the same prompt (and the same cache key).
    """

    def __init__(self, *texts: str | None) -> None:
        given = [t or "" for t in texts]
        self.mark = next(m for m in self.candidates(given) if not any(f"_{m}>" in t for t in given))
        self._texts = set(given)

    @staticmethod
    def candidates(texts: Sequence[str]) -> Iterator[str]:
        """The marks ``texts`` may get, in the order they are tried: six hex digits of a
        blake2b hash of the texts and a counter."""
        digest = hashlib.blake2b(digest_size=8)
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "little") + data)
        for salt in itertools.count():
            candidate = digest.copy()
            candidate.update(salt.to_bytes(8, "little"))
            yield candidate.hexdigest()[:6]

    def __call__(self, tag: str, text: str) -> str:
        """``text`` in a block named ``tag`` (one of the texts the blocks were made for)."""
        if text and text not in self._texts:
            raise ValueError(f"data block {tag!r}: the text is not one of this prompt's texts")
        if tag not in DATA_TAGS:
            with _tags_lock:
                DATA_TAGS.add(tag)
        return f"<{tag}_{self.mark}>\n{text}\n</{tag}_{self.mark}>"


def data_block(tag: str, text: str) -> str:
    """``text`` alone in a block named ``tag`` (see :class:`DataBlocks`); a prompt with
    several texts makes one :class:`DataBlocks` of all of them."""
    return DataBlocks(text)(tag, text)


def build_messages(
    system: str,
    user: str,
    schema: type[BaseModel],
    fence: Fence = DEFAULT_FENCE,
    *,
    system_values: Mapping[str, str] | None = None,
    **values: str,
) -> list[Message]:
    """System and user messages from two prompt files.

    ``values`` fill the user prompt and are already-delimited data blocks; ``system_values``
    fill the system prompt's own placeholders besides ``$format``.
    """
    fixed = tuple(sorted((system_values or {}).items()))
    return [
        {"role": "system", "content": _system_text(system, schema, fence, fixed)},
        {"role": "user", "content": load_prompt(user).substitute(**values)},
    ]


@lru_cache(maxsize=128)
def _system_text(
    system: str, schema: type[BaseModel], fence: Fence, values: tuple[tuple[str, str], ...]
) -> str:
    """The system prompt ``system`` filled in (the same for every call of a metric: made once)."""
    instructions = format_instructions(schema, fence.bos, fence.eos)
    return load_prompt(system).substitute(format=instructions, **dict(values))


# --- size limits ----------------------------------------------------------------------------

#: The prompt budget of one judge call, the same for every metric (``max_prompt_tokens``), in
#: tokens estimated as characters / 4.
DEFAULT_MAX_PROMPT_TOKENS = 12_000
#: The longest text a metric embeds (``max_embed_tokens``: its offline path, and context
#: similarity), in tokens estimated as characters / 4 (200,000 characters).
DEFAULT_MAX_EMBED_TOKENS = 50_000


class OverBudget(Exception):
    """A prompt or a text over its metric's limit: it is not sent; ``str()`` says why and
    ``limit`` names the setting (``max_prompt_tokens``, ``max_embed_tokens``)."""

    def __init__(self, message: str | None, limit: str | None = "max_prompt_tokens") -> None:
        super().__init__(message)
        self.limit = limit


def text_tokens(text: str) -> int:
    """Tokens of ``text``, estimated as characters / 4."""
    return math.ceil(len(text) / 4)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Prompt tokens, estimated as characters / 4."""
    return math.ceil(sum(len(m["content"]) for m in messages) / 4)


def size_limit(name: str, value: Any) -> int:
    """``value`` checked as a size limit (an int >= 1); ValueError naming ``name`` else."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def over_budget(tokens: int, budget: int, what: str = "the prompt would be") -> str | None:
    """Why a prompt of ``tokens`` may not be sent (its size and the budget), or None."""
    if tokens <= budget:
        return None
    return f"{what} ~{tokens:,} tokens, over the budget of {budget:,}; not sent"


def prompt_over_budget(messages: Sequence[Message], budget: int) -> str | None:
    """Why ``messages`` may not be sent (:func:`over_budget`), or None within ``budget``."""
    return over_budget(estimate_tokens(messages), budget)


def too_long(texts: Iterable[tuple[str, str]], limit: int) -> str | None:
    """Why the first of ``(field, text)`` longer than ``limit`` tokens is not embedded (its
    size and the limit), or None when every text fits."""
    for field, text in texts:
        tokens = text_tokens(text or "")
        if tokens > limit:
            return (
                f"{field} is ~{tokens:,} tokens ({len(text):,} characters), over the limit of "
                f"{limit:,} tokens per embedded text; not scored"
            )
    return None


#: Characters of a judge's last reply kept with a failed item.
MAX_RAW_REPLY = 2000


def raw_reply(exc: JudgeError) -> str | None:
    """What the judge last said when its reply could not be used (so a user sees it in
    results.jsonl and the report), cut to :data:`MAX_RAW_REPLY`; None when no reply came."""
    if not exc.raw:
        return None
    return exc.raw if len(exc.raw) <= MAX_RAW_REPLY else exc.raw[:MAX_RAW_REPLY] + "..."


#: Said with every offline run: the offline scorers' calibration does not carry from one kind
#: of data to another (``benchmarks/select_support.py`` and
#: ``benchmarks/fit_reader_calibration.py`` print the expected calibration error per held-out
#: source), so their scores order items but their level is not a probability on the user's
#: data.
OFFLINE_SCALE_NOTE = (
    "Offline scores rank items; their scale does not carry over to your data (a 0.7 here is "
    "not a 70 % chance). Set a pass mark with `contextlens calibrate` on your own labels."
)
