"""Offline support: how far a reply stays within its evidence (context and reference).

Each sentence of the reply is a claim. A claim's support combines three signals:

- ``similarity``: the largest cosine similarity between the claim and any evidence
  sentence (bundled MiniLM embeddings);
- ``overlap``: the share of the claim's content words found in the evidence;
- ``new_numbers``: the share of the claim's numbers that the evidence does not contain
  (``24/7`` against "Mon-Fri 9am-5pm" is two new numbers).

They are combined by a logistic function into a probability-like support in [0, 1].
Questions back to the user ("Anything else I can help with?") and bare acknowledgements
("Yes.") make no claim and are left out unless the reply has nothing else. The reply's
score is the mean support of its claims, pulled towards its weakest claim (one unsupported
claim is a deviation).

This is an approximation of what a careful reader would say, not a language model: it
sees paraphrase and topical drift, invented numbers and off-context wording, but it does
not reason about negation or logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from contextlens.embeddings.base import Embedder, embed_distinct
from contextlens.offline.text import content_words, is_question, numbers, sentences

#: Logistic weights: intercept, similarity, overlap, share of new numbers.
WEIGHTS = (-6.0, 8.0, 3.0, -3.5)
#: Weight of the weakest claim in the reply score (the rest is the mean).
MIN_WEIGHT = 0.5


@dataclass(frozen=True)
class ClaimSupport:
    """One sentence of a reply and how well the evidence supports it."""

    sentence: str
    similarity: float
    overlap: float
    new_numbers: tuple[str, ...]
    support: float


@dataclass(frozen=True)
class SupportResult:
    """The support of a whole reply."""

    score: float
    claims: tuple[ClaimSupport, ...]
    reason: str


@dataclass(frozen=True)
class SupportItem:
    """A reply and the texts that may support it."""

    reply: str
    evidence: Sequence[str]


def _claims(reply: str) -> list[str]:
    """The sentences that state something: not questions, not bare "Yes." or "Sure!"."""
    found = sentences(reply)
    statements = [s for s in found if not is_question(s) and (content_words(s) or numbers(s))]
    return statements or found


def _claim_support(
    sentence: str, sim: float, evidence_words: set[str], evidence_numbers: set[str]
) -> ClaimSupport:
    words = content_words(sentence)
    overlap = len(words & evidence_words) / len(words) if words else 1.0
    nums = numbers(sentence)
    new = tuple(sorted(nums - evidence_numbers))
    new_share = len(new) / len(nums) if nums else 0.0
    b0, b_sim, b_overlap, b_new = WEIGHTS
    z = b0 + b_sim * sim + b_overlap * overlap + b_new * new_share
    return ClaimSupport(sentence, sim, overlap, new, float(1.0 / (1.0 + np.exp(-z))))


def _reason(claims: Sequence[ClaimSupport], score: float) -> str:
    supported = sum(c.support >= 0.5 for c in claims)
    weakest = min(claims, key=lambda c: c.support)
    text = f"{supported} of {len(claims)} claim(s) supported by the context (offline estimate)."
    if weakest.support < 0.5:
        text += (
            f" Least supported: {weakest.sentence[:120]!r} (similarity {weakest.similarity:.2f},"
            f" {weakest.overlap:.0%} of its words in the context"
        )
        if weakest.new_numbers:
            text += f"; numbers not in the context: {', '.join(weakest.new_numbers)}"
        text += ")."
    return text


async def score_support(items: Sequence[SupportItem], embedder: Embedder) -> list[SupportResult]:
    """Support of each item's reply by its evidence; every distinct text is embedded once."""
    claim_lists = [_claims(item.reply) for item in items]
    evidence_lists = [[s for text in item.evidence for s in sentences(text)] for item in items]
    vectors = await embed_distinct(
        embedder, (s for group in (*claim_lists, *evidence_lists) for s in group)
    )

    results: list[SupportResult] = []
    for claims, evidence, item in zip(claim_lists, evidence_lists, items, strict=True):
        if not claims:
            results.append(
                SupportResult(0.0, (), "The reply is empty: nothing follows the context.")
            )
            continue
        if not evidence:
            results.append(SupportResult(0.0, (), "There is no context to support the reply."))
            continue
        sims = vectors.of(claims) @ vectors.of(evidence).T
        evidence_words = set().union(*(content_words(t) for t in item.evidence))
        evidence_numbers = set().union(*(numbers(t) for t in item.evidence))
        scored = tuple(
            _claim_support(c, float(s), evidence_words, evidence_numbers)
            for c, s in zip(claims, sims.max(axis=1), strict=True)
        )
        supports = np.array([c.support for c in scored])
        score = float((1 - MIN_WEIGHT) * supports.mean() + MIN_WEIGHT * supports.min())
        results.append(SupportResult(score, scored, _reason(scored, score)))
    return results
