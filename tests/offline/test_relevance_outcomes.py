"""The offline relevance estimate on the seed libraries' documented examples, through
DeepEval's and agensight's surface (``ContextualRelevancyMetric`` with no judge)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextlens import ContextualRelevancyMetric, ModelTestCase
from contextlens.offline.relevance import THRESHOLD

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# agensight's documented example: a return-policy question and four chunks, of which its
# judge finds three relevant (score "e.g. 0.75"); offline, only the chunk that states the
# return window is relevant by its cosine (see the example's docstring)
RETURN_POLICY = "What is your return policy?"
RETURN_CHUNKS = [
    "Return Policy: Items must be returned within 30 days of purchase",
    "Condition: Products must be unused and in original packaging",
    "Requirements: Original receipt must be presented",
    "Shipping Policy: Free shipping on orders over $50",
]
# DeepEval's documented example
SHOES = "What if these shoes don't fit?"
REFUND = "All customers are eligible for a 30 day full refund at no extra cost."
UNRELATED = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Preheat the oven to 200 degrees and bake the bread for thirty minutes.",
]


RETURN_ANSWER = "You can return items within 30 days if unused."


def measure(question: str, chunks: list[str], answer: str = "-") -> ContextualRelevancyMetric:
    metric = ContextualRelevancyMetric(threshold=0.7, include_reason=True)
    metric.measure(
        ModelTestCase(input=question, actual_output=answer, retrieval_context=list(chunks))
    )
    assert metric.result.details.method == "offline"
    return metric


def chunk_relevance(metric: ContextualRelevancyMetric) -> list[float]:
    return [c.probability for c in metric.result.details.chunks]


@pytest.mark.parametrize("answer", ["-", RETURN_ANSWER])
def test_agensight_return_policy_example_finds_the_return_window_most_relevant(answer):
    metric = measure(RETURN_POLICY, RETURN_CHUNKS, answer)
    assert 0.0 < metric.score < 1.0
    # one statement per chunk, so the score is the mean of the chunk probabilities (the
    # expected share of relevant statements), and the verdicts are those probabilities at 0.5
    relevance = chunk_relevance(metric)
    assert len(metric.verdicts) == len(RETURN_CHUNKS)
    assert metric.score == pytest.approx(sum(relevance) / len(RETURN_CHUNKS), abs=1e-3)
    yes = sum(r >= THRESHOLD for r in relevance)
    assert [v["verdict"] == "yes" for v in metric.verdicts] == [r >= THRESHOLD for r in relevance]
    # the chunk that states the return window is the most relevant, and relevant
    assert max(relevance) == relevance[0] and metric.verdicts[0]["verdict"] == "yes"
    assert metric.reason.startswith(f"{yes} of 4 statements are relevant.")


def test_agensight_example_script_prints_its_score_offline():
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENAI") and k != "CONTEXTLENS_JUDGE"
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "contextual_relevancy_agensight.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    score, reason = out.stdout.strip().splitlines()[-2:]
    assert 0.0 < float(score) < 1.0
    assert "of 4 statements are relevant" in reason


@pytest.mark.parametrize("unrelated", UNRELATED)
def test_deepeval_refund_example_scores_above_a_chunk_about_something_else(unrelated):
    refund, other = measure(SHOES, [REFUND]), measure(SHOES, [unrelated])
    assert chunk_relevance(refund)[0] > chunk_relevance(other)[0]
    assert refund.verdicts[0]["relevance"] > other.verdicts[0]["relevance"]
    # one statement each: the metric's score is the chunk's probability
    assert refund.score > other.score
    assert refund.score == pytest.approx(chunk_relevance(refund)[0], abs=1e-3)
