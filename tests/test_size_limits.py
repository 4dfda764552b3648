"""Size limits: every judge prompt has a budget, and the offline path bounds its work per item.

A prompt over ``max_prompt_tokens`` (characters / 4) is never sent: the item (for ``Context``,
the one interaction) fails with its size and the budget. Contextual relevancy still splits its
chunks over calls, but a chunk larger than the whole budget fails the case instead of being
sent alone. Offline, a text over ``max_embed_tokens`` fails the item with its size before
anything is embedded; the embedder runs the model on a bounded number of word pieces at a
time; claims are aligned with their evidence in bounded blocks; work grows linearly with the
number of chunks.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import re
import sys
import tracemalloc
from collections.abc import Sequence

import numpy as np
import pytest

from contextlens import (
    Batch,
    Context,
    ContextPrecision,
    ContextSimilarityEvaluator,
    ContextualRelevancyMetric,
    Dataset,
    evaluate,
)
from contextlens.errors import MetricComputationError
from contextlens.judges import resolve_judge
from contextlens.metrics import contextual_relevancy
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    Services,
    estimate_tokens,
)
from contextlens.metrics.context import ContextAwareness, context_messages
from contextlens.metrics.context_precision import (
    DEFAULT_FEW_SHOT_EXAMPLES,
    ContextPrecisionScorer,
    precision_messages,
)
from contextlens.metrics.context_similarity import ContextSimilarityScorer
from contextlens.metrics.contextual_relevancy import ContextualRelevancyScorer
from contextlens.offline import support
from contextlens.offline.support import SupportItem, align, score_support
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer
from support.context import make_session
from support.precision import GOOD, LIBRARY, precision_case
from support.relevancy import REFUND, SHIPPING, server_reply

OVER_BUDGET = re.compile(
    r"^the prompt would be ~[\d,]+ tokens, over the budget of 12,000; not sent$"
)
BIG = "The parcel left the depot on time and reached the customer two days later. " * 800


def budget_reason(tokens: int, budget: int = DEFAULT_MAX_PROMPT_TOKENS) -> str:
    return f"the prompt would be ~{tokens:,} tokens, over the budget of {budget:,}; not sent"


def embed_reason(field: str, text: str, limit: int) -> str:
    tokens = -(-len(text) // 4)
    return (
        f"{field} is ~{tokens:,} tokens ({len(text):,} characters), over the limit of "
        f"{limit:,} tokens per embedded text; not scored"
    )


class HashEmbedder:
    """A fast offline embedder: a pseudo-random unit vector per text; records the longest
    text and how many texts it was asked for."""

    def __init__(self, dim: int = 32) -> None:
        self.name = f"hash-{dim}"
        self.dim = dim
        self.longest = 0
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.longest = max([self.longest, *map(len, texts)])
        self.texts += len(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            row = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = row / np.linalg.norm(row)
        return out


def judged(judge) -> Services:
    return Services(judge=judge, embedder=None)  # type: ignore[arg-type]


def offline(embedder) -> Services:
    return Services(judge=None, embedder=embedder)


# --- judge prompts ---------------------------------------------------------------------------


def test_precision_prompt_over_the_budget_fails_and_is_never_sent():
    case = precision_case(output=BIG, expected_output=LIBRARY["expected_output"], context=["c"])
    tokens = estimate_tokens(precision_messages(case, DEFAULT_FEW_SHOT_EXAMPLES))
    assert tokens > DEFAULT_MAX_PROMPT_TOKENS
    with FakeOpenAIServer() as server:
        judge = resolve_judge(f"{server.base_url}#judge")
        result = asyncio.run(ContextPrecisionScorer().score(case, judged(judge)))
        assert server.calls == 0
        assert result.failed and result.score is None
        assert result.error == budget_reason(tokens) and OVER_BUDGET.match(result.error)
        assert result.details.max_prompt_tokens == DEFAULT_MAX_PROMPT_TOKENS
        # the shell: Opik's MetricComputationError with the reason; a raised budget sends it
        shell = ContextPrecision(model=f"{server.base_url}#judge", max_prompt_tokens=5_000)
        with pytest.raises(MetricComputationError, match="over the budget of 5,000; not sent"):
            shell.score(input="q", output=BIG, expected_output="e", context=["c"])
        assert server.calls == 0
        roomy = ContextPrecision(model=f"{server.base_url}#judge", max_prompt_tokens=tokens)
        scored = roomy.score(
            input="", output=BIG, expected_output=case.expected_output, context=["c"]
        )
        assert scored.value == 1.0 and server.calls == 1


def test_context_interaction_over_the_budget_fails_alone_and_the_others_are_scored():
    session = make_session()
    session.conversation[1].assistant = BIG  # the "delivery" interaction
    tokens = estimate_tokens(context_messages(session, session.conversation[1]))
    with FakeOpenAIServer() as server:  # every reply: score 1.0
        judge = resolve_judge(f"{server.base_url}#judge")
        result = asyncio.run(ContextAwareness().score(session, judged(judge)))
        assert server.calls == 2
    by_id = {i.qa_id: i for i in result.details.interactions}
    assert by_id["delivery"].error == budget_reason(tokens)
    assert by_id["delivery"].score is None
    assert by_id["hours"].score == by_id["monday"].score == 1.0
    assert result.score == 1.0 and result.details.n_failed == 1
    assert "over the budget of 12,000; not sent" in result.reason


def test_gaussia_context_takes_the_budget():
    session = make_session()
    with FakeOpenAIServer() as server:
        run = evaluate(
            [session],
            [Context(max_prompt_tokens=50)],
            judge=f"{server.base_url}#judge",
            progress=False,
            keep_results=True,
        )
        assert server.calls == 0
    [item] = run.results
    assert item.failed and "over the budget of 50; not sent" in item.error


def test_relevancy_chunk_larger_than_the_whole_budget_fails_and_nothing_is_sent():
    case = ModelTestCase(input="Refunds?", actual_output="x", retrieval_context=[REFUND, BIG])
    alone = estimate_tokens(contextual_relevancy.relevancy_messages("Refunds?", [BIG]))
    with FakeOpenAIServer(reply=server_reply) as server:
        judge = resolve_judge(f"{server.base_url}#judge")
        result = asyncio.run(ContextualRelevancyScorer().score(case, judged(judge)))
        assert server.calls == 0
        assert result.failed and result.score is None
        assert result.error == (
            f"retrieval_context[1] alone would make the prompt ~{alone:,} tokens, over the "
            "budget of 12,000; not sent"
        )
        assert result.details.max_prompt_tokens == DEFAULT_MAX_PROMPT_TOKENS
        # an input larger than the budget cannot be split either
        small = ContextualRelevancyScorer(max_prompt_tokens=300)
        long_input = ModelTestCase(input=BIG[:4_000], retrieval_context=[REFUND])
        result = asyncio.run(small.score(long_input, judged(judge)))
        assert server.calls == 0
        assert re.fullmatch(
            r"the prompt without its chunks would be ~[\d,]+ tokens, over the budget of 300; "
            r"not sent",
            result.error,
        )
        # DeepEval's surface raises with the reason
        metric = ContextualRelevancyMetric(model=f"{server.base_url}#judge")
        with pytest.raises(MetricComputationError, match=r"retrieval_context\[1\] alone"):
            metric.measure(case)
        assert metric.error.startswith("retrieval_context[1] alone") and server.calls == 0
        # chunks that fit are still split over calls, each within the budget
        fits = ModelTestCase(input="Refunds?", retrieval_context=[REFUND, SHIPPING] * 6)
        one_call = estimate_tokens(
            contextual_relevancy.relevancy_messages("Refunds?", [REFUND, SHIPPING] * 6)
        )
        split = ContextualRelevancyScorer(max_prompt_tokens=one_call - 100)
        result = asyncio.run(split.score(fits, judged(judge)))
        assert result.score == 0.5 and server.calls >= 2
        assert all(estimate_tokens(r["messages"]) <= one_call - 100 for r in server.requests)


def test_one_budget_default_and_one_token_estimate():
    assert contextual_relevancy.estimate_tokens is estimate_tokens
    assert contextual_relevancy.DEFAULT_MAX_PROMPT_TOKENS == DEFAULT_MAX_PROMPT_TOKENS
    cores = [ContextAwareness(), ContextPrecisionScorer(), ContextualRelevancyScorer()]
    assert {c.config.max_prompt_tokens for c in cores} == {DEFAULT_MAX_PROMPT_TOKENS}
    cores.append(ContextSimilarityScorer())
    assert {c.config.max_embed_tokens for c in cores} == {DEFAULT_MAX_EMBED_TOKENS}
    for make in (ContextAwareness, ContextPrecisionScorer, ContextualRelevancyScorer):
        with pytest.raises(ValueError, match="max_prompt_tokens must be an integer >= 1, got 0"):
            make(max_prompt_tokens=0)
    for make in (ContextAwareness, ContextPrecisionScorer, ContextSimilarityScorer):
        with pytest.raises(ValueError, match="max_embed_tokens must be an integer >= 1"):
            make(max_embed_tokens=1.5)


@pytest.mark.parametrize(
    ("shell", "settings"),
    [
        (Context, ("max_prompt_tokens", "max_embed_tokens")),
        (ContextPrecision, ("max_prompt_tokens", "max_embed_tokens")),
        (ContextualRelevancyMetric, ("max_prompt_tokens", "max_embed_tokens")),
        (ContextSimilarityEvaluator, ("max_embed_tokens",)),
    ],
)
def test_seed_shells_take_the_limits_keyword_only(shell, settings):
    params = inspect.signature(shell).parameters
    for name in settings:
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
    made = shell(**{name: 777 for name in settings})
    assert all(getattr(made.metric.config, name) == 777 for name in settings)


# --- offline: texts over the embedding limit ------------------------------------------------


def test_context_offline_fails_the_interaction_with_a_text_over_the_limit():
    session = make_session()
    session.conversation[1].assistant = BIG[:5_000]
    embedder = HashEmbedder()
    result = asyncio.run(ContextAwareness(max_embed_tokens=1_000).score(session, offline(embedder)))
    by_id = {i.qa_id: i for i in result.details.interactions}
    assert by_id["delivery"].error == embed_reason("the reply", BIG[:5_000], 1_000)
    assert by_id["hours"].score is not None and by_id["monday"].score is not None
    assert result.details.n_failed == 1 and result.score is not None
    assert embedder.longest <= 4_000
    # a context over the limit fails every interaction of the session
    long_context = make_session(context=BIG[:6_000])
    result = asyncio.run(
        ContextAwareness(max_embed_tokens=1_000).score(long_context, offline(embedder))
    )
    assert result.failed and result.details.n_failed == 3
    assert embed_reason("the context", BIG[:6_000], 1_000) in result.error
    # the limit is a setting: raised, the same session is scored
    result = asyncio.run(ContextAwareness(max_embed_tokens=2_000).score(session, offline(embedder)))
    assert result.details.n_failed == 0


@pytest.mark.parametrize(
    ("scorer", "case", "field"),
    [
        (
            ContextPrecisionScorer,
            precision_case(output=BIG[:5_000], expected_output="e", context=["c"]),
            "the output",
        ),
        (
            ContextPrecisionScorer,
            precision_case(output=GOOD, expected_output="e", context=["c", BIG[:5_000]]),
            "context[1]",
        ),
        (
            ContextualRelevancyScorer,
            ModelTestCase(input="Refunds?", retrieval_context=[REFUND, BIG[:5_000]]),
            "retrieval_context[1]",
        ),
        (
            ContextSimilarityScorer,
            ModelTestCase(input="q", actual_output=BIG[:5_000], retrieval_context=["c"]),
            "actual_output",
        ),
    ],
)
def test_offline_case_with_a_text_over_the_limit_fails_unembedded(scorer, case, field):
    embedder = HashEmbedder()
    result = asyncio.run(scorer(max_embed_tokens=1_000).score(case, offline(embedder)))
    assert result.failed and result.score is None
    assert result.error == embed_reason(field, BIG[:5_000], 1_000)
    assert result.details.max_embed_tokens == 1_000
    assert embedder.texts == 0
    raised = asyncio.run(scorer(max_embed_tokens=1_250).score(case, offline(embedder)))
    assert raised.score is not None and embedder.texts > 0


def test_a_500_kb_answer_fails_with_its_size_before_the_bundled_embedder_reads_it():
    answer = ("The order shipped from the warehouse on Monday. " * 11_000)[:500_000]
    session = Dataset(
        session_id="s",
        assistant_id="a",
        context="We ship within two days.",
        conversation=[
            Batch(qa_id="long", query="When?", assistant=answer),
            Batch(qa_id="short", query="When?", assistant="We ship within two days."),
        ],
    )
    case = ModelTestCase(
        input="When does it ship?",
        actual_output=answer,
        expected_output="Within two days.",
        retrieval_context=["We ship within two days.", answer],
    )
    reason = embed_reason("{}", answer, DEFAULT_MAX_EMBED_TOKENS)
    [context] = evaluate(
        [session], ["context"], cache=False, progress=False, keep_results=True
    ).results
    cases = evaluate(
        [case],
        ["context-precision", "contextual-relevancy", "context-similarity"],
        cache=False,
        progress=False,
        keep_results=True,
    ).results
    long, short = context.details.interactions
    assert long.error == reason.format("the reply") and short.score is not None
    errors = {item.metric: item.error for item in cases}
    assert errors == {
        "context-precision": reason.format("the output"),
        "contextual-relevancy": reason.format("actual_output"),  # the answer is read too
        "context-similarity": reason.format("actual_output"),
    }


# --- offline: bounded work -------------------------------------------------------------------


def test_the_embedder_runs_the_model_on_a_bounded_number_of_word_pieces():
    from contextlens.embeddings.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder(memo_size=0)
    session = embedder._get_session()
    shapes: list[tuple[int, int]] = []

    class Spy:
        def run(self, outputs, feed):
            shapes.append(feed["input_ids"].shape)
            return session.run(outputs, feed)

    embedder._session = Spy()  # type: ignore[assignment]
    texts = [f"Report {i}: " + BIG[: 1_200 + 40 * i] for i in range(8)]
    together = embedder.embed_sync(texts)
    assert max(rows * width for rows, width in shapes) <= 512 == embedder.max_batch_tokens
    assert any(width > 200 for _, width in shapes)  # long windows were there
    alone = np.stack([embedder.embed_sync([t])[0] for t in texts])
    np.testing.assert_array_equal(together, alone)  # a vector does not depend on its batch


def test_claims_are_aligned_in_bounded_blocks_with_the_same_result():
    rng = np.random.default_rng(0)
    claims, evidence = (
        (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
        for m in (rng.standard_normal((3_000, 64)), rng.standard_normal((3_000, 64)))
    )
    full = claims @ evidence.T
    tracemalloc.start()
    best, closeness = align(claims, evidence)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.6 * full.nbytes  # the 3,000 x 3,000 matrix is never held at once
    np.testing.assert_array_equal(best, full.argmax(axis=1))
    np.testing.assert_allclose(closeness, full.max(axis=1), rtol=0, atol=1e-6)


def test_support_scores_do_not_depend_on_the_alignment_blocks(monkeypatch):
    sentences = [f"Order {i} shipped on day {i % 7} from depot {i % 5}." for i in range(60)]
    item = SupportItem(" ".join(sentences[:30]), [" ".join(sentences[20:])], question="When?")
    embedder = HashEmbedder()
    [whole] = asyncio.run(score_support([item], embedder))
    monkeypatch.setattr(support, "ALIGN_BLOCK", 100)  # blocks of two claims
    [blocks] = asyncio.run(score_support([item], embedder))
    assert blocks.score == pytest.approx(whole.score, abs=1e-6)
    assert blocks.reason == whole.reason
    for a, b in zip(whole.claims, blocks.claims, strict=True):
        assert (a.sentence, a.new_numbers) == (b.sentence, b.new_numbers)
        assert a.similarity == pytest.approx(b.similarity, abs=1e-6)


def _chunk_case(n: int) -> ModelTestCase:
    chunks = [
        f"Parcel {i} left depot {i % 13} on day {i % 29}. It reached customer {i} two days later."
        for i in range(n)
    ]
    return ModelTestCase(
        input="When did parcel 7 reach the customer?",
        actual_output="Two days later.",
        retrieval_context=chunks,
    )


def _cost(scorer, case: ModelTestCase, memory: bool) -> float:
    """Peak traced memory (``memory``) or the number of function calls of one score."""
    embedder = HashEmbedder()
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    if memory:
        tracemalloc.start()
    else:
        sys.setprofile(count)
    try:
        result = asyncio.run(scorer.score(case, offline(embedder)))
    finally:
        sys.setprofile(None)
    assert result.score is not None
    if not memory:
        return float(calls)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return float(peak)


@pytest.mark.parametrize("scorer", [ContextSimilarityScorer, ContextualRelevancyScorer])
def test_work_grows_linearly_with_the_number_of_chunks(scorer):
    # Work is counted as function calls (Python and C), which the machine's load does not change;
    # wall time and memory at 10,000 chunks are in benchmarks/bench_size.py.
    _cost(scorer(), _chunk_case(50), memory=False)  # warm-up: imports, the relevance model
    small = _cost(scorer(), _chunk_case(250), memory=False)
    large = _cost(scorer(), _chunk_case(1_000), memory=False)
    assert large / small < 6  # 4x the chunks: about 4x the calls (quadratic would be 16x)


@pytest.mark.parametrize("scorer", [ContextSimilarityScorer, ContextualRelevancyScorer])
def test_memory_grows_linearly_with_the_number_of_chunks(scorer):
    _cost(scorer(), _chunk_case(50), memory=False)
    small = _cost(scorer(), _chunk_case(300), memory=True)
    large = _cost(scorer(), _chunk_case(1_200), memory=True)
    assert large / small < 8
