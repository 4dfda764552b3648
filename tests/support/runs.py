"""Runs made up for the report's tests: many cases, typed details, meta, failures."""

from __future__ import annotations

import random

from contextlens.cases import CaseRecord
from contextlens.metrics.context_similarity import SideSimilarity, SimilarityDetails
from contextlens.metrics.contextual_relevancy import RelevancyDetails, StatementVerdict
from contextlens.metrics.settings import MetricSettings
from contextlens.results import EvalRun, ItemResult, MetricSummary
from contextlens.schemas import ModelTestCase

DOMAINS = ("billing", "shipping", "returns", "hours")
RELEVANCY, SIMILARITY = "contextual-relevancy", "context-similarity"
#: The pass mark each metric's items are held to, as a run sets it.
MARKS = {RELEVANCY: 0.5, SIMILARITY: 0.8}


def case_of(i: int) -> ModelTestCase:
    return ModelTestCase(
        name=f"case-{i:05d}",
        input=f"Question {i}: when do you open on day {i % 7}?",
        actual_output=f"We open at {8 + i % 3} am.",
        expected_output="We open at 9 am.",
        retrieval_context=[f"Opening hours of shop {i}: 9 am to 5 pm.", "Parking is free."],
        meta={"domain": DOMAINS[i % len(DOMAINS)], "tier": "gold" if i % 5 == 0 else "silver"},
    )


def items_of(i: int, rng: random.Random, shift: float = 0.0) -> list[ItemResult]:
    case = f"case-{i:05d}"
    relevant = rng.random() < 0.6 + shift
    verdicts = [
        StatementVerdict(
            chunk=0,
            statement=f"Shop {i} opens at 9 am.",
            verdict="yes",
            reason="it answers the question",
        ),
        StatementVerdict(
            chunk=1,
            statement="Parking is free.",
            verdict="yes" if relevant else "no",
            reason="parking does not say when the shop opens",
        ),
    ]
    score = sum(v.verdict == "yes" for v in verdicts) / 2
    relevancy = ItemResult(
        case_id=case,
        metric=RELEVANCY,
        score=score,
        reason=f"{int(score * 2)} of 2 statements are relevant",
        success=score >= MARKS[RELEVANCY],
        judge="offline",
        details=RelevancyDetails(
            judge="offline", verdicts=verdicts, relevant=int(score * 2), statements=2
        ),
    )
    if i % 97 == 3:  # a few items the judge could not score
        similarity = ItemResult(
            case_id=case,
            metric=SIMILARITY,
            score=None,
            error="JudgeError: the reply is not JSON",
            details=SimilarityDetails(raw_reply="Sure! Here is my verdict: maybe"),
        )
    else:
        q, a = rng.uniform(0.4, 0.95), rng.uniform(0.4, 0.95) + shift
        similarity = ItemResult(
            case_id=case,
            metric=SIMILARITY,
            score=round(2 * q * a / (q + a), 6),
            reason="harmonic mean of both sides",
            success=round(2 * q * a / (q + a), 6) >= MARKS[SIMILARITY],
            details=SimilarityDetails(
                query_context_similarity=SideSimilarity(contexts_score=[q, q / 2], score=q),
                answer_context_similarity=SideSimilarity(contexts_score=[a, a / 3], score=a),
                score=2 * q * a / (q + a),
                passing=2 * q * a / (q + a) >= 0.8,
            ),
        )
    return [relevancy, similarity]


def synthetic_run(
    n: int, *, run_id: str = "synthetic01", seed: int = 1, shift: float = 0.0
) -> EvalRun:
    """``n`` cases of two metrics, held in memory with their cases."""
    rng = random.Random(seed)
    items = [item for i in range(n) for item in items_of(i, rng, shift)]
    summaries = {}
    for key, mark in MARKS.items():
        scores = [r.score for r in items if r.metric == key and r.score is not None]
        passed = sum(s >= mark for s in scores)
        summaries[key] = MetricSummary(
            metric=key,
            n=n,
            n_scored=len(scores),
            n_failed=n - len(scores),
            mean=sum(scores) / len(scores),
            ci_low=sum(scores) / len(scores) - 0.01,
            ci_high=sum(scores) / len(scores) + 0.01,
            ci_level=0.95,
            judge="offline",
            threshold=mark,
            n_passed=passed,
            pass_rate=passed / len(scores),
            pass_low=max(passed / len(scores) - 0.05, 0.0),
            pass_high=min(passed / len(scores) + 0.05, 1.0),
            settings=MetricSettings(values={"threshold": mark}, prompts="p1"),
        )
    run = EvalRun(
        run_id=run_id,
        started_at=f"2026-01-0{seed}T10:00:00+00:00",
        duration_s=12.0,
        judge="offline",
        embedder="minilm",
        repeats=1,
        summaries=summaries,
        accounting={"total": {}},
        config={"name": "nightly", "tags": {"branch": "main"}},
        results=items,
    )
    return run.with_cases(CaseRecord(case_id=f"case-{i:05d}", case=case_of(i)) for i in range(n))


def moved_run(
    run: EvalRun,
    *,
    run_id: str,
    moves: dict[str, float],
    metric: str = SIMILARITY,
    wobble: float = 0.0,
    seed: int = 7,
) -> EvalRun:
    """``run`` again as another run: the scores of ``metric`` of the cases in ``moves``
    moved by their amount (kept in 0..1), every other score of it by at most ``wobble``,
    every other item as it was; the same cases."""
    rng = random.Random(seed)
    items = []
    for item in run.results:
        if item.metric == metric and item.score is not None:
            delta = moves.get(item.case_id, rng.uniform(-wobble, wobble) if wobble else 0.0)
            item = item.model_copy(update={"score": min(max(item.score + delta, 0.0), 1.0)})
        items.append(item)
    moved = run.model_copy(update={"run_id": run_id, "results": items})
    return moved.with_cases(run.iter_cases())
