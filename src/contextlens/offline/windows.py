"""Claim-evidence pairs for the claim reader: each claim with the window of evidence it is read
against.

A claim's window is the evidence sentences closest to it (cosine of the bundled embedder,
computed once for the support features), best first until the window's word budget is
spent, then put back in document order and joined: a long page gives the few sentences
that bear on the claim, a short context the whole of it. A claim of a few words (a bare
answer, "Delhi") is read with its question in front, as the claim it makes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contextlens.offline.text import WORD

#: Evidence words per window (about 1.3 word pieces each: 75 words fill ~100 of the
#: reader's 128).
WINDOW_WORDS = 75
#: A claim of at most this many words is read with its question in front.
SHORT_CLAIM = 5
#: Question words kept in front of a short claim.
QUESTION_WORDS = 40


def _words(text: str) -> int:
    return len(WORD.findall(text))


def claim_text(claim: str, question: str = "") -> str:
    """The first side of a pair: the claim, or for a short claim its question and the claim."""
    if question.strip() and _words(claim) <= SHORT_CLAIM:
        kept = question.split()[:QUESTION_WORDS]
        return f"{' '.join(kept)} {claim}"
    return claim


def window(similarities: np.ndarray, sentences: Sequence[str], budget: int = WINDOW_WORDS) -> str:
    """The evidence window of one claim, from its cosine to each evidence sentence.

    The best sentence is always in (cut to ``budget`` words when longer); further ones go
    in while they fit.
    """
    order = np.argsort(-np.asarray(similarities, dtype=np.float64), kind="stable")
    chosen: list[int] = []
    used = 0
    for i in order.tolist():
        n = _words(sentences[i])
        if not chosen:
            chosen.append(i)
            used = n
            if used >= budget:
                break
            continue
        if used + n > budget:
            continue
        chosen.append(i)
        used += n
        if used >= budget - 5:
            break
    if len(chosen) == 1 and used > budget:
        return " ".join(sentences[chosen[0]].split()[:budget])
    return " ".join(sentences[i] for i in sorted(chosen))


def windows(
    claim_vectors: np.ndarray,
    evidence_vectors: np.ndarray,
    sentences: Sequence[str],
    budget: int = WINDOW_WORDS,
) -> list[str]:
    """The window of each claim (unit rows: the dot product is the cosine)."""
    if not len(sentences):
        return ["" for _ in range(len(claim_vectors))]
    sims = np.asarray(claim_vectors) @ np.asarray(evidence_vectors).T
    return [window(row, sentences, budget) for row in sims]
