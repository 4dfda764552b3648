"""Sufficient context: whether the chunks alone answer the question, crossed with whether the
answer abstained; offline and with a judge (one call per case)."""

import asyncio
import json

from contextlens import evaluate
from contextlens.embeddings.minilm import default_embedder
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.base import Services
from contextlens.metrics.sufficient_context import (
    INSUFFICIENT,
    SufficiencyDetails,
    SufficientContextMetric,
    crosstab,
)
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer
from support import block_of
from support.rag import chunks_of

CHUNKS = [
    "Refunds are paid within 14 days of the return.",
    "Standard shipping is free on orders over 50 euros.",
    "The store opens at 9am on weekdays.",
]
WARRANTY = "What is the warranty period of the espresso machine?"
ANSWERED = ModelTestCase(
    input=WARRANTY,
    actual_output="The espresso machine has a two-year warranty.",
    retrieval_context=CHUNKS,
)
ABSTAINED = ANSWERED.model_copy(update={"actual_output": "I don't know."})
OPENING = ModelTestCase(
    input="When does the store open on weekdays?",
    actual_output="At 9am.",
    retrieval_context=CHUNKS,
)


def offline(case):
    services = Services(judge=None, embedder=default_embedder())
    return asyncio.run(SufficientContextMetric().score(case, services))


def by_rule(request: dict) -> str:
    """Sufficient when a chunk holds the question's word "store"."""
    prompt = request["messages"][1]["content"]
    question = block_of(prompt, "input")
    enough = "store" in question and any("store" in c for c in chunks_of(prompt))
    return json.dumps({"reason": "r", "sufficient": "yes" if enough else "no"})


def test_offline_chunks_that_cannot_answer_are_insufficient_and_the_answer_counted():
    result = offline(ANSWERED)
    details = result.details
    assert isinstance(details, SufficiencyDetails) and details.method == "offline"
    assert details.sufficient is False and details.answered is True
    assert details.cell == "insufficient, answered"
    assert "warranty" in details.missing_terms
    assert result.score is not None and result.score < 0.4
    assert "answered on insufficient context" in result.reason


def test_offline_an_abstaining_answer_on_insufficient_context_is_counted_as_abstained():
    result = offline(ABSTAINED)
    assert result.details.cell == "insufficient, abstained"
    assert result.details.abstention == "does not know"


def test_offline_chunks_on_the_question_are_never_called_sufficient():
    # offline tells chunks off the question from chunks on it, not whether they hold the answer
    result = offline(OPENING)
    assert result.score is None and result.not_applicable == "not applicable: needs a judge"
    assert result.details.sufficient is None and result.details.cell is None
    assert result.details.probability >= INSUFFICIENT
    assert "sufficiency_bands.py" in result.reason


def test_offline_between_the_bands_it_says_it_needs_a_judge():
    case = OPENING.model_copy(update={"input": "How long do refunds take?"})
    result = offline(case)
    assert result.score is None and result.not_applicable == "not applicable: needs a judge"
    assert result.details.sufficient is None and result.details.probability is not None


def test_the_crosstab_counts_answers_given_on_insufficient_context():
    with FakeOpenAIServer(reply=by_rule) as server:
        run = evaluate(
            [ANSWERED, ABSTAINED, OPENING],
            ["sufficient-context"],
            judge=f"{server.base_url}#j",
            progress=False,
        )
    table = crosstab(run.results)
    assert table.answered_on_insufficient == 1
    assert table.cells["insufficient, abstained"] == 1
    assert table.cells["sufficient, answered"] == 1
    assert table.answered_on_insufficient_share == 0.5
    breakdown = run.summaries["sufficient-context"].breakdown
    assert breakdown.cells == {k: v for k, v in table.cells.items() if v}
    # of the two answers given, one was given on insufficient context
    assert breakdown.means == {"answers given on insufficient context": 0.5}
    assert breakdown.n_means == {"answers given on insufficient context": 2}
    assert "1 insufficient, answered" in breakdown.line()


def test_with_a_judge_one_call_per_case_and_the_cell_of_each():
    cases = [ANSWERED, ABSTAINED, OPENING]
    with FakeOpenAIServer(reply=by_rule) as server:
        services = Services(
            judge=resolve_judge(f"{server.base_url}#j"), embedder=default_embedder()
        )
        results = [asyncio.run(SufficientContextMetric().score(c, services)) for c in cases]
        assert server.calls == 3
        prompt = server.requests[0]["messages"][1]["content"]
    assert block_of(prompt, "input") == WARRANTY and chunks_of(prompt) == CHUNKS
    assert "The espresso machine" not in prompt  # the answer is not the judge's to see
    assert [r.details.cell for r in results] == [
        "insufficient, answered",
        "insufficient, abstained",
        "sufficient, answered",
    ]
    assert [r.score for r in results] == [0.0, 0.0, 1.0]
    assert crosstab(results).answered_on_insufficient == 1


def test_a_case_without_an_answer_has_no_cell():
    result = offline(ANSWERED.model_copy(update={"actual_output": None}))
    assert result.details.answered is None and result.details.cell is None


def test_assert_context_fails_a_case_answered_on_insufficient_context():
    import pytest

    from contextlens.pytest_plugin import assert_context

    with pytest.raises(AssertionError, match="sufficient-context"):
        assert_context(ANSWERED, ["sufficient-context"])
    [item] = assert_context(OPENING, ["sufficient-context"])  # offline cannot tell: not failed
    assert item.not_applicable == "not applicable: needs a judge"
