"""Ranked context precision: a verdict per chunk, scored as average precision over the
ranking; judged in one call (split only over the budget) or offline."""

import asyncio

import pytest

from contextlens.embeddings.adapters import as_embedder
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.base import Services
from contextlens.metrics.context_precision_ranked import (
    RankedPrecisionDetails,
    RankedPrecisionMetric,
    average_precision,
)
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer
from support import blocks
from support.rag import CHUNKS, chunks_of, rule_reply

CASE = ModelTestCase(
    input="How many books can members borrow?",
    expected_output="Members may borrow five books for three weeks.",
    retrieval_context=[CHUNKS[2], CHUNKS[1], CHUNKS[0]],
)


def score(metric, case, services):
    return asyncio.run(metric.score(case, services))


def judged(server):
    return Services(judge=resolve_judge(f"{server.base_url}#j"), embedder=as_embedder(None))


def test_average_precision_rewards_useful_chunks_ranked_first():
    assert average_precision([1, 1, 0, 0]) == 1.0
    assert average_precision([0, 0, 1, 1]) == pytest.approx((1 / 3 + 2 / 4) / 2)
    assert average_precision([1, 0, 1]) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision([0, 0]) == 0.0 and average_precision([]) == 0.0
    # probabilities in place of verdicts: the 0/1 case is the judged formula
    assert average_precision([0.9, 0.1]) > average_precision([0.1, 0.9])


def test_one_call_one_verdict_per_chunk_and_the_score_is_their_average_precision():
    with FakeOpenAIServer(reply=rule_reply) as server:
        result = score(RankedPrecisionMetric(), CASE, judged(server))
        [request] = server.requests
    system, user = (m["content"] for m in request["messages"])
    assert "the expected answer (the reference)" in system and "never" in system
    assert blocks(user, "expected_output") == [CASE.expected_output] and len(chunks_of(user)) == 3
    listed = request["response_format"]["json_schema"]["schema"]["properties"]["verdicts"]
    assert listed["minItems"] == listed["maxItems"] == 3
    details = result.details
    assert isinstance(details, RankedPrecisionDetails) and details.against == "expected_output"
    assert [(v.chunk, v.verdict) for v in details.verdicts] == [(0, "no"), (1, "yes"), (2, "no")]
    assert result.score == 0.5 and details.useful == 1 and details.judge_calls == 1
    assert "at rank(s) 2" in result.reason
    assert "Ranked above a useful chunk but not useful: retrieval_context[0]" in result.reason


def test_without_an_expected_output_usefulness_is_for_the_input():
    case = CASE.model_copy(update={"expected_output": None})
    with FakeOpenAIServer(reply=rule_reply) as server:
        result = score(RankedPrecisionMetric(), case, judged(server))
        user = server.requests[0]["messages"][1]["content"]
    assert "There is no expected answer" in user and "expected_output_" not in user
    assert result.details.against == "input" and "useful for the input" in result.reason


def test_over_the_budget_the_chunks_are_split_and_a_chunk_too_large_alone_fails():
    metric = RankedPrecisionMetric(max_prompt_tokens=500)
    with FakeOpenAIServer(reply=rule_reply) as server:
        result = score(metric, CASE, judged(server))
        calls = server.calls
    assert calls == 2 and result.details.judge_calls == 2
    assert [v.verdict for v in result.details.verdicts] == ["no", "yes", "no"]
    huge = CASE.model_copy(update={"retrieval_context": ["word " * 4000, CHUNKS[1]]})
    with FakeOpenAIServer(reply=rule_reply) as server:
        failed = score(metric, huge, judged(server))
        assert server.calls == 0
    assert (
        failed.score is None and "retrieval_context[0] alone would make the prompt" in failed.error
    )


def test_merged_near_duplicates_count_once_at_their_best_rank():
    case = CASE.model_copy(
        update={"retrieval_context": [CHUNKS[1], CHUNKS[1].replace(".", "!"), CHUNKS[2]]}
    )
    with FakeOpenAIServer(reply=rule_reply) as server:
        plain = score(RankedPrecisionMetric(), case, judged(server))
        merged = score(RankedPrecisionMetric(merge_duplicates=True), case, judged(server))
    assert [v.chunk for v in plain.details.verdicts] == [0, 1, 2]
    [first, second] = merged.details.verdicts
    assert (first.chunk, first.merged, second.chunk) == (0, [1], 2)
    assert merged.details.duplicates[0].chunks == [0, 1]


def test_offline_usefulness_is_support_of_the_reference_or_relevance_to_the_input():
    services = Services(judge=None, embedder=as_embedder(None))
    good_first = score(
        RankedPrecisionMetric(),
        CASE.model_copy(update={"retrieval_context": [CHUNKS[1], CHUNKS[2]]}),
        services,
    )
    good_last = score(
        RankedPrecisionMetric(),
        CASE.model_copy(update={"retrieval_context": [CHUNKS[2], CHUNKS[1]]}),
        services,
    )
    assert good_first.score > good_last.score
    values = [v.usefulness for v in good_last.details.verdicts]
    assert good_last.score == pytest.approx(average_precision(values), abs=1e-4)
    assert "supports a claim of the expected answer" in good_last.details.verdicts[0].reason
    bare = CASE.model_copy(update={"expected_output": None})
    no_reference = score(RankedPrecisionMetric(), bare, services)
    assert no_reference.details.against == "input"
    assert "bears on the input" in no_reference.details.verdicts[0].reason
