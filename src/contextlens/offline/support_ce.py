"""Offline support read by the cross-encoder: each claim's probability of being supported by
its evidence window (:mod:`contextlens.offline.crossencoder`), the reply scored by its claims.

A reply's score is its claims' mean pulled half-way to the weakest claim
(:data:`~contextlens.offline.support.MIN_WEIGHT`); each claim keeps the word-level findings
of the feature scorer (numbers and names not in the evidence, a one-sided negation) for its
reason, but its support is the cross-encoder's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contextlens.embeddings.base import Embedder
from contextlens.offline.crossencoder import CrossEncoder, claim_pairs, default_cross_encoder
from contextlens.offline.support import (
    MIN_WEIGHT,
    NO_EVIDENCE,
    SupportItem,
    SupportResult,
    claim_supports,
    reason_for,
    support_features,
    unscored,
)


def aggregate(supports: np.ndarray) -> float:
    """A reply's score from its claims' supports: the mean pulled half-way to the weakest."""
    return float((1 - MIN_WEIGHT) * supports.mean() + MIN_WEIGHT * supports.min())


async def score_support_ce(
    items: Sequence[SupportItem], embedder: Embedder, encoder: CrossEncoder | None = None
) -> list[SupportResult]:
    """Support of each item's reply, read claim by claim by the cross-encoder."""
    encoder = encoder or default_cross_encoder()
    feats = await support_features(items, embedder)
    pairs = await claim_pairs(items, embedder)  # embeddings already in memory or the cache
    flat = [pair for p in pairs for pair in p.pairs]
    probs = encoder.predict(flat)
    results: list[SupportResult] = []
    start = 0
    for f, p in zip(feats, pairs, strict=True):
        empty = unscored(f) or (None if p.pairs else SupportResult(0.0, (), NO_EVIDENCE))
        if empty is not None:
            results.append(empty)
            continue
        part = probs[start : start + len(p.pairs)]
        start += len(p.pairs)
        claims = claim_supports(f, part)
        results.append(SupportResult(aggregate(part), claims, reason_for(claims)))
    return results
