"""RAG diagnostics: where an answer's claims come from and where its errors start
(RAGChecker's generator diagnostics, Ru et al. 2024), from one matrix of claim verdicts.

Two texts are split into claims, the answer (``actual_output``) and the reference answer
(``expected_output``), and every claim of each is checked against every retrieved chunk and
against the other text. With a judge that is TWO calls per case, made at once, one per text;
Ragas's noise sensitivity alone takes 2 + 2K + 1 calls for K chunks. A chunk is *relevant*
when it supports a claim of the reference. An answer claim is *correct* when the reference
states it, *faithful* when a chunk supports it. From those verdicts, over the answer's claims
(the last four add up to the share of claims that are wrong or unsupported, with
``faithfulness``):

* ``correctness`` (RAGChecker's precision): the share of the answer's claims that are correct;
  ``completeness`` (its recall): the share of the reference's claims the answer states; the
  score is their F1 (RAGChecker's overall figure);
* ``hallucination``: claims neither correct nor supported by any chunk;
* ``noise_sensitivity_relevant`` / ``noise_sensitivity_irrelevant``: claims that are not
  correct but that a relevant chunk (or only an irrelevant one) supports: the answer took up
  the chunk's noise;
* ``self_knowledge``: correct claims that no chunk supports (the model's own knowledge);
* ``faithfulness``: claims a chunk supports;
* and over the reference's claims: ``context_recall``, the share a chunk holds, and
  ``context_utilization``, of those the chunks hold, the share the answer states.

Offline, the support model of the claim metrics (:mod:`contextlens.metrics.claims`) gives
each sentence of each text its probability of being supported by each chunk and by the other
text; a verdict is "yes" from 0.5. The offline figures are estimates of the same counts; an
answer or a reference in another language than English is ``"not applicable: needs a judge"``
unless a multilingual reader is installed. An answer (or a reference) that makes no claim is
not applicable, never a 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, create_model

from contextlens.backend import Message
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
from contextlens.metrics.calls import CallFailed, chunk_blocks, judge_calls, token_usage
from contextlens.metrics.config import SUPPORT_FILES, SupportConfig
from contextlens.metrics.metric import Metric, Score, ScoreFailed
from contextlens.metrics.registry import metric
from contextlens.offline.abstention import NO_CLAIM, abstention
from contextlens.offline.language import language_of, unread_texts
from contextlens.offline.routes import support_route, support_scorer
from contextlens.offline.support import SupportItem
from contextlens.offline.text import sentences
from contextlens.schemas import ItemBreakdown, ModelTestCase

__all__ = [
    "ANSWER_KINDS",
    "DiagnosticClaim",
    "Diagnostics",
    "DiagnosticsConfig",
    "DiagnosticsDetails",
    "DiagnosticsMetric",
    "VerdictMatrix",
    "diagnostics_schema",
]

AnswerKind = Literal[
    "correct, supported",
    "self-knowledge",
    "noise, relevant chunk",
    "noise, irrelevant chunk",
    "hallucination",
]
#: What an answer claim is, by whether it is correct and which chunks support it.
ANSWER_KINDS: tuple[AnswerKind, ...] = (
    "correct, supported",
    "self-knowledge",
    "noise, relevant chunk",
    "noise, irrelevant chunk",
    "hallucination",
)


class DiagnosticClaim(BaseModel):
    """One claim of the answer or of the reference: the chunks that support it (0-based
    indices in ``retrieval_context``), whether the other text states it (``in_other``: for
    an answer claim, the reference; for a reference claim, the answer), a reason, what the
    claim is (an answer claim: one of :data:`ANSWER_KINDS`) and, offline, its highest
    support by a chunk."""

    claim: str
    supported_by: list[int] = Field(default_factory=list)
    in_other: Literal["yes", "no"]
    reason: str = ""
    kind: AnswerKind | None = None
    support: float | None = None


class Diagnostics(BaseModel):
    """The diagnostic shares of one case (None: the share has no denominator)."""

    correctness: float | None = None
    completeness: float | None = None
    f1: float | None = None
    faithfulness: float | None = None
    hallucination: float | None = None
    noise_sensitivity_relevant: float | None = None
    noise_sensitivity_irrelevant: float | None = None
    self_knowledge: float | None = None
    context_recall: float | None = None
    context_utilization: float | None = None


class DiagnosticsDetails(ReaderDetails):
    """The claims of both texts with their verdicts, the relevant chunks (those supporting a
    claim of the reference, 0-based), the shares, and the method."""

    method: Literal["judge", "offline"] | None = None
    abstention: str | None = None
    answer_claims: list[DiagnosticClaim] = Field(default_factory=list)
    reference_claims: list[DiagnosticClaim] = Field(default_factory=list)
    relevant_chunks: list[int] = Field(default_factory=list)
    diagnostics: Diagnostics | None = None
    latency: float | None = None

    def breakdown(self) -> ItemBreakdown | None:
        """The diagnostic shares, averaged over the run (the F1 is the score)."""
        if self.diagnostics is None:
            return None
        return ItemBreakdown(shares=self.diagnostics.model_dump(exclude={"f1"}))


@dataclass(frozen=True)
class VerdictMatrix:
    """The verdicts the shares are computed from: claim x chunk support for each text, and
    whether each claim is stated by the other text."""

    answer_chunks: np.ndarray  # bool, answer claims x chunks
    correct: np.ndarray  # bool, answer claims
    reference_chunks: np.ndarray  # bool, reference claims x chunks
    in_answer: np.ndarray  # bool, reference claims

    def relevant(self) -> np.ndarray:
        """Which chunks support a claim of the reference."""
        if not len(self.reference_chunks):
            return np.zeros(self.answer_chunks.shape[1], dtype=bool)
        return np.asarray(self.reference_chunks.any(axis=0))

    def kinds(self) -> list[AnswerKind]:
        """What each answer claim is."""
        relevant = self.relevant()
        out: list[AnswerKind] = []
        for row, correct in zip(self.answer_chunks, self.correct, strict=True):
            if not row.any():
                out.append("self-knowledge" if correct else "hallucination")
            elif correct:
                out.append("correct, supported")
            else:
                by_relevant = bool((row & relevant).any())
                out.append("noise, relevant chunk" if by_relevant else "noise, irrelevant chunk")
        return out

    def shares(self) -> Diagnostics:
        """The diagnostic shares."""
        kinds = self.kinds()
        n = len(kinds)

        def share(*wanted: AnswerKind) -> float | None:
            return round(sum(k in wanted for k in kinds) / n, 6) if n else None

        correctness = float(self.correct.mean()) if n else None
        completeness = float(self.in_answer.mean()) if len(self.in_answer) else None
        f1 = None
        if correctness is not None and completeness is not None:
            total = correctness + completeness
            f1 = 2 * correctness * completeness / total if total else 0.0
        held: np.ndarray = np.asarray(self.reference_chunks.any(axis=1), dtype=bool)
        return Diagnostics(
            correctness=_rounded(correctness),
            completeness=_rounded(completeness),
            f1=_rounded(f1),
            faithfulness=_rounded(float(self.answer_chunks.any(axis=1).mean()) if n else None),
            hallucination=share("hallucination"),
            noise_sensitivity_relevant=share("noise, relevant chunk"),
            noise_sensitivity_irrelevant=share("noise, irrelevant chunk"),
            self_knowledge=share("self-knowledge"),
            context_recall=_rounded(float(held.mean()) if len(held) else None),
            context_utilization=_rounded(
                float(self.in_answer[held].mean()) if held.any() else None
            ),
        )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


class DiagnosticsReply(Reply):
    """Base of :func:`diagnostics_schema`'s replies, sized by the text's claims."""

    n_claims: ClassVar[int] = 6

    @classmethod
    def reply_tokens(cls, messages: Sequence[Message]) -> int:
        return 256 + 112 * cls.n_claims


@cache
def diagnostics_schema(n_chunks: int, max_claims: int, other: str) -> type[DiagnosticsReply]:
    """The reply of a call over ``n_chunks`` numbered chunks: up to ``max_claims`` claims,
    each with the chunks that support it and the verdict ``other`` (``in_reference`` or
    ``in_answer``)."""
    numbers = tuple(range(1, n_chunks + 1))
    fields: dict[str, Any] = {
        "claim": (str, text_field("one fact the text states, self-contained, in a few words", 200)),
        "supported_by": (
            list[Literal[numbers]],  # type: ignore[valid-type]  # the call's chunk numbers
            Field(max_length=n_chunks, description="every chunk that supports the claim"),
        ),
        other: (Verdict, ...),
        "reason": (str, text_field("at most fifteen words", 120)),
    }
    claim = create_model("DiagnosticClaimReply", __base__=Reply, **fields)
    model = create_model(
        "DiagnosticsClaims",
        __base__=DiagnosticsReply,
        claims=(list[claim], Field(min_length=0, max_length=max_claims)),
    )
    model.n_claims = max_claims
    return model


@dataclass(frozen=True)
class _Side:
    """One of the two texts whose claims are listed: the answer or the reference."""

    name: str  # in reasons and prompts
    tag: str  # its data block
    other_name: str
    other_tag: str
    other_field: str  # the reply's verdict on the other text


_ANSWER = _Side("the answer", "output", "the reference answer", "expected_output", "in_reference")
_REFERENCE = _Side("the reference answer", "expected_output", "the answer", "output", "in_answer")


class DiagnosticsConfig(SupportConfig):
    """The diagnostics' settings: the pass mark of their F1 (default 0.5), the size limits,
    the offline support model, its own judge and embedder."""

    threshold: float | None = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)


@metric(
    "rag-diagnostics",
    aliases=("RAGChecker", "diagnostics", "NoiseSensitivity"),
    reads=("input", "actual_output", "expected_output", "retrieval_context"),
    requires=("actual_output", "expected_output", "retrieval_context"),
)
class DiagnosticsMetric(Metric[ModelTestCase]):
    """F1 of the answer's correctness and completeness against the reference, with
    hallucination, noise sensitivity, self-knowledge and context utilisation.

    Settings: :class:`DiagnosticsConfig`.
    """

    case_type = ModelTestCase
    config_type = DiagnosticsConfig
    details_type = DiagnosticsDetails
    prompts = ("diagnostics_system.md", "diagnostics_user.md")
    offline_models = SUPPORT_FILES
    config: DiagnosticsConfig

    def messages(
        self, side: _Side, question: str, text: str, other: str, chunks: Sequence[str]
    ) -> list[Message]:
        """The prompt listing the claims of ``text`` (``side`` says which) against the
        numbered ``chunks`` and the ``other`` text."""
        block = DataBlocks(question, text, other, *chunks)
        return build_messages(
            "diagnostics_system.md",
            "diagnostics_user.md",
            self._schema(side, len(chunks), text),
            system_values={
                "text_tag": side.tag,
                "text_name": side.name,
                "other_tag": side.other_tag,
                "other_name": side.other_name,
                "other_field": side.other_field,
            },
            text_name=side.name,
            other_name=side.other_name,
            input=block("input", question),
            text=block(side.tag, text),
            other=block(side.other_tag, other),
            chunks=chunk_blocks(list(chunks), block),
        )

    @staticmethod
    def _schema(side: _Side, n_chunks: int, text: str) -> type[DiagnosticsReply]:
        return diagnostics_schema(n_chunks, max(6, 2 * len(sentences(text)) + 2), side.other_field)

    async def judged(self, case: ModelTestCase, judge: Judge, services: Services) -> Score:
        question, answer, reference, chunks = self._read(case)
        texts = [c for _, c in chunks]
        calls = []
        for side, text, other in ((_ANSWER, answer, reference), (_REFERENCE, reference, answer)):
            messages = self.messages(side, question, text, other, texts)
            too_big = prompt_over_budget(messages, self.config.max_prompt_tokens)
            if too_big is not None:
                raise OverBudget(f"{side.name}'s call: {too_big}")
            calls.append((messages, self._schema(side, len(texts), text)))
        replies = await judge_calls(judge, calls)
        if isinstance(replies, CallFailed):
            raise ScoreFailed(replies.error, DiagnosticsDetails(raw_reply=replies.raw_reply))
        details = DiagnosticsDetails(
            method="judge",
            usage=token_usage(replies.usage),
            attempts=replies.attempts,
            latency=max((j.latency or 0.0) for j in replies.judgements),
        )
        found: list[list[DiagnosticClaim]] = []
        for side, judgement in zip((_ANSWER, _REFERENCE), replies.judgements, strict=True):
            found.append(
                [
                    DiagnosticClaim(
                        claim=c.claim,
                        supported_by=sorted({chunks[n - 1][0] for n in c.supported_by}),
                        in_other=getattr(c, side.other_field),
                        reason=c.reason,
                    )
                    for c in judgement.output.claims
                ]
            )
        return self._result(found[0], found[1], [i for i, _ in chunks], details, None)

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        question, answer, reference, chunks = self._read(case)
        named = [(f"retrieval_context[{i}]", t) for i, t in chunks]
        too_big = too_long(
            [("the actual_output", answer), ("the expected_output", reference), *named],
            self.config.max_embed_tokens,
        )
        if too_big is not None:
            raise OverBudget(too_big, "max_embed_tokens")
        unread = unread_texts(
            [("the answer", answer), ("the reference", reference), ("the input", question), *named]
        )
        told = [w for w, t in named if language_of(t) is not None]
        cannot = (
            unread.has("the answer")
            or unread.has("the reference")
            or (bool(told) and all(unread.has(w) for w in told))
        )
        route = support_route(not cannot, self.config.support_model, self.name)
        if unread:
            route = replace(route, note=unread.note(self.name, route.reader == "multilingual"))
        details = DiagnosticsDetails(method="offline").model_copy(update=route.details)
        if cannot and route.reader != "multilingual":
            return Score.not_applying(
                unread.needs_judge(), f"Not scored offline: {route.note}.", details
            )
        for what, text in (("the answer", answer), ("the reference answer", reference)):
            kind = abstention(text)
            if kind is not None:
                return _no_claims(what, kind, details)
        texts = [c for _, c in chunks]
        scorer = support_scorer(route, services.embedder)
        items = [
            SupportItem(text, [evidence], question=question)
            for text, other in ((answer, reference), (reference, answer))
            for evidence in (*texts, other)
        ]
        scored = await scorer(items)
        k = len(texts) + 1
        sides = []
        for results in (scored[:k], scored[k:]):
            claims = [c.sentence for c in results[0].claims]
            support = np.array([[c.support for c in r.claims] for r in results]).reshape(k, -1)
            sides.append(
                [
                    DiagnosticClaim(
                        claim=claim,
                        supported_by=[chunks[j][0] for j in range(k - 1) if support[j, n] >= 0.5],
                        in_other="yes" if support[-1, n] >= 0.5 else "no",
                        reason=f"support by a chunk {support[:-1, n].max():.2f}, by the other "
                        f"text {support[-1, n]:.2f}",
                        support=round(float(support[:-1, n].max()), 4),
                    )
                    for n, claim in enumerate(claims)
                ]
            )
        note = route.noted(
            "Offline estimate: a verdict is yes when the support model of the claim metrics "
            "gives the pair 0.5 or more"
        )
        return self._result(sides[0], sides[1], [i for i, _ in chunks], details, note)

    def _read(self, case: ModelTestCase) -> tuple[str, str, str, list[tuple[int, str]]]:
        answer = (case.actual_output or "").strip()
        if not answer:
            raise InputError("rag-diagnostics scores the answer under test", field="actual_output")
        reference = (case.expected_output or "").strip()
        if not reference:
            raise InputError("rag-diagnostics needs the reference answer", field="expected_output")
        if case.retrieval_context is None:
            raise InputError(
                "rag-diagnostics needs the retrieved chunks", field="retrieval_context"
            )
        chunks = [(i, t) for i, t in enumerate(case.retrieval_context) if t and t.strip()]
        return case.input or "", answer, reference, chunks

    def _result(
        self,
        answer: list[DiagnosticClaim],
        reference: list[DiagnosticClaim],
        indices: list[int],
        details: DiagnosticsDetails,
        note: str | None,
    ) -> Score:
        if not answer:
            return _no_claims("the answer", NO_CLAIM, details)
        if not reference:
            return _no_claims("the reference answer", NO_CLAIM, details)
        position = {index: j for j, index in enumerate(indices)}

        def rows(claims: list[DiagnosticClaim]) -> np.ndarray:
            out = np.zeros((len(claims), len(indices)), dtype=bool)
            for n, c in enumerate(claims):
                out[n, [position[i] for i in c.supported_by]] = True
            return out

        matrix = VerdictMatrix(
            answer_chunks=rows(answer),
            correct=np.array([c.in_other == "yes" for c in answer]),
            reference_chunks=rows(reference),
            in_answer=np.array([c.in_other == "yes" for c in reference]),
        )
        kinds = matrix.kinds()
        shares = matrix.shares()
        relevant = [indices[j] for j in np.flatnonzero(matrix.relevant())]
        details = details.model_copy(
            update={
                "answer_claims": [
                    c.model_copy(update={"kind": k}) for c, k in zip(answer, kinds, strict=True)
                ],
                "reference_claims": reference,
                "relevant_chunks": relevant,
                "diagnostics": shares,
            }
        )
        reason = _reason(shares, len(answer), len(reference)) + (f" ({note}.)" if note else "")
        return Score(shares.f1, reason, details)


def _no_claims(what: str, kind: str, details: DiagnosticsDetails) -> Score:
    return Score.not_applying(
        f"not applicable: {what} abstains",
        f"{what.capitalize()} makes no checkable claim: there is nothing to diagnose.",
        details.model_copy(update={"abstention": kind}),
    )


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _reason(d: Diagnostics, n_answer: int, n_reference: int) -> str:
    return (
        f"F1 {_share(d.f1)} of correctness {_share(d.correctness)} ({n_answer} answer "
        f"claim(s)) and completeness {_share(d.completeness)} ({n_reference} reference "
        f"claim(s)). Of the answer's claims: hallucination {_share(d.hallucination)}, noise "
        f"sensitivity {_share(d.noise_sensitivity_relevant)} relevant / "
        f"{_share(d.noise_sensitivity_irrelevant)} irrelevant, self-knowledge "
        f"{_share(d.self_knowledge)}, faithfulness {_share(d.faithfulness)}. Context recall "
        f"{_share(d.context_recall)}, utilisation {_share(d.context_utilization)}."
    )
