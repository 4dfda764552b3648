"""Offline support read by the claim reader: each claim's verdict probabilities against its
evidence window (:mod:`contextlens.offline.reader`), the reply scored by its claims.

A reply's score is the calibrated probability that people judge it supported, from its
claims' verdicts and extracted features
(:func:`~contextlens.offline.reader_calibration.calibrated`). Each claim's support is the
same calibration read on that claim alone, and its verdict ``supported`` exactly when that
is at least 0.5, else ``contradicted`` or ``not mentioned``, whichever the reader finds
likelier; each keeps the word-level findings of the feature scorer (numbers and names not
in the evidence, a one-sided negation) for its reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contextlens.embeddings.base import Embedder
from contextlens.offline.reader import (
    CONTRADICTED,
    NOT_MENTIONED,
    SUPPORTED,
    VERDICTS,
    ClaimReader,
    claim_pairs,
    default_reader,
)
from contextlens.offline.reader_calibration import calibrated
from contextlens.offline.support import (
    NO_EVIDENCE,
    SupportItem,
    SupportResult,
    claim_supports,
    reason_for,
    support_features,
    unscored,
)


async def score_support_reader(
    items: Sequence[SupportItem], embedder: Embedder, reader: ClaimReader | None = None
) -> list[SupportResult]:
    """Support of each item's reply, read claim by claim by the claim reader."""
    reader = reader or default_reader()
    feats = await support_features(items, embedder)
    pairs = await claim_pairs(items, embedder)  # embeddings already in memory or the cache
    flat = [pair for p in pairs for pair in p.pairs]
    probs = reader.predict(flat)
    results: list[SupportResult] = []
    start = 0
    for f, p in zip(feats, pairs, strict=True):
        empty = unscored(f) or (None if p.pairs else SupportResult(0.0, (), NO_EVIDENCE))
        if empty is not None:
            results.append(empty)
            continue
        part = probs[start : start + len(p.pairs)]
        start += len(p.pairs)
        score, each = calibrated(part, f)
        claims = claim_supports(f, each, verdicts(each, part))
        results.append(SupportResult(score, claims, reason_for(claims)))
    return results


def verdicts(supports: np.ndarray, probabilities: np.ndarray) -> list[str]:
    """Each claim's verdict: ``supported`` exactly when its calibrated support is at least
    0.5, else the likelier of the reader's other two verdicts (``(n, 3)`` rows)."""
    out = []
    for p, row in zip(np.asarray(supports), np.asarray(probabilities), strict=True):
        if p >= 0.5:
            out.append(VERDICTS[SUPPORTED])
        else:
            other = CONTRADICTED if row[CONTRADICTED] >= row[NOT_MENTIONED] else NOT_MENTIONED
            out.append(VERDICTS[other])
    return out
