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

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, create_model

from contextlens.backend import Message
from contextlens.embeddings.base import Embedder, embed_distinct
from contextlens.errors import JudgeError
from contextlens.judges.base import Reply
from contextlens.judges.schema import Verdict, text_field
from contextlens.metrics.base import (
    DataBlocks,
    ReaderDetails,
    Services,
    build_messages,
    prompt_over_budget,
    raw_reply,
    too_long,
)
from contextlens.metrics.calls import chunk_blocks, token_usage
from contextlens.metrics.chunks import ChunkOptions, DuplicateGroup, Unit, chunk_units
from contextlens.offline.abstention import KINDS, NO_CLAIM, abstention
from contextlens.offline.language import Unread, language_of, unread_texts
from contextlens.offline.routes import (
    DEFAULT_SUPPORT_MODEL,
    Route,
    SupportModel,
    support_route,
    support_scorer,
)
from contextlens.offline.support import SupportItem
from contextlens.offline.text import sentences
from contextlens.schemas import MetricResult

log = logging.getLogger("contextlens.claims")

__all__ = [
    "ClaimCheck",
    "ClaimVerdict",
    "ClaimsDetails",
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
        chunk=(
            Literal[numbers],  # type: ignore[valid-type]
            Field(description="the number of the closest chunk; 0 when no chunk is about it"),
        ),
        reason=(str, text_field("at most fifteen words", 120)),
        verdict=(Verdict, ...),
    )
    model = create_model(
        "Claims",
        __base__=ClaimsReply,
        claims=(
            list[claim],  # type: ignore[valid-type]
            Field(min_length=0, max_length=max_claims),
        ),
    )
    model.n_claims = max_claims
    return model


def _max_claims(text: str) -> int:
    return max(6, 2 * len(sentences(text)) + 2)


@dataclass(frozen=True)
class ClaimCheck:
    """How one metric checks one text's claims: its prompts, what the text is called, the
    limits, the near-duplicate options and the offline support model of English texts."""

    system_prompt: str
    user_prompt: str
    text_tag: str  # the data block of the text: "answer" or "reference"
    text_name: str  # in reasons: "the answer", "the reference answer"
    text_field: str  # the case field: "actual_output" or "expected_output"
    max_prompt_tokens: int
    max_embed_tokens: int
    chunks: ChunkOptions
    details: type[ClaimsDetails] = ClaimsDetails
    support_model: SupportModel = DEFAULT_SUPPORT_MODEL

    def messages(self, question: str, text: str, units: Sequence[Unit]) -> list[Message]:
        """The judge prompt: instructions, then the question, the text and the chunks."""
        schema = claims_schema(len(units), _max_claims(text))
        texts = [u.text for u in units]
        block = DataBlocks(question, text, *texts)
        return build_messages(
            self.system_prompt,
            self.user_prompt,
            schema,
            input=block("input", question),
            text=block(self.text_tag, text),
            chunks=chunk_blocks(texts, block),
        )

    async def score(
        self, name: str, question: str, text: str, chunks: list[tuple[int, str]], services: Services
    ) -> MetricResult:
        """The result of one case: ``chunks`` are (index in retrieval_context, text)."""
        judge_name = "offline" if services.judge is None else services.judge.name
        method: Literal["judge", "offline"] = "offline" if services.judge is None else "judge"
        embedded = [(f"retrieval_context[{i}]", t) for i, t in chunks]
        if services.judge is None:
            embedded.insert(0, (f"the {self.text_field}", text))
        elif self.chunks.threshold is None:
            embedded = []  # with a judge, only near-duplicate detection embeds
        too_big = too_long(embedded, self.max_embed_tokens)
        if too_big is not None:
            details = self.details(
                method=method, judge=judge_name, max_embed_tokens=self.max_embed_tokens
            )
            return MetricResult(metric=name, score=None, error=too_big, details=details)
        units, groups = await chunk_units(chunks, self.chunks, services.embedder)
        if not units:
            details = self.details(method=method, judge=judge_name, duplicates=groups)
            why = "There are no retrieved chunks: none of its claims can be supported."
            return self._result(name, [], details, f"{self.text_name.capitalize()}: {why}")
        if services.judge is None:
            return await self._offline(
                name, question, text, chunks, units, groups, services.embedder
            )
        return await self._judged(name, question, text, units, groups, services)

    def abstains(
        self, name: str, kind: str, details: ClaimsDetails, note: str | None
    ) -> MetricResult:
        """The result of a text that makes no checkable claim: not applicable, never 0."""
        what = "" if kind == NO_CLAIM else f" ({KINDS[kind]})"
        why = (
            f"{self.text_name.capitalize()} makes no checkable claim{what}: there is nothing "
            "to check against the retrieved chunks."
        )
        return MetricResult.not_applying(
            name,
            f"not applicable: {self.text_name} abstains",
            why if note is None else f"{why} ({note})",
            details.model_copy(update={"abstention": kind}),
        )

    # --- judge ----------------------------------------------------------------------------

    async def _judged(
        self,
        name: str,
        question: str,
        text: str,
        units: list[Unit],
        groups: list[DuplicateGroup] | None,
        services: Services,
    ) -> MetricResult:
        assert services.judge is not None
        judge = services.judge.name
        messages = self.messages(question, text, units)
        too_big = prompt_over_budget(messages, self.max_prompt_tokens)
        if too_big is not None:
            details = self.details(
                method="judge", judge=judge, max_prompt_tokens=self.max_prompt_tokens
            )
            return MetricResult(metric=name, score=None, error=too_big, details=details)
        schema = claims_schema(len(units), _max_claims(text))
        try:
            judgement = await services.judge.judge(messages, schema)
        except JudgeError as exc:
            log.debug("%s: judge failed: %s", name, exc)
            details = self.details(method="judge", judge=judge, raw_reply=raw_reply(exc))
            return MetricResult(metric=name, score=None, error=str(exc), details=details)
        out: Any = judgement.output
        details = self.details(
            method="judge",
            judge=judge,
            duplicates=groups,
            usage=token_usage(judgement.usage),
            attempts=judgement.attempts,
            latency=judgement.latency,
        )
        if not out.claims:
            return self.abstains(name, NO_CLAIM, details, "the judge listed none")
        verdicts = [
            ClaimVerdict(
                claim=c.claim,
                verdict=c.verdict,
                chunk=units[c.chunk - 1].first if c.chunk else None,
                reason=c.reason,
            )
            for c in out.claims
        ]
        return self._result(name, verdicts, details, None)

    # --- offline --------------------------------------------------------------------------

    async def _offline(
        self,
        name: str,
        question: str,
        text: str,
        chunks: list[tuple[int, str]],
        units: list[Unit],
        groups: list[DuplicateGroup] | None,
        embedder: Embedder,
    ) -> MetricResult:
        named = [(f"retrieval_context[{i}]", t) for i, t in chunks]
        unread = unread_texts([(self.text_name, text), ("the input", question), *named])
        cannot = self._unreadable(unread, named)
        route = support_route(not cannot, self.support_model, name)
        if unread:
            route = replace(route, note=unread.note(name, route.reader == "multilingual"))
        reader = self.details(method="offline", judge="offline", duplicates=groups).model_copy(
            update=route.details
        )
        kind = abstention(text)
        if kind is not None:
            return self.abstains(name, kind, reader, route.note)
        if cannot and route.reader != "multilingual":
            return self._needs_judge(name, unread, route, reader)
        evidence = [u.text for u in units]
        scorer = support_scorer(route, embedder)
        [found] = await scorer([SupportItem(text, evidence, question=question)])
        claims = found.claims
        closest = await _closest_units([c.sentence for c in claims], units, embedder)
        verdicts = [
            ClaimVerdict(
                claim=c.sentence,
                verdict="yes" if c.support >= 0.5 else "no",
                chunk=None if unit is None else unit.first,
                reason=_offline_reason(c.similarity, c.new_numbers, c.new_names),
                support=round(c.support, 4),
            )
            for c, unit in zip(claims, closest, strict=True)
        ]
        if not claims:
            return self.abstains(name, NO_CLAIM, reader, route.note)
        details = reader.model_copy(update={"claims": verdicts})
        score = float(np.mean([c.support for c in claims]))
        return self._result(
            name,
            verdicts,
            details,
            route.noted(
                "(Offline estimate: the mean probability that a claim is supported, from the "
                "support model of the context metric.)"
            ),
            score=round(score, 6),
        )

    def _unreadable(self, unread: Unread, chunks: Sequence[tuple[str, str]]) -> bool:
        """Whether the English reader cannot read the case: the text is in another language,
        or every chunk whose language can be told is."""
        if unread.has(self.text_name):
            return True
        told = [what for what, t in chunks if language_of(t) is not None]
        return bool(told) and all(unread.has(what) for what in told)

    def _needs_judge(
        self, name: str, unread: Unread, route: Route, details: ClaimsDetails
    ) -> MetricResult:
        """The result of a case the offline reader cannot read: not applicable, with why."""
        return MetricResult.not_applying(
            name, unread.needs_judge(), f"Not scored offline: {route.note}.", details
        )

    # --- the result -----------------------------------------------------------------------

    def _result(
        self,
        name: str,
        verdicts: list[ClaimVerdict],
        details: ClaimsDetails,
        note: str | None,
        *,
        score: float | None = None,
    ) -> MetricResult:
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
        return MetricResult(metric=name, score=score, reason=reason, details=details)


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
