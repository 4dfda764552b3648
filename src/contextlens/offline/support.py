"""Offline support: the probability that a reply stays within its evidence (faithfulness).

What it is: a small logistic model (``offline/weights/support.json``) over cheap features of
each reply sentence ("claim") against its evidence, see :mod:`contextlens.offline.features`:
the mean cosine of the claims with their closest evidence sentences (MiniLM), the numbers
found nowhere in the evidence, and the share of the reply's content words found in it.
``benchmarks/select_support.py`` measured it leave-one-source-out on 9 sources (BEGIN dev
dialogue replies, WiCE claims against the pages they cite, four AttributionBench sources of
search-augmented answers, Factcheck-GPT claims, SummEdits summaries, HaluEval QA), deciding
on the seven with natural errors judged by people, against a three-feature baseline (cosines
and shared words); it is fitted on all 9. Every distinct sentence is embedded once; the text
features are regular expressions and set arithmetic, memoised per text. The score ranks; its
scale does not carry from one source to another, so ``contextlens calibrate`` on your own
labels sets the threshold.

Questions back to the user ("Anything else I can help with?") and bare acknowledgements
("Yes.") make no claim and are left out unless the reply has nothing else; so are citation
markers ("[2]", "(source: doc 3)") and source lists ("Sources: ...", see
:mod:`contextlens.offline.citations`). The reply is
scored from the features of all its claims (the weakest claim's similarity, the most
invented names, ...); each claim is also scored on its own, and the reason names the
least supported one and what is wrong with it (numbers or names not in the context, a
negation, opposite wording).

What it is not: a language model or a fact checker. It does not reason, follow
coreference, or know that "acquitted" contradicts "arrested" (listed opposites are named in
the reason but did not carry over to unseen sources as a model input); a rewording that
swaps a verb for its opposite or changes who did what to whom with the same words can
score high (on SummEdits' minimal edits it ranks consistent above
inconsistent summaries only 54 % to 75 % of the time), and a correct reply that paraphrases
heavily can score low. Reply length is not a feature. Use an LLM judge where that matters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from contextlens.embeddings.base import Embedder, TextVectors, embed_distinct
from contextlens.offline.citations import strip_citations
from contextlens.offline.features import (
    CANDIDATES,
    CLAIM_COLUMNS,
    FEATURES,
    ClaimDetail,
    TextFacts,
    aggregate_many,
    claim_features,
    claim_row,
    facts,
    gc_paused,
    joint_facts,
)
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.text import is_question, numbers, sentences

_SEMICOLON = re.compile(r";\s+")
#: The bundled model's name (``offline/weights/support.json``).
MODEL_NAME = "support"
#: Weight of the weakest claim when callers combine claim supports (mean pulled to the min).
MIN_WEIGHT = 0.5
#: Claim-to-evidence similarities computed at once by :func:`align` (16 MB of float32).
ALIGN_BLOCK = 1 << 22


@dataclass(frozen=True)
class ClaimSupport:
    """One sentence of a reply and how well the evidence supports it."""

    sentence: str
    similarity: float
    overlap: float
    new_numbers: tuple[str, ...]
    support: float
    new_names: tuple[str, ...] = ()
    negation_mismatch: bool = False
    opposites: tuple[str, ...] = ()
    closest: str = ""
    """The evidence sentence closest to the claim."""
    verdict: str | None = None
    """The claim reader's verdict: ``supported`` (``support >= 0.5``), else ``contradicted``
    or ``not mentioned``, whichever it finds likelier (None: a reader with no verdicts)."""


@dataclass(frozen=True)
class SupportResult:
    """The support of a whole reply."""

    score: float
    claims: tuple[ClaimSupport, ...]
    reason: str


@dataclass(frozen=True)
class SupportItem:
    """A reply, the texts that may support it, and the question it answers (its words are
    not new content when the reply repeats them, but they support nothing)."""

    reply: str
    evidence: Sequence[str]
    question: str = ""


@dataclass(frozen=True)
class ItemFeatures:
    """The features of one item: ``None`` rows when it has no claim or no evidence; ``reply``
    holds every :data:`~contextlens.offline.features.CANDIDATES` column."""

    claims: list[str]
    rows: np.ndarray | None
    details: list[ClaimDetail]
    reply: np.ndarray | None
    closest: tuple[str, ...] = ()
    """Each claim's closest evidence sentence."""


def _clauses(sentence: str) -> list[str]:
    """``sentence`` split at semicolons when each part states something on its own."""
    parts = [p.strip() for p in _SEMICOLON.split(sentence)]
    return parts if len(parts) > 1 and all(facts(p).words for p in parts) else [sentence]


def _claims(reply: str) -> list[str]:
    """The sentences (and ;-clauses) that state something: not questions, not bare "Yes."."""
    return list(_claim_tuple(reply))


@lru_cache(maxsize=4096)
def _claim_tuple(reply: str) -> tuple[str, ...]:
    found = [c for s in sentences(strip_citations(reply) or reply) for c in _clauses(s)]
    statements = [s for s in found if not is_question(s) and (facts(s).words or numbers(s))]
    return tuple(statements or found)


@dataclass(frozen=True)
class _Evidence:
    """The sentences of an item's evidence texts and what they hold together (the facts of
    a single sentence are computed only when a claim is aligned with it)."""

    sentences: tuple[str, ...]
    facts: TextFacts  # of all of them: words, tokens, numbers, word pairs


@lru_cache(maxsize=1024)
def _evidence(texts: tuple[str, ...]) -> _Evidence:
    found = tuple(s for text in texts for s in sentences(text))
    return _Evidence(found, joint_facts(found))


def clear_caches() -> None:
    """Forget the memoised sentence splits and text features (not the embeddings)."""
    _claim_tuple.cache_clear()
    _evidence.cache_clear()
    facts.cache_clear()


def evidence_and_claims(
    items: Sequence[SupportItem],
) -> tuple[list[list[str]], list[_Evidence]]:
    """The claims of each reply and the sentences of each item's evidence (memoised)."""
    with gc_paused():
        return [_claims(i.reply) for i in items], [_evidence(tuple(i.evidence)) for i in items]


def _texts(claim_lists: list[list[str]], evidences: list[_Evidence]) -> Iterator[str]:
    for group in (*claim_lists, *(e.sentences for e in evidences)):
        yield from group


def support_texts(items: Sequence[SupportItem]) -> list[str]:
    """Every distinct text that :func:`score_support` embeds for ``items``: the claims and
    the evidence sentences."""
    return list(dict.fromkeys(_texts(*evidence_and_claims(items))))


async def support_features(items: Sequence[SupportItem], embedder: Embedder) -> list[ItemFeatures]:
    """Claims, per-claim rows and the reply feature row of each item (one embedding call)."""
    claim_lists, evidences = evidence_and_claims(items)
    vectors = await embed_distinct(embedder, _texts(claim_lists, evidences))
    with gc_paused():
        return _features(items, claim_lists, evidences, vectors)


def align(claims: np.ndarray, evidence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each claim's closest evidence sentence (row index) and their cosine, from unit rows.

    The similarity matrix is computed at most :data:`ALIGN_BLOCK` entries at a time, so a
    long reply against a long context takes bounded memory (20,000 sentences on each side
    would otherwise take 1.6 GB at once).
    """
    n, m = len(claims), len(evidence)
    if n * m <= ALIGN_BLOCK:
        sims = claims @ evidence.T
        best = sims.argmax(axis=1)
        return best, sims[np.arange(n), best]
    best = np.empty(n, dtype=np.intp)
    closeness = np.empty(n, dtype=np.result_type(claims, evidence))
    step = max(1, ALIGN_BLOCK // m)
    for start in range(0, n, step):
        block = claims[start : start + step] @ evidence.T
        found = block.argmax(axis=1)
        best[start : start + step] = found
        closeness[start : start + step] = block[np.arange(len(found)), found]
        del block  # freed before the next block is computed
    return best, closeness


def _features(
    items: Sequence[SupportItem],
    claim_lists: list[list[str]],
    evidences: list[_Evidence],
    vectors: TextVectors,
) -> list[ItemFeatures]:
    rows: list[list[float]] = []
    starts: list[int] = []
    parts: list[tuple[list[str], int, list[ClaimDetail], tuple[str, ...]] | None] = []
    for claims, ev, item in zip(claim_lists, evidences, items, strict=True):
        given = facts(item.question) if item.question else None
        if not claims or not ev.sentences:
            parts.append(None)
            continue
        best, closeness = align(vectors.of(claims), vectors.of(ev.sentences))
        starts.append(len(rows))
        details = []
        for i, claim in enumerate(claims):
            row, detail = claim_row(
                claim,
                facts(claim),
                float(closeness[i]),
                facts(ev.sentences[best[i]]),
                ev.facts,
                given,
            )
            rows.append(row)
            details.append(detail)
        parts.append((claims, starts[-1], details, tuple(ev.sentences[j] for j in best)))
    matrix = np.asarray(rows, dtype=np.float64).reshape(-1, len(CLAIM_COLUMNS))
    replies = aggregate_many(matrix, np.asarray(starts)) if starts else matrix[:0]
    out: list[ItemFeatures] = []
    k = 0
    for claims, part in zip(claim_lists, parts, strict=True):
        if part is None:
            out.append(ItemFeatures(claims, None, [], None))
            continue
        _, start, details, closest = part
        out.append(
            ItemFeatures(claims, matrix[start : start + len(claims)], details, replies[k], closest)
        )
        k += 1
    return out


NO_EVIDENCE = "There is no context to support the reply."


def unscored(f: ItemFeatures) -> SupportResult | None:
    """The result of an item with no claim or no evidence (score 0, saying which); None when
    it has both."""
    if not f.claims:
        return SupportResult(0.0, (), "The reply is empty: nothing follows the context.")
    if f.rows is None:
        return SupportResult(0.0, (), NO_EVIDENCE)
    return None


def claim_supports(
    f: ItemFeatures,
    supports: Sequence[float] | np.ndarray,
    verdicts: Sequence[str | None] | None = None,
) -> tuple[ClaimSupport, ...]:
    """Each claim of a scored item (:func:`unscored` is None) with its word-level findings,
    its closest evidence sentence and ``supports``, its support by the reader that scored
    (and ``verdicts``, the reader's, when it gives them)."""
    assert f.rows is not None
    found = list(verdicts) if verdicts is not None else [None] * len(f.claims)
    return tuple(
        ClaimSupport(
            sentence=c,
            similarity=float(row[0]),
            overlap=float(row[2]),
            new_numbers=d.new_numbers,
            support=float(p),
            new_names=d.new_names,
            negation_mismatch=d.negation_mismatch,
            opposites=d.antonyms,
            closest=near,
            verdict=v,
        )
        for c, row, d, p, near, v in zip(
            f.claims, f.rows, f.details, supports, f.closest, found, strict=True
        )
    )


def reason_for(claims: Sequence[ClaimSupport]) -> str:
    """The reason of a reply's support: claims supported, and the least supported one."""
    supported = sum(c.support >= 0.5 for c in claims)
    weakest = min(claims, key=lambda c: c.support)
    text = f"{supported} of {len(claims)} claim(s) supported by the context (offline estimate)."
    if weakest.support < 0.5:
        said = f"{weakest.verdict}: " if weakest.verdict else ""
        text += (
            f" Least supported: {weakest.sentence[:120]!r} ({said}support {weakest.support:.2f},"
            f" similarity {weakest.similarity:.2f}, {weakest.overlap:.0%} of its words in the"
            " context"
        )
        if weakest.new_numbers:
            text += f"; numbers not in the context: {', '.join(weakest.new_numbers)}"
        if weakest.new_names:
            text += f"; names not in the context: {', '.join(weakest.new_names)}"
        if weakest.negation_mismatch:
            text += "; negated on one side only against the closest context sentence"
        if weakest.opposites:
            text += f"; opposite wording to the context: {', '.join(weakest.opposites)}"
        text += ")."
    return text


async def score_support(
    items: Sequence[SupportItem], embedder: Embedder, model: LogisticModel | None = None
) -> list[SupportResult]:
    """Support of each item's reply by its evidence; every distinct text is embedded once.

    ``model`` defaults to the bundled ``support`` model (whose features are
    :data:`contextlens.offline.features.FEATURES`); any model over the extractor's
    :data:`~contextlens.offline.features.CANDIDATES` can score.
    """
    model = model or load_model(MODEL_NAME).taking(FEATURES)
    if not set(model.features) <= set(CANDIDATES):
        raise ValueError(
            f"offline model {model.name!r} takes the features {model.features}; the support "
            f"extractor computes {CANDIDATES}"
        )
    inputs = [CANDIDATES.index(f) for f in model.features]
    feats = await support_features(items, embedder)
    scored = [f for f in feats if f.reply is not None]
    reply_p = (
        model.predict(np.stack([_reply(f) for f in scored])[:, inputs]) if scored else np.zeros(0)
    )
    claim_p = (
        model.predict(np.concatenate([claim_features(_rows(f)) for f in scored])[:, inputs])
        if scored
        else np.zeros(0)
    )

    results: list[SupportResult] = []
    k = start = 0
    for f in feats:
        empty = unscored(f)
        if empty is not None:
            results.append(empty)
            continue
        n = len(f.claims)
        claims = claim_supports(f, claim_p[start : start + n])
        start += n
        score = float(reply_p[k])
        k += 1
        results.append(SupportResult(score, claims, reason_for(claims)))
    return results


def _reply(features: ItemFeatures) -> np.ndarray:
    """The reply features of an item that has them."""
    assert features.reply is not None
    return features.reply


def _rows(features: ItemFeatures) -> np.ndarray:
    """The claim rows of an item that has them (its reply was scored)."""
    assert features.rows is not None
    return features.rows
