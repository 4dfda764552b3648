"""Citations: does the answer cite its sources, and do the sources it cites back it?

The retrieved chunks are the answer's numbered sources, 1 to N in ``retrieval_context``
order. The answer's markers (``[2]``, ``[1, 3]``, ``[doc 2]``, ``(source: 2)``, a footnote
``[^1]`` with its definition line ``[^1]: doc 2``, a trailing ``Source: doc 2``) are read by
:func:`contextlens.offline.citations.cited_sentences`, which attaches each to its sentence:
the answer's claims are its sentences.

* **Citation precision** = citations whose cited chunk supports their claim / citations. A
  marker naming a number past the last chunk (or 0) is a *dangling* citation: listed, and
  counted as a citation that supports nothing.
* **Citation recall** = claims that need a source and cite at least one retrieved chunk /
  claims that need a source. A claim needs a source when it states a fact: questions,
  greetings and abstentions (:func:`contextlens.offline.abstention.abstention`) do not.
* **Score** = the F1 of the two (their harmonic mean; 0 when both are 0). With no citation
  at all, precision has no value and the score is recall (0: the answer cites nothing);
  with no claim that needs a source, it is precision. Both are kept in the details.

A cited chunk that does not support its claim while another chunk does is a *wrong-source*
citation, and the details name the chunks that do.

With a judge, ONE call per case: the chunks in numbered blocks, the claims (each with the
chunk numbers it cites) in a data block, and per claim the judge says whether it needs a
source and which chunks support it. Offline, the support model of the claim metrics
(``support_model``) scores each cited claim against each chunk on its own; a pair it cannot
read (a claim with nothing to check) is *undecided*, counted apart, and a case in a language
the English reader does not read is ``"not applicable: needs a judge"``, as for faithfulness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from typing import Any, ClassVar, Literal

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
from contextlens.metrics.calls import chunk_blocks, token_usage
from contextlens.metrics.config import SUPPORT_FILES, SupportConfig
from contextlens.metrics.metric import Metric, Score
from contextlens.metrics.registry import metric
from contextlens.offline.abstention import abstention
from contextlens.offline.citations import CitedSentence, cited_sentences
from contextlens.offline.language import language_of, unread_texts
from contextlens.offline.relevance import has_words
from contextlens.offline.routes import support_route, support_scorer
from contextlens.offline.support import SupportItem
from contextlens.offline.text import is_question
from contextlens.schemas import ModelTestCase

__all__ = [
    "CitationCheck",
    "CitationsConfig",
    "CitationsDetails",
    "CitationsMetric",
    "CitedClaim",
    "DanglingCitation",
    "citations_schema",
]

CitationVerdict = Literal["supported", "not supported", "dangling", "undecided"]


class CitationCheck(BaseModel):
    """One citation of a claim: the chunk number it names (1-based, as written), the marker,
    and whether that chunk supports the claim (``support``: the offline probability)."""

    chunk: int
    marker: str
    verdict: CitationVerdict
    support: float | None = None


class CitedClaim(BaseModel):
    """A claim (a sentence of the answer, without markers), whether it needs a source, its
    citations, the chunks that support it (1-based; offline, looked for only for a claim that
    cites) and the cited chunks that do not while another does (``wrong_source``)."""

    claim: str
    needs_source: bool
    citations: list[CitationCheck] = Field(default_factory=list)
    supported_by: list[int] = Field(default_factory=list)
    wrong_source: list[int] = Field(default_factory=list)
    reason: str = ""


class DanglingCitation(BaseModel):
    """A marker naming a chunk the case does not have: its text, the number, the claim it is
    attached to (1-based) and where it starts in the answer."""

    marker: str
    number: int
    claim: int
    start: int


class CitationsDetails(ReaderDetails):
    """Each claim with its citations and their verdicts, the dangling markers, the counts
    precision and recall are computed from, both measures, and how the score combines them
    (``combined``: ``"f1"``, or the one measure that has a value)."""

    method: Literal["judge", "offline"] | None = None
    abstention: str | None = None
    claims: list[CitedClaim] = Field(default_factory=list)
    dangling: list[DanglingCitation] = Field(default_factory=list)
    citations: int = 0
    supported_citations: int = 0
    undecided_citations: int = 0
    needs_source: int = 0
    cited_claims: int = 0
    wrong_source: int = 0
    precision: float | None = None
    recall: float | None = None
    combined: Literal["f1", "precision", "recall"] | None = None
    latency: float | None = None


class CitationsReply(Reply):
    """Base of :func:`citations_schema`'s replies, sized by the number of claims."""

    n_claims: ClassVar[int] = 1

    @classmethod
    def reply_tokens(cls, messages: Sequence[Message]) -> int:
        return 128 + 80 * cls.n_claims


@cache
def citations_schema(n_chunks: int, n_claims: int) -> type[CitationsReply]:
    """The reply of a call over ``n_chunks`` numbered chunks and ``n_claims`` numbered
    claims: exactly one entry per claim, in order."""
    chunk_numbers = tuple(range(1, n_chunks + 1))
    claim_numbers = tuple(range(1, n_claims + 1))
    entry = create_model(
        "ClaimSources",
        __base__=Reply,
        claim=(  # type: ignore[arg-type]  # a Literal of the call's claim numbers
            Literal[claim_numbers],
            Field(description="the claim's number"),
        ),
        needs_source=(Verdict, Field(description="yes when the claim states a fact")),
        supported_by=(
            list[Literal[chunk_numbers]],  # type: ignore[valid-type]  # the call's chunk numbers
            Field(max_length=n_chunks, description="every chunk that supports the claim"),
        ),
        reason=(str, text_field("at most fifteen words", 120)),
    )
    model = create_model(
        "ClaimSourcesReply",
        __base__=CitationsReply,
        claims=(list[entry], Field(min_length=n_claims, max_length=n_claims)),
    )
    model.n_claims = n_claims
    return model


class CitationsConfig(SupportConfig):
    """The citations metric's settings: the pass mark (default 0.5), the size limits, the
    offline support model, its own judge and embedder."""

    threshold: float | None = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)


def needs_source(sentence: str) -> bool:
    """Whether a sentence states a fact (read offline): not a question, a greeting or an
    abstention, and it has a word."""
    return has_words(sentence) and not is_question(sentence) and abstention(sentence) is None


@metric(
    "citations",
    aliases=("citation-quality", "CitationMetric"),
    reads=("input", "actual_output", "retrieval_context"),
    requires=("actual_output", "retrieval_context"),
)
class CitationsMetric(Metric[ModelTestCase]):
    """F1 of citation precision and recall: whether the answer's claims cite the retrieved
    chunks that support them.

    Settings: :class:`CitationsConfig`.
    """

    case_type = ModelTestCase
    config_type = CitationsConfig
    details_type = CitationsDetails
    prompts = ("citations_system.md", "citations_user.md")
    offline_models = SUPPORT_FILES
    config: CitationsConfig

    def messages(
        self, question: str, claims: str, n_claims: int, chunks: Sequence[str]
    ) -> list[Message]:
        """The judge prompt: instructions, then the question, the ``n_claims`` numbered
        claims with the chunks they cite, and the chunks."""
        block = DataBlocks(question, claims, *chunks)
        return build_messages(
            "citations_system.md",
            "citations_user.md",
            citations_schema(len(chunks), n_claims),
            input=block("input", question),
            claims=block("claims", claims),
            chunks=chunk_blocks(list(chunks), block),
        )

    async def judged(self, case: ModelTestCase, judge: Judge, services: Services) -> Score:
        question, answer, chunks = self._read(case)
        found = self._claims(answer)
        details = CitationsDetails(method="judge")
        if not found or not any(c.strip() for c in chunks):
            return self._offline_verdicts(found, chunks, details, {}, answer)
        listing = "\n".join(
            f"{k}. {s.sentence}"
            + (f" [cites: {', '.join(map(str, s.numbers))}]" if s.numbers else "")
            for k, s in enumerate(found, 1)
        )
        messages = self.messages(question, listing, len(found), chunks)
        too_big = prompt_over_budget(messages, self.config.max_prompt_tokens)
        if too_big is not None:
            raise OverBudget(too_big)
        judgement = await judge.judge(messages, citations_schema(len(chunks), len(found)))
        out: Any = judgement.output
        details = details.model_copy(
            update={
                "usage": token_usage(judgement.usage),
                "attempts": judgement.attempts,
                "latency": judgement.latency,
            }
        )
        claims = []
        for sentence, entry in zip(found, out.claims, strict=True):
            support = sorted(set(entry.supported_by))
            checks = [
                self._check(
                    sentence, n, len(chunks), "supported" if n in support else "not supported"
                )
                for n in sentence.numbers
            ]
            claims.append(
                _claim(sentence, entry.needs_source == "yes", checks, support, entry.reason)
            )
        return self._result(claims, found, details, None)

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        question, answer, chunks = self._read(case)
        named = [(f"retrieval_context[{i}]", t) for i, t in enumerate(chunks)]
        too_big = too_long([("the actual_output", answer), *named], self.config.max_embed_tokens)
        if too_big is not None:
            raise OverBudget(too_big, "max_embed_tokens")
        unread = unread_texts([("the answer", answer), ("the input", question), *named])
        told = [w for w, t in named if language_of(t) is not None]
        cannot = unread.has("the answer") or (bool(told) and all(unread.has(w) for w in told))
        route = support_route(not cannot, self.config.support_model, self.name)
        if unread:
            route = replace(route, note=unread.note(self.name, route.reader == "multilingual"))
        details = CitationsDetails(method="offline").model_copy(update=route.details)
        found = self._claims(answer)
        if cannot and route.reader != "multilingual":
            return Score.not_applying(
                unread.needs_judge(), f"Not scored offline: {route.note}.", details
            )
        pairs = [
            (k, j)
            for k, s in enumerate(found)
            if s.numbers
            for j, chunk in enumerate(chunks, 1)
            if chunk.strip()
        ]
        scorer = support_scorer(route, services.embedder)
        scored = await scorer(
            [SupportItem(found[k].sentence, [chunks[j - 1]], question=question) for k, j in pairs]
        )
        support: dict[tuple[int, int], float | None] = {
            pair: (r.score if r.claims else None) for pair, r in zip(pairs, scored, strict=True)
        }
        note = route.noted(
            "Offline estimate: a chunk supports a claim when the support model of the claim "
            "metrics gives the pair 0.5 or more"
        )
        return self._offline_verdicts(found, chunks, details, support, answer, note)

    def _offline_verdicts(
        self,
        found: list[CitedSentence],
        chunks: Sequence[str],
        details: CitationsDetails,
        support: dict[tuple[int, int], float | None],
        answer: str,
        note: str | None = None,
    ) -> Score:
        """The claims' verdicts from offline support probabilities (none: every cited chunk
        is blank, dangling, or the case has no chunk)."""
        if not found:
            kind = abstention(answer) or "no claim"
            return Score.not_applying(
                "not applicable: the answer makes no claim",
                "The answer makes no claim that needs a source.",
                details.model_copy(update={"abstention": kind}),
            )
        claims = []
        for k, sentence in enumerate(found):
            by = [j for j in range(1, len(chunks) + 1) if (support.get((k, j)) or 0.0) >= 0.5]
            checks = []
            for n in sentence.numbers:
                p = support.get((k, n))
                if 1 <= n <= len(chunks) and chunks[n - 1].strip() and (k, n) in support:
                    verdict: CitationVerdict = (
                        "undecided" if p is None else "supported" if p >= 0.5 else "not supported"
                    )
                else:
                    verdict = "not supported"
                checks.append(self._check(sentence, n, len(chunks), verdict, p))
            reason = ", ".join(
                f"chunk {c.chunk}: support {c.support:.2f}" for c in checks if c.support is not None
            )
            claims.append(_claim(sentence, needs_source(sentence.sentence), checks, by, reason))
        return self._result(claims, found, details, note)

    def _check(
        self,
        sentence: CitedSentence,
        number: int,
        n_chunks: int,
        verdict: CitationVerdict,
        support: float | None = None,
    ) -> CitationCheck:
        marker = next(c.marker for c in sentence.citations if number in c.numbers)
        if not 1 <= number <= n_chunks:
            return CitationCheck(chunk=number, marker=marker, verdict="dangling")
        p = None if support is None else round(support, 4)
        return CitationCheck(chunk=number, marker=marker, verdict=verdict, support=p)

    def _read(self, case: ModelTestCase) -> tuple[str, str, list[str]]:
        answer = (case.actual_output or "").strip()
        if not answer:
            raise InputError("citations scores the answer under test", field="actual_output")
        if case.retrieval_context is None:
            raise InputError("citations needs the retrieved chunks", field="retrieval_context")
        return case.input or "", answer, [c or "" for c in case.retrieval_context]

    @staticmethod
    def _claims(answer: str) -> list[CitedSentence]:
        return [s for s in cited_sentences(answer) if has_words(s.sentence)]

    def _result(
        self,
        claims: list[CitedClaim],
        found: list[CitedSentence],
        details: CitationsDetails,
        note: str | None,
    ) -> Score:
        dangling = [
            DanglingCitation(marker=c.marker, number=n, claim=k, start=c.start)
            for k, s in enumerate(found, 1)
            for c in s.citations
            for n in c.numbers
            if any(ch.chunk == n and ch.verdict == "dangling" for ch in claims[k - 1].citations)
        ]
        checks = [c for claim in claims for c in claim.citations]
        decided = [c for c in checks if c.verdict != "undecided"]
        supported = sum(c.verdict == "supported" for c in decided)
        needing = [c for c in claims if c.needs_source]
        cited = [c for c in needing if any(ch.verdict != "dangling" for ch in c.citations)]
        precision = supported / len(decided) if decided else None
        recall = len(cited) / len(needing) if needing else None
        wrong = sum(len(c.wrong_source) for c in claims)
        details = details.model_copy(
            update={
                "claims": claims,
                "dangling": dangling,
                "citations": len(checks),
                "supported_citations": supported,
                "undecided_citations": len(checks) - len(decided),
                "needs_source": len(needing),
                "cited_claims": len(cited),
                "wrong_source": wrong,
                "precision": precision,
                "recall": recall,
            }
        )
        counts = (
            f"{supported} of {len(decided)} citation(s) supported by the chunk they cite; "
            f"{len(cited)} of {len(needing)} claim(s) that need a source cite one."
        )
        extra = ""
        if wrong:
            extra += f" {wrong} wrong-source citation(s)."
        if dangling:
            extra += f" {len(dangling)} dangling: " + ", ".join(d.marker for d in dangling) + "."
        if len(checks) > len(decided):
            extra += f" {len(checks) - len(decided)} citation(s) undecided offline."
        reason = counts + extra + (f" ({note}.)" if note else "")
        if precision is None and recall is None:
            if checks:
                return Score.not_applying("not applicable: needs a judge", reason, details)
            kind = abstention(" ".join(s.sentence for s in found))
            return Score.not_applying(
                "not applicable: the answer makes no claim that needs a source",
                "The answer makes no claim that needs a source (a question, a greeting or an "
                "abstention): there is nothing to cite.",
                details.model_copy(update={"abstention": kind}),
            )
        if precision is not None and recall is not None:
            combined: Literal["f1", "precision", "recall"] = "f1"
            value = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        elif precision is not None:
            combined, value = "precision", precision
        elif checks:  # every citation undecided: recall alone would hide them
            return Score.not_applying("not applicable: needs a judge", reason, details)
        else:
            combined, value = "recall", recall or 0.0
        return Score(round(value, 6), reason, details.model_copy(update={"combined": combined}))


def _claim(
    sentence: CitedSentence,
    needs: bool,
    checks: list[CitationCheck],
    supported_by: list[int],
    reason: str,
) -> CitedClaim:
    wrong = [c.chunk for c in checks if c.verdict == "not supported"] if supported_by else []
    return CitedClaim(
        claim=sentence.sentence,
        needs_source=needs,
        citations=checks,
        supported_by=supported_by,
        wrong_source=wrong,
        reason=reason,
    )
