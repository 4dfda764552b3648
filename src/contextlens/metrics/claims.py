"""The claims of one text checked against the retrieved chunks: what faithfulness (the
answer's claims) and context recall (the reference answer's claims) share.

With a judge, ONE call per case lists the chunks in numbered data blocks and asks for the
text's claims, each with the number of the chunk closest to it (the one that supports it, or
the nearest one for a claim none supports; 0 when no chunk is about it), a short reason and a
``"yes"``/``"no"`` verdict: an enum and a bounded list, so a constrained decoder always gives a
reply that validates. The score is computed here, ``supported claims / claims``, and the
reason starts with those counts, so score and reason cannot disagree. A case whose prompt is
over ``max_prompt_tokens`` fails with its size and is not sent: a claim is judged against all
chunks at once, so the chunks are not split over calls. A text in which the judge finds no
claim abstains: the item is not applicable (``"not applicable: the answer abstains"``), never
a 0.

Without a judge, the support model of the ``Context`` metric (``support_model``: the
features model of :func:`contextlens.offline.support.score_support` or the claim reader; a
text not in English is routed as :mod:`contextlens.offline.routes` says) gives each claim
(each sentence of the text) its probability of being supported by the chunks; the score is
the mean of those probabilities, the expected share of supported claims, and a claim's
verdict is "yes" from 0.5. The closest chunk of a claim is the one holding the sentence most
similar to it (MiniLM cosine).

Offline, a text that makes no checkable claim (a refusal, "I don't know", a greeting, a
question back: :func:`contextlens.offline.abstention.abstention`) is not applicable, as with a
judge. A case whose text, input or any chunk is in a language other than English says so in
its reason and ``details.language``; when the text itself, or every chunk that tells, is in
such a language and no multilingual reader is installed, the item is ``"not applicable:
needs a judge"``: the English reader would only guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, create_model

from contextlens.backend import Message
from contextlens.embeddings.base import Embedder, embed_distinct
from contextlens.errors import InputError
from contextlens.judges.base import Judge, Reply
from contextlens.judges.schema import Verdict, text_field
from contextlens.metrics.base import (
    DataBlocks,
    OverBudget,
    ReaderDetails,
    Services,
    build_messages,
    prompt_over_budget,
    too_long,
)
from contextlens.metrics.calls import chunk_blocks, token_usage
from contextlens.metrics.chunks import ChunkedConfig, DuplicateGroup, Unit, chunk_units
from contextlens.metrics.config import SUPPORT_FILES
from contextlens.metrics.metric import Metric, Score
from contextlens.offline.abstention import KINDS, NO_CLAIM, abstention
from contextlens.offline.language import Unread, language_of, unread_texts
from contextlens.offline.routes import support_route, support_scorer
from contextlens.offline.support import SupportItem
from contextlens.offline.text import sentences
from contextlens.offline.triage import bundled_band
from contextlens.schemas import ModelTestCase, TriageBand
from contextlens.tools import labelled_calls

__all__ = [
    "ClaimConfig",
    "ClaimMetric",
    "ClaimVerdict",
    "ClaimsDetails",
    "case_chunks",
    "claims_schema",
]


class ClaimVerdict(BaseModel):
    """One claim, whether the chunks support it, and the chunk closest to it (its 0-based
    index in ``retrieval_context``; None when no chunk is about it). Offline adds the
    claim's ``support`` (a probability)."""

    claim: str
    verdict: Literal["yes", "no"]
    chunk: int | None
    reason: str
    support: float | None = None
    tool: str | None = None
    """When the evidence closest to the claim is a tool's output rather than a chunk: which
    one (``tools_called[0] (weather)``); ``chunk`` is then None."""


class ClaimsDetails(ReaderDetails):
    """The claims and their verdicts, the counts the score is computed from, the
    near-duplicate chunks when they were looked for, (offline) the reader that scored, and
    for a text that abstains its kind (a key of
    :data:`~contextlens.offline.abstention.KINDS`)."""

    method: Literal["judge", "offline"] | None = None
    abstention: str | None = None
    claims: list[ClaimVerdict] = Field(default_factory=list)
    supported: int = 0
    total: int = 0
    duplicates: list[DuplicateGroup] | None = None
    latency: float | None = None


class ClaimsReply(Reply):
    """Base of :func:`claims_schema`'s replies: sized by the text whose claims they list."""

    n_claims: ClassVar[int] = 6

    @classmethod
    def reply_tokens(cls, messages: Sequence[Message]) -> int:
        return 256 + 96 * cls.n_claims


@cache
def claims_schema(n_chunks: int, max_claims: int) -> type[ClaimsReply]:
    """The reply schema of a call over ``n_chunks`` numbered chunks: up to ``max_claims``
    claims (none for a text that asserts nothing), each with its closest chunk (0 to
    ``n_chunks``), a reason and a verdict."""
    numbers = tuple(range(n_chunks + 1))
    claim = create_model(
        "Claim",
        __base__=Reply,
        claim=(str, text_field("one fact the text states, self-contained, in a few words", 200)),
        chunk=(  # type: ignore[arg-type]  # a Literal of the call's chunk numbers
            Literal[numbers],
            Field(description="the number of the closest chunk; 0 when no chunk is about it"),
        ),
        reason=(str, text_field("at most fifteen words", 120)),
        verdict=(Verdict, ...),
    )
    model = create_model(
        "Claims",
        __base__=ClaimsReply,
        claims=(
            list[claim],
            Field(min_length=0, max_length=max_claims),
        ),
    )
    model.n_claims = max_claims
    return model


def _max_claims(text: str) -> int:
    return max(6, 2 * len(sentences(text)) + 2)


def case_chunks(case: ModelTestCase, metric: str) -> list[tuple[int, str]]:
    """The non-blank retrieved chunks of ``case`` with their index; InputError without any
    ``retrieval_context``."""
    if case.retrieval_context is None:
        raise InputError(f"{metric} needs the retrieved chunks", field="retrieval_context")
    return [(i, t) for i, t in enumerate(case.retrieval_context) if t and t.strip()]


def case_tools(case: ModelTestCase) -> list[tuple[str, str]]:
    """The outputs of the case's tool calls (``tools_called``, then ``mcp_tools_called``),
    each with its label (``tools_called[0] (weather)``): evidence beside the chunks."""
    return [
        (label, call.output)
        for label, call in labelled_calls(case)
        if call.output and call.output.strip()
    ]


def tool_blocks(tools: Sequence[tuple[str, str]], first: int, block: DataBlocks) -> str:
    """The tool outputs in tool data blocks, numbered on from the chunks (``first``)."""
    return "\n\n".join(
        f"Chunk {first + k} (the output of the tool call {label}):\n{block('tool', text)}"
        for k, (label, text) in enumerate(tools)
    )


class ClaimConfig(ChunkedConfig):
    """A claim metric's settings: the pass mark (default 0.5), the size limits, the
    near-duplicate options, the offline support model, its own judge and embedder.

    ``max_prompt_tokens``: the prompt budget of the judge call (characters / 4); a case over
    it fails with its size and is not sent. ``max_embed_tokens``: the longest text embedded
    (characters / 4): offline, the text and each chunk; with a judge, each chunk when
    near-duplicates are looked for."""

    threshold: float | None = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    triage_band: TriageBand | None = None
    """The offline scores a triage run sends to the judge (a :class:`TriageBand` or a
    ``(lower, upper)`` pair; None: the band measured for the support model,
    :func:`~contextlens.offline.triage.bundled_band`)."""


class ClaimMetric(Metric[ModelTestCase]):
    """Share of one text's claims that the retrieved chunks support.

    Settings: :class:`ClaimConfig`. Each subclass names its prompts (``prompt``), the case
    field whose claims it checks (``text_field``), how the text is shown to the judge
    (``text_tag``) and named in reasons (``text_name``), and the error of a case without it.
    """

    case_type = ModelTestCase
    details_type: ClassVar[type[ClaimsDetails]] = ClaimsDetails
    config_type = ClaimConfig
    offline_models = SUPPORT_FILES
    prompt: ClassVar[str]  # the prompt files are ``{prompt}_system.md`` and ``{prompt}_user.md``
    text_field: ClassVar[str]  # the case field whose claims are checked
    text_tag: ClassVar[str]  # the data block of the text in the prompt
    text_name: ClassVar[str]  # the text in reasons: "the answer"
    missing: ClassVar[str]  # the error of a case without the text
    config: ClaimConfig

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "prompt" in cls.__dict__:
            cls.prompts = (f"{cls.prompt}_system.md", f"{cls.prompt}_user.md")

    def triage_band(self) -> TriageBand | None:
        """Its own band, else the one measured for its support model (None: none was)."""
        return self.config.triage_band or bundled_band(self.config.support_model)

    def messages(
        self,
        question: str,
        text: str,
        units: Sequence[Unit],
        tools: Sequence[tuple[str, str]] = (),
    ) -> list[Message]:
        """The judge prompt: instructions, then the question, the text, the chunks and the
        tool outputs (numbered on from the chunks, in tool blocks)."""
        schema = claims_schema(len(units) + len(tools), _max_claims(text))
        texts = [u.text for u in units]
        block = DataBlocks(question, text, *texts, *(t for _, t in tools))
        chunks = chunk_blocks(texts, block) if units or not tools else ""
        if tools:
            chunks = "\n\n".join(
                p for p in (chunks, tool_blocks(tools, len(units) + 1, block)) if p
            )
        return build_messages(
            f"{self.prompt}_system.md",
            f"{self.prompt}_user.md",
            schema,
            input=block("input", question),
            text=block(self.text_tag, text),
            chunks=chunks,
        )

    async def judged(self, case: ModelTestCase, judge: Judge, services: Services) -> Score:
        question, text, chunks = self._read(case)
        method: Literal["judge"] = "judge"
        if self.config.chunk_options.threshold is not None:
            self._check_sizes([(f"retrieval_context[{i}]", t) for i, t in chunks])
        units, groups = await chunk_units(chunks, self.config.chunk_options, services.embedder)
        tools = case_tools(case)
        if not units and not tools:
            return self._no_chunks(self.details_type(method=method, duplicates=groups))
        messages = self.messages(question, text, units, tools)
        too_big = prompt_over_budget(messages, self.config.max_prompt_tokens)
        if too_big is not None:
            raise OverBudget(too_big)
        schema = claims_schema(len(units) + len(tools), _max_claims(text))
        judgement = await judge.judge(messages, schema)
        out: Any = judgement.output
        details = self.details_type(
            method=method,
            duplicates=groups,
            usage=token_usage(judgement.usage),
            attempts=judgement.attempts,
            latency=judgement.latency,
        )
        if not out.claims:
            return self.abstains(NO_CLAIM, details, "the judge listed none")
        verdicts = [
            ClaimVerdict(
                claim=c.claim,
                verdict=c.verdict,
                chunk=units[c.chunk - 1].first if 0 < c.chunk <= len(units) else None,
                reason=c.reason,
                tool=tools[c.chunk - len(units) - 1][0] if c.chunk > len(units) else None,
            )
            for c in out.claims
        ]
        return self._result(verdicts, details, None)

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        question, text, chunks = self._read(case)
        named = [(f"retrieval_context[{i}]", t) for i, t in chunks]
        self._check_sizes([(f"the {self.text_field}", text), *named])
        units, groups = await chunk_units(chunks, self.config.chunk_options, services.embedder)
        tools = case_tools(case)
        self._check_sizes(list(tools))
        if not units and not tools:
            return self._no_chunks(self.details_type(method="offline", duplicates=groups))
        unread = unread_texts([(self.text_name, text), ("the input", question), *named])
        cannot = self._unreadable(unread, named)
        route = support_route(not cannot, self.config.support_model, self.name)
        if unread:
            route = replace(route, note=unread.note(self.name, route.reader == "multilingual"))
        reader = self.details_type(method="offline", duplicates=groups).model_copy(
            update=route.details
        )
        kind = abstention(text)
        if kind is not None:
            return self.abstains(kind, reader, route.note)
        if cannot and route.reader != "multilingual":
            return Score.not_applying(
                unread.needs_judge(), f"Not scored offline: {route.note}.", reader
            )
        scorer = support_scorer(route, services.embedder)
        evidence = [*units, *(Unit((-1 - k,), t) for k, (_, t) in enumerate(tools))]
        [found] = await scorer([SupportItem(text, [u.text for u in evidence], question=question)])
        claims = found.claims
        closest = await _closest_units([c.sentence for c in claims], evidence, services.embedder)
        verdicts = [
            ClaimVerdict(
                claim=c.sentence,
                verdict="yes" if c.support >= 0.5 else "no",
                chunk=None if unit is None or unit.first < 0 else unit.first,
                tool=tools[-1 - unit.first][0] if unit is not None and unit.first < 0 else None,
                reason=_offline_reason(c.similarity, c.new_numbers, c.new_names),
                support=round(c.support, 4),
            )
            for c, unit in zip(claims, closest, strict=True)
        ]
        if not claims:
            return self.abstains(NO_CLAIM, reader, route.note)
        score = float(np.mean([c.support for c in claims]))
        return self._result(
            verdicts,
            reader,
            route.noted(
                "(Offline estimate: the mean probability that a claim is supported, from the "
                "support model of the context metric.)"
            ),
            score=round(score, 6),
        )

    def _read(self, case: ModelTestCase) -> tuple[str, str, list[tuple[int, str]]]:
        """The case's question, text and non-blank chunks; InputError without the text."""
        text = (getattr(case, self.text_field) or "").strip()
        if not text:
            raise InputError(self.missing, field=self.text_field)
        return case.input or "", text, case_chunks(case, self.name)

    def _check_sizes(self, texts: list[tuple[str, str]]) -> None:
        too_big = too_long(texts, self.config.max_embed_tokens)
        if too_big is not None:
            raise OverBudget(too_big, "max_embed_tokens")

    def _no_chunks(self, details: ClaimsDetails) -> Score:
        why = "There are no retrieved chunks: none of its claims can be supported."
        return self._result([], details, f"{self.text_name.capitalize()}: {why}")

    def abstains(self, kind: str, details: ClaimsDetails, note: str | None) -> Score:
        """The score of a text that makes no checkable claim: not applicable, never 0."""
        what = "" if kind == NO_CLAIM else f" ({KINDS[kind]})"
        why = (
            f"{self.text_name.capitalize()} makes no checkable claim{what}: there is nothing "
            "to check against the retrieved chunks."
        )
        return Score.not_applying(
            f"not applicable: {self.text_name} abstains",
            why if note is None else f"{why} ({note})",
            details.model_copy(update={"abstention": kind}),
        )

    def _unreadable(self, unread: Unread, chunks: Sequence[tuple[str, str]]) -> bool:
        """Whether the English reader cannot read the case: the text is in another language,
        or every chunk whose language can be told is."""
        if unread.has(self.text_name):
            return True
        told = [what for what, t in chunks if language_of(t) is not None]
        return bool(told) and all(unread.has(what) for what in told)

    def _result(
        self,
        verdicts: list[ClaimVerdict],
        details: ClaimsDetails,
        note: str | None,
        *,
        score: float | None = None,
    ) -> Score:
        supported = sum(v.verdict == "yes" for v in verdicts)
        total = len(verdicts)
        if score is None:
            score = supported / total if total else 0.0
        details = details.model_copy(
            update={"claims": verdicts, "supported": supported, "total": total}
        )
        reason = note or ""
        if total:
            reason = (
                f"{supported} of {total} claim(s) of {self.text_name} supported by the retrieved "
                f"chunks.{_unsupported(verdicts)}" + (f" {note}" if note else "")
            )
        return Score(score, reason, details)


def _unsupported(verdicts: Sequence[ClaimVerdict], shown: int = 3) -> str:
    """The first unsupported claims, each with its reason and closest chunk."""
    missing = [v for v in verdicts if v.verdict == "no"]
    if not missing:
        return ""
    parts = []
    for v in missing[:shown]:
        where = (
            f"closest chunk: retrieval_context[{v.chunk}]"
            if v.chunk is not None
            else f"closest tool output: {v.tool}"
            if v.tool is not None
            else "no chunk is about it"
        )
        parts.append(f"{v.claim[:160]!r} ({v.reason.strip().rstrip('.')}; {where})")
    more = f"; and {len(missing) - shown} more" if len(missing) > shown else ""
    return " Unsupported: " + "; ".join(parts) + more + "."


def _offline_reason(similarity: float, numbers: Sequence[str], names: Sequence[str]) -> str:
    text = f"closest sentence similarity {similarity:.2f}"
    if numbers:
        text += f", numbers not in the chunks: {', '.join(numbers)}"
    if names:
        text += f", names not in the chunks: {', '.join(names)}"
    return text


async def _closest_units(
    claims: Sequence[str], units: Sequence[Unit], embedder: Embedder
) -> list[Unit | None]:
    """The unit holding the sentence most similar to each claim (embeddings seen before in
    the run are not computed again)."""
    if not claims:
        return []
    owners: list[int] = []
    chunk_sentences: list[str] = []
    for k, unit in enumerate(units):
        found = sentences(unit.text) or [unit.text]
        chunk_sentences.extend(found)
        owners.extend([k] * len(found))
    if not chunk_sentences:
        return [None] * len(claims)
    vectors = await embed_distinct(embedder, [*claims, *chunk_sentences])
    sims = vectors.of(list(claims)) @ vectors.of(chunk_sentences).T
    return [units[owners[int(row.argmax())]] for row in sims]
