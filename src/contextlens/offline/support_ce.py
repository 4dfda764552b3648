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
    ClaimSupport,
    SupportItem,
    SupportResult,
    reason_for,
    support_features,
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
        if not f.claims:
            results.append(
                SupportResult(0.0, (), "The reply is empty: nothing follows the context.")
            )
            continue
        if f.rows is None or not p.pairs:
            results.append(SupportResult(0.0, (), "There is no context to support the reply."))
            continue
        part = probs[start : start + len(p.pairs)]
        start += len(p.pairs)
        claims = tuple(
            ClaimSupport(
                sentence=c,
                similarity=float(row[0]),
                overlap=float(row[2]),
                new_numbers=d.new_numbers,
                support=float(q),
                new_names=d.new_names,
                negation_mismatch=d.negation_mismatch,
                opposites=d.antonyms,
            )
            for c, row, d, q in zip(f.claims, f.rows, f.details, part, strict=True)
        )
        results.append(SupportResult(aggregate(part), claims, reason_for(claims)))
    return results
