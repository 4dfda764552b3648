"""RAG diagnostics (contextlens.metrics.diagnostics): one matrix of claim verdicts, from two
judge calls per case, split into hallucination, noise sensitivity, self-knowledge and
context utilisation."""

import json
import re

import numpy as np
import pytest

from contextlens import evaluate
from contextlens.errors import InputError
from contextlens.metrics.diagnostics import DiagnosticsMetric, VerdictMatrix
from contextlens.metrics.registry import resolve
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer
from support import blocks
from support.rag import chunks_of

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the is it to of for on in at and by".split())


def words(text):
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def states(source, claim):
    return words(claim) <= words(source)


def diagnostics_reply(request):
    """A judge that follows the diagnostics prompt by rule: a claim is a sentence; a text
    supports it when it holds all of its words."""
    _, prompt = (m["content"] for m in request["messages"])
    asked = json.dumps(request.get("response_format") or {})
    answer_side = "in_reference" in asked
    text = blocks(prompt, "output" if answer_side else "expected_output")[0]
    other = blocks(prompt, "expected_output" if answer_side else "output")[0]
    chunks = chunks_of(prompt)
    field = "in_reference" if answer_side else "in_answer"
    claims = [
        {
            "claim": s,
            "supported_by": [k for k, c in enumerate(chunks, 1) if states(c, s)],
            field: "yes" if states(other, s) else "no",
            "reason": "by rule",
        }
        for s in re.split(r"(?<=[.!?])\s+", text.strip())
        if s
    ]
    return json.dumps({"claims": claims})


CHUNKS = [
    "The Eiffel Tower is 330 metres tall. It opened in 1889.",  # relevant
    "The Louvre opened in 1793 and is the largest museum.",  # irrelevant
]
CASE = ModelTestCase(
    name="tower",
    input="How tall is the Eiffel Tower and when did it open?",
    # correct and supported; wrong but in an irrelevant chunk; wrong and in no chunk;
    # correct and in no chunk
    actual_output=(
        "The Eiffel Tower is 330 metres tall. The Louvre is the largest museum. "
        "The Eiffel Tower is painted blue. The Eiffel Tower stands in Paris."
    ),
    expected_output=(
        "The Eiffel Tower is 330 metres tall. It opened in 1889. The Eiffel Tower stands in Paris."
    ),
    retrieval_context=CHUNKS,
)


def test_two_judge_calls_give_every_diagnostic_of_a_case():
    with FakeOpenAIServer(reply=diagnostics_reply) as server:
        run = evaluate(
            [CASE], ["rag-diagnostics"], judge=f"{server.base_url}#judge", progress=False
        )
        calls = server.calls
    assert calls == 2
    [result] = run.results
    d = result.details.diagnostics
    assert [c.kind for c in result.details.answer_claims] == [
        "correct, supported",
        "noise, irrelevant chunk",
        "hallucination",
        "self-knowledge",
    ]
    assert result.details.relevant_chunks == [0]
    assert (d.correctness, d.completeness) == (0.5, pytest.approx(2 / 3))
    assert result.score == pytest.approx(d.f1) and d.f1 == pytest.approx(4 / 7, abs=1e-6)
    assert (d.hallucination, d.self_knowledge, d.faithfulness) == (0.25, 0.25, 0.5)
    assert (d.noise_sensitivity_relevant, d.noise_sensitivity_irrelevant) == (0.0, 0.25)
    # the reference's claims: two held by chunk 1, one by none; the answer states one of the two
    assert d.context_recall == pytest.approx(2 / 3) and d.context_utilization == 0.5
    means = run.summaries["rag-diagnostics"].breakdown.means
    assert means["hallucination"] == 0.25 and means["context_utilization"] == 0.5
    assert "f1" not in means  # the F1 is the score
    assert "hallucination 0.25" in result.reason and "noise sensitivity 0.00 relevant" in (
        result.reason
    )


def test_a_wrong_claim_a_relevant_chunk_supports_is_noise_from_a_relevant_chunk():
    # chunk 0 supports a reference claim (relevant) and a claim the reference does not make
    matrix = VerdictMatrix(
        answer_chunks=np.array([[True, False], [True, False], [False, True]]),
        correct=np.array([True, False, False]),
        reference_chunks=np.array([[True, False]]),
        in_answer=np.array([True]),
    )
    assert matrix.kinds() == [
        "correct, supported",
        "noise, relevant chunk",
        "noise, irrelevant chunk",
    ]
    shares = matrix.shares()
    parts = (
        shares.hallucination,
        shares.noise_sensitivity_relevant,
        shares.noise_sensitivity_irrelevant,
    )
    assert sum(parts) == pytest.approx(1 - shares.correctness, abs=1e-5)


def test_offline_it_reads_the_same_matrix_and_an_abstaining_answer_is_not_applicable():
    shy = CASE.model_copy(update={"name": "shy", "actual_output": "I don't know."})
    run = evaluate([CASE, shy], [DiagnosticsMetric()], progress=False)
    found = {r.case_id: r for r in run.results}
    tower = found["tower"]
    assert tower.details.method == "offline" and tower.details.judge == "offline"
    d = tower.details.diagnostics
    assert len(tower.details.answer_claims) == 4 and len(tower.details.reference_claims) == 3
    assert all(0.0 <= v <= 1.0 for v in d.model_dump().values() if v is not None)
    assert "Offline estimate" in tower.reason
    first = tower.details.answer_claims[0]
    assert first.supported_by == [0] and first.in_other == "yes"
    assert found["shy"].score is None
    assert found["shy"].not_applicable == "not applicable: the answer abstains"


def test_it_is_registered_with_what_it_requires():
    info = resolve("RAGChecker")
    assert info.name == "rag-diagnostics"
    assert set(info.requires) == {"actual_output", "expected_output", "retrieval_context"}
    no_reference = CASE.model_copy(update={"name": "bare", "expected_output": None})
    with pytest.raises(InputError, match="requires 'expected_output', which is missing"):
        evaluate([no_reference], ["rag-diagnostics"], progress=False)
