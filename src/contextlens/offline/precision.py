"""Offline context precision: does the output say what the expected output says, within the context?

Three comparisons per case, all scored by :func:`contextlens.offline.support.score_support`
in one batch (every distinct sentence embedded once), the input given as the question (its
words are not new content when an output repeats them):

- ``reference_support``: each output claim against the expected output read as the answer
  to the input (the input and the expected output together: "Paris" answers "What's the
  capital of France?" with "the capital of France is Paris");
- ``context_support``: each output claim against the context chunks;
- ``coverage``: each expected-output claim against the output.

They are combined into three parts:

- ``precision``: per output claim, the larger of its reference and context support,
  aggregated like :mod:`~contextlens.offline.support` (mean pulled towards the weakest
  claim). Extra detail is fine when the context backs it (Opik's own example answers
  "Paris" with a sentence about the Eiffel Tower, which the context supports); a claim
  backed by neither is what lowers precision.
- ``coverage``: how much of the expected output the output conveys.
- ``grounding``: ``context_support`` on its own, so that an output that matches the
  reference but not the context it was given is marked down a little ("given the context").

The score is the weighted geometric mean ``precision^0.4 * coverage^0.4 * grounding^0.2``.
A geometric mean because the parts are not interchangeable: an output that misses the
expected answer entirely (coverage near 0) must score near 0 however well grounded its
words are, and a fluent hallucination (precision near 0) must not be rescued by covering
the reference. Grounding weighs less because the expected output, when given, is the
stronger evidence of what the answer should be.

Fallbacks, each said in the reason: with no expected output the score is the context
support alone; with no context it is ``sqrt(precision * coverage)`` against the
expected output alone; with neither there is nothing to compare and the case fails.

Like the support scorer this sees paraphrase, topical drift and invented numbers, but it
does not reason: a swapped name ("Lyon" for "Paris") in an otherwise matching sentence is
largely missed. It is an approximation of a judge, not a judge.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from contextlens.embeddings.base import Embedder
from contextlens.offline.support import (
    MIN_WEIGHT,
    ClaimSupport,
    SupportItem,
    SupportResult,
    score_support,
)
from contextlens.offline.text import sentences

#: Exponents of the weighted geometric mean.
WEIGHTS = {"precision": 0.4, "coverage": 0.4, "grounding": 0.2}

_NOTHING = "nothing to compare: the case has neither an expected output nor a context"
_LABELS = {
    "precision": "output claims backed by the expected output or the context",
    "coverage": "expected output conveyed by the output",
    "grounding": "output claims backed by the context",
}


@dataclass(frozen=True)
class PrecisionItem:
    """One case: the output under evaluation, the expected output, the context chunks and
    the input (the question) the outputs answer."""

    output: str
    expected_output: str
    context: Sequence[str]
    input: str = ""


@dataclass(frozen=True)
class PrecisionEstimate:
    """The offline verdict on one case; ``score`` is None exactly when ``error`` is set."""

    score: float | None
    reason: str
    components: dict[str, float] = field(default_factory=dict)
    error: str | None = None


def _aggregate(supports: Sequence[float]) -> float:
    values = np.asarray(supports, dtype=float)
    return float((1 - MIN_WEIGHT) * values.mean() + MIN_WEIGHT * values.min())


def _weakest_claim(sentences: Sequence[str], supports: Sequence[float]) -> tuple[str, float]:
    i = int(np.argmin(supports))
    return sentences[i], float(supports[i])


def _reason(
    score: float,
    parts: dict[str, float],
    weakest: dict[str, tuple[str, float]],
    note: str,
) -> str:
    listed = ", ".join(f"{name} {value:.2f}" for name, value in parts.items())
    text = f"Offline estimate {score:.2f} ({listed}).{note}"
    part = min(parts, key=parts.__getitem__)
    text += f" Weakest part: {part} ({_LABELS[part]}, {parts[part]:.2f})"
    sentence, support = weakest[part]
    if support < 0.5:
        what = "not conveyed" if part == "coverage" else "least supported claim"
        text += f"; {what}: {sentence[:120]!r}"
    return text + "."


def _combine(
    item: PrecisionItem,
    reference: tuple[ClaimSupport, ...] | None,
    context: tuple[ClaimSupport, ...] | None,
    coverage: tuple[ClaimSupport, ...] | None,
) -> PrecisionEstimate:
    # An empty tuple means the evidence had no sentence: that comparison did not happen.
    reference, context, coverage = reference or None, context or None, coverage or None
    claims = reference or context
    if not sentences(item.output):
        return PrecisionEstimate(0.0, "The output is empty: it conveys nothing of the answer.")
    if claims is None:
        return PrecisionEstimate(None, _NOTHING, error=_NOTHING)
    claim_texts = [c.sentence for c in claims]
    parts: dict[str, float] = {}
    weakest: dict[str, tuple[str, float]] = {}
    components: dict[str, float] = {}
    note = ""
    if reference is not None:
        per_claim = [c.support for c in reference]
        if context is not None:
            per_claim = [max(r.support, c.support) for r, c in zip(reference, context, strict=True)]
        parts["precision"] = _aggregate(per_claim)
        weakest["precision"] = _weakest_claim(claim_texts, per_claim)
        components["reference_support"] = _aggregate([c.support for c in reference])
    if coverage is not None:
        parts["coverage"] = _aggregate([c.support for c in coverage])
        weakest["coverage"] = _weakest_claim(
            [c.sentence for c in coverage], [c.support for c in coverage]
        )
    if context is not None:
        parts["grounding"] = _aggregate([c.support for c in context])
        weakest["grounding"] = _weakest_claim(claim_texts, [c.support for c in context])
    if reference is None:
        note = " No expected output was given: scored by support in the context only."
    elif context is None:
        note = " No context was given: scored against the expected output only."
    total = sum(WEIGHTS[p] for p in parts)
    score = float(np.prod([parts[p] ** (WEIGHTS[p] / total) for p in parts]))
    components.update(parts)
    return PrecisionEstimate(
        round(score, 6),
        _reason(score, parts, weakest, note),
        {k: round(v, 6) for k, v in components.items()},
    )


async def score_precision(
    items: Sequence[PrecisionItem],
    embedder: Embedder,
    support: Callable[[Sequence[SupportItem]], Awaitable[list[SupportResult]]] | None = None,
) -> list[PrecisionEstimate]:
    """Offline context precision of each item; one embedding call for the whole batch.

    ``support`` scores the comparisons (default: :func:`score_support` on ``embedder``)."""
    support_items: list[SupportItem] = []
    slots: list[tuple[int | None, int | None, int | None]] = []

    def add(reply: str, evidence: Sequence[str], question: str) -> int:
        support_items.append(SupportItem(reply, evidence, question=question))
        return len(support_items) - 1

    for item in items:
        context = [c for c in item.context if c.strip()]
        has_reference = bool(item.expected_output.strip())
        # The expected output read as the answer to the input: "Paris" to "What's the capital
        # of France?" states that the capital of France is Paris.
        reference = (
            [item.input, item.expected_output] if item.input.strip() else [item.expected_output]
        )
        slots.append(
            (
                add(item.output, reference, item.input) if has_reference else None,
                add(item.output, context, item.input) if context else None,
                add(item.expected_output, [item.output], item.input) if has_reference else None,
            )
        )
    scorer = support or (lambda found: score_support(found, embedder))
    results = await scorer(support_items) if support_items else []

    estimates: list[PrecisionEstimate] = []
    for item, (ref, ctx, cov) in zip(items, slots, strict=True):
        if ref is None and ctx is None:
            estimates.append(PrecisionEstimate(None, _NOTHING, error=_NOTHING))
            continue
        estimates.append(
            _combine(
                item,
                results[ref].claims if ref is not None else None,
                results[ctx].claims if ctx is not None else None,
                results[cov].claims if cov is not None else None,
            )
        )
    return estimates
