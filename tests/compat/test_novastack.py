"""novastack's surface: ``contextlens.ContextSimilarityEvaluator`` (evaluate, aevaluate,
evaluate_batch), a shell over ContextSimilarityScorer run through the runner. The similarity
maths is tested on the core in tests/metrics/test_context_similarity.py."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from types import SimpleNamespace

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

import contextlens
from contextlens import ContextSimilarityEvaluator
from contextlens.compat.novastack import _novastack
from contextlens.embeddings.adapters import InvalidEmbeddingError
from contextlens.metrics.context_similarity import ContextSimilarityScorer
from contextlens.schemas import ModelTestCase
from support.similarity import (
    DISTINCT_IN_40_CASES,
    HALF,
    MISSING_ARGUMENTS,
    NOVASTACK_KEYS,
    FakeEmbedder,
    UserEmbeddings,
    fixed,
    make_cases,
)


def run(
    emb: object, mode: str = "cosine", threshold: float = 0.8, **case: object
) -> dict[str, object]:
    ev = ContextSimilarityEvaluator(emb, similarity_mode=mode, score_threshold=threshold)
    return ev.evaluate(**case)


# --- the result, modes and threshold -------------------------------------------------------


def test_sync_evaluate_outside_a_loop() -> None:
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])
    r = run(emb, query="q", generated_text="a", contexts=["c"])
    assert set(r) == NOVASTACK_KEYS
    assert r["query_context_similarity"] == {"contexts_score": [pytest.approx(1.0)], "score": 1.0}
    assert r["answer_context_similarity"]["score"] == pytest.approx(0.5)
    assert r["score"] == pytest.approx(2 / 3)
    assert isinstance(r["score"], float) and r["passing"] is False


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("cosine", 0.0), ("dot_product", 0.5), ("euclidean", 1 - math.sqrt(2) / 2)],
)
def test_mode_and_threshold_reach_the_core(mode: str, expected: float) -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[0.0, 4.0])  # orthogonal: the mode's 0.5 point
    for threshold, passing in ((expected, True), (min(expected + 0.01, 1.0), False)):
        r = run(emb, mode, threshold, query="q", generated_text="a", contexts=["c"])
        assert r["score"] == pytest.approx(expected, abs=1e-6)
        assert r["passing"] is passing


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match=r"'cosine', 'dot_product', 'euclidean'.*'manhattan'"):
        ContextSimilarityEvaluator(FakeEmbedder(), similarity_mode="manhattan")
    with pytest.raises(ValueError, match=r"between 0\.0 and 1\.0"):
        ContextSimilarityEvaluator(FakeEmbedder(), score_threshold=1.5)
    with pytest.raises(TypeError, match=r"cannot use builtins\.object"):
        ContextSimilarityEvaluator(object())
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        ContextSimilarityEvaluator(FakeEmbedder(), batch_size=0)
    ev = ContextSimilarityEvaluator(FakeEmbedder())
    assert (ev.similarity_mode, ev.score_threshold) == ("cosine", 0.8)
    assert ev.batch_size == 2048 and ev.name == "context-similarity"
    assert isinstance(ev.metric, ContextSimilarityScorer)
    assert contextlens.ContextSimilarityEvaluator is ContextSimilarityEvaluator


def test_settings_may_be_set_after_construction_as_in_novastack() -> None:
    """novastack's evaluator is a pydantic model validated on assignment: ``score_threshold``,
    ``similarity_mode`` and ``embed_model`` may be set, a bad value is refused."""
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])  # score 2/3 (cosine)
    case = dict(query="q", generated_text="a", contexts=["c"])
    ev = ContextSimilarityEvaluator(embed_model=emb)
    assert ev.evaluate(**case)["passing"] is None  # no score_threshold given
    ev.score_threshold = 0.6
    assert ev.score_threshold == 0.6 and ev.evaluate(**case)["passing"] is True
    ev.score_threshold = 0.7
    assert ev.evaluate(**case)["passing"] is False
    with pytest.raises(ValueError, match=r"score_threshold must be between 0\.0 and 1\.0"):
        ev.score_threshold = 1.2
    assert ev.score_threshold == 0.7  # a refused value changes nothing
    ev.similarity_mode = "dot_product"
    assert ev.similarity_mode == "dot_product" and ev.score_threshold == 0.7
    assert ev.evaluate(**case)["score"] > 2 / 3  # (s + 1) / 2 of the same cosines
    with pytest.raises(ValueError, match="'manhattan'"):
        ev.similarity_mode = "manhattan"
    other = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[1.0, 0.0])
    ev.embed_model = other
    assert ev.embed_model is other and ev.evaluate(**case)["score"] == pytest.approx(1.0)
    assert ev.score_threshold == 0.7 and ev.similarity_mode == "dot_product"


def test_a_threshold_set_after_construction_is_the_runs_pass_mark() -> None:
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])
    ev = ContextSimilarityEvaluator(emb)
    case = ModelTestCase(input="q", actual_output="a", retrieval_context=["c"])
    assert contextlens.evaluate([case], [ev], progress=False).results[0].success is None
    ev.score_threshold = 0.5
    assert contextlens.evaluate([case], [ev], progress=False).results[0].success is True


# --- input errors, blank contexts, zero vectors --------------------------------------------


@pytest.mark.parametrize(("case", "named", "not_named"), MISSING_ARGUMENTS)
def test_missing_arguments_are_all_named(
    case: dict[str, object], named: list[str], not_named: list[str]
) -> None:
    emb = FakeEmbedder()
    with pytest.raises(ValueError) as info:
        run(emb, **case)
    msg = str(info.value)
    assert all(n in msg for n in named), msg
    assert not any(n in msg for n in not_named), msg
    assert emb.calls == []


def test_wrong_types_are_type_errors() -> None:
    with pytest.raises(TypeError, match="single str"):
        run(FakeEmbedder(), query="q", generated_text="a", contexts="one context")
    with pytest.raises(TypeError, match=r"contexts\[1\]"):
        run(FakeEmbedder(), query="q", generated_text="a", contexts=["c", 3])


def test_blank_contexts_are_skipped_and_reported() -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c1=[1.0, 0.0], c2=HALF)
    r = run(emb, query="q", generated_text="a", contexts=["", "c1", "  \n", "c2", None])
    assert r["skipped_contexts"] == [0, 2, 4]
    assert r["query_context_similarity"]["contexts_score"] == [
        pytest.approx(1.0),
        pytest.approx(0.5),
    ]
    assert sorted(emb.embedded) == ["a", "c1", "c2", "q"]  # blanks never embedded
    clean = run(fixed(q=[1.0], a=[1.0], c=[1.0]), query="q", generated_text="a", contexts=["c"])
    assert "skipped_contexts" not in clean


def test_zero_vector_names_the_text() -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c1=[1.0, 0.0], c2=[0.0, 0.0])
    with pytest.raises(InvalidEmbeddingError, match=r"zero vector for contexts\[1\] \('c2'\)"):
        run(emb, query="q", generated_text="a", contexts=["c1", "c2"])
    emb = fixed(q=[0.0, 0.0], a=[1.0, 0.0], c=[1.0, 0.0])
    with pytest.raises(ValueError, match=r"zero vector for query"):
        run(emb, query="q", generated_text="a", contexts=["c"])


# --- embed calls ---------------------------------------------------------------------------


def test_one_embed_call_per_evaluate_each_text_once() -> None:
    emb = FakeEmbedder()
    ev = ContextSimilarityEvaluator(emb)
    contexts = ["ctx one", "ctx two", "the question", "ctx one"]
    r = ev.evaluate(query="the question", generated_text="the answer", contexts=contexts)
    assert len(emb.calls) == 1
    assert emb.embedded == Counter(["the question", "the answer", "ctx one", "ctx two"])
    assert len(r["query_context_similarity"]["contexts_score"]) == 4
    assert r["query_context_similarity"]["contexts_score"][2] == pytest.approx(1.0, abs=1e-6)
    # the shell caches embeddings by default: the same texts again are not embedded again
    again = ev.evaluate(query="the question", generated_text="the answer", contexts=contexts)
    assert again == r and len(emb.calls) == 1


@pytest.mark.parametrize("batch_size", [2048, 32])
def test_batch_embeds_each_distinct_text_once(batch_size: int) -> None:
    cases = make_cases(40)
    user = UserEmbeddings()
    ContextSimilarityEvaluator(user, batch_size=batch_size).evaluate_batch(cases)
    assert all(len(call) <= batch_size for call in user.calls)
    assert len(user.calls) * 4 <= len(cases)  # concurrent cases share calls
    assert len(user.embedded) == DISTINCT_IN_40_CASES
    assert set(user.embedded.values()) == {1}, user.embedded.most_common(3)


@pytest.mark.parametrize("batch_size", [32, 7])
def test_batch_calls_stay_within_batch_size(batch_size: int) -> None:
    cases = make_cases(40)
    user = UserEmbeddings()
    results = ContextSimilarityEvaluator(user, batch_size=batch_size).evaluate_batch(cases)
    assert user.calls and all(len(call) <= batch_size for call in user.calls)
    assert all(len(set(call)) == len(call) for call in user.calls)  # no text twice in a call
    assert len(user.embedded) == DISTINCT_IN_40_CASES
    single = ContextSimilarityEvaluator(UserEmbeddings(user.vectors))
    assert results == [single.evaluate(**c) for c in cases]
    assert all(r["skipped_contexts"] == [3] for r in results)


def test_one_case_larger_than_batch_size_is_split() -> None:
    user = UserEmbeddings()
    r = ContextSimilarityEvaluator(user, batch_size=3).evaluate(
        query="q", generated_text="a", contexts=["c1", "c2", "c3"]
    )
    assert len(r["query_context_similarity"]["contexts_score"]) == 3
    assert all(len(call) <= 3 for call in user.calls), user.calls


def test_batch_matches_single_evaluate() -> None:
    cases = make_cases(40)
    user = UserEmbeddings()
    results = ContextSimilarityEvaluator(user).evaluate_batch(cases)
    single = ContextSimilarityEvaluator(UserEmbeddings(user.vectors))
    assert results == [single.evaluate(**c) for c in cases]
    assert all(r["skipped_contexts"] == [3] for r in results)


async def test_batch_accepts_objects_and_names_bad_cases() -> None:
    emb = FakeEmbedder()
    ev = ContextSimilarityEvaluator(emb)
    obj = SimpleNamespace(query="q", generated_text="a", contexts=["c"])
    as_case = ModelTestCase(input="q", actual_output="a", retrieval_context=["c"])
    [r1, r2, r3] = await ev.aevaluate_batch(
        [obj, {"query": "q", "generated_text": "a", "contexts": ["c"]}, as_case]
    )
    assert r1 == r2 == r3
    assert await ev.aevaluate_batch([]) == []
    calls = len(emb.calls)
    bad = [obj, {"query": "q"}, obj, SimpleNamespace(query="", generated_text="a", contexts=["c"])]
    with pytest.raises(ValueError) as info:
        await ev.aevaluate_batch(bad)
    msg = str(info.value)
    assert "cases[1]: " in msg and "cases[3]: " in msg and "cases[0]" not in msg
    assert "'generated_text' (None)" in msg and "'query' (blank)" in msg
    assert len(emb.calls) == calls  # every case is validated before anything is embedded


def test_batch_embedding_failure_names_the_case() -> None:
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0], z=[0.0, 0.0])
    cases = [{"query": "q", "generated_text": "a", "contexts": c} for c in (["c"], ["c", "z"])]
    with pytest.raises(InvalidEmbeddingError, match=r"^cases\[1\]: .*zero vector for contexts"):
        ContextSimilarityEvaluator(emb).evaluate_batch(cases)


# --- embedding models through the evaluator ------------------------------------------------


def test_langchain_embeddings_as_embed_model() -> None:
    ev = ContextSimilarityEvaluator(DeterministicFakeEmbedding(size=32), score_threshold=0.5)
    r = ev.evaluate(query="same text", generated_text="other", contexts=["same text", "x"])
    assert r["query_context_similarity"]["contexts_score"][0] == pytest.approx(1.0, abs=1e-6)
    assert all(0.0 <= s <= 1.0 for s in r["answer_context_similarity"]["contexts_score"])


def test_llamaindex_style_embed_model() -> None:
    class Llama:
        def __init__(self) -> None:
            self.batches: list[list[str]] = []

        def get_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
            self.batches.append(list(texts))
            return [[1.0, 0.0] if t.startswith("x") else HALF for t in texts]

    model = Llama()
    r = ContextSimilarityEvaluator(model).evaluate(
        query="x1", generated_text="y1", contexts=["x2", "y2"]
    )
    assert len(model.batches) == 1
    assert r["query_context_similarity"]["contexts_score"] == [
        pytest.approx(1.0),
        pytest.approx(0.5),
    ]


async def test_embed_model_wins_over_the_run_embedder_in_evaluate() -> None:
    own = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])
    other = FakeEmbedder()
    case = ModelTestCase(input="q", actual_output="a", retrieval_context=["c"])
    ev = ContextSimilarityEvaluator(own)
    run_ = await contextlens.aevaluate([case], [ev], embedder=other, progress=False)
    assert other.calls == [] and len(own.calls) == 1
    assert run_.results[0].score == pytest.approx(2 / 3)
    assert _novastack(run_.results[0]) == await ev.aevaluate("q", "a", ["c"])


async def test_no_embed_model_takes_the_run_embedder_in_evaluate() -> None:
    run_emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])
    case = ModelTestCase(input="q", actual_output="a", retrieval_context=["c"])
    ev = ContextSimilarityEvaluator(score_threshold=0.6)
    run_ = await contextlens.aevaluate([case], [ev], embedder=run_emb, progress=False)
    [item] = run_.results
    assert len(run_emb.calls) == 1
    assert item.score == pytest.approx(2 / 3) and item.success is True


# --- sync / async / concurrency ------------------------------------------------------------


async def test_sync_evaluate_inside_a_running_loop_and_aevaluate() -> None:
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])
    ev = ContextSimilarityEvaluator(emb)
    asyncio.get_running_loop()  # we are inside a loop
    inside = ev.evaluate(query="q", generated_text="a", contexts=["c"])
    awaited = await ev.aevaluate(query="q", generated_text="a", contexts=["c"], ignored=1)
    assert inside == awaited and inside["score"] == pytest.approx(2 / 3)
    batch = ev.evaluate_batch([{"query": "q", "generated_text": "a", "contexts": ["c"]}])
    assert batch == [inside]
    with pytest.raises(ValueError, match=r"'generated_text' \(None\)"):
        ev.evaluate(query="q", contexts=["c"])  # errors cross the worker thread unchanged


async def test_concurrent_aevaluate_on_one_object() -> None:
    user = UserEmbeddings()
    ev = ContextSimilarityEvaluator(user)
    cases = make_cases(30)
    results = await asyncio.gather(*(ev.aevaluate(**c) for c in cases))
    assert len(user.calls) < len(cases)  # concurrent requests share calls of the model
    single = ContextSimilarityEvaluator(UserEmbeddings(user.vectors))
    for case, res in zip(cases, results, strict=True):
        assert res == single.evaluate(**case)


# --- the bundled offline model -------------------------------------------------------------


def test_offline_default_ranks_relevant_contexts_higher() -> None:
    ev = ContextSimilarityEvaluator()
    r = ev.evaluate(
        query="What is the capital of France?",
        generated_text="The capital of France is Paris.",
        contexts=[
            "Paris is the capital city of France.",
            "Photosynthesis converts light into chemical energy in plants.",
        ],
    )
    assert set(r) == NOVASTACK_KEYS
    for side in ("query_context_similarity", "answer_context_similarity"):
        relevant, unrelated = r[side]["contexts_score"]
        assert relevant > unrelated + 0.15
        assert 0.0 <= unrelated < relevant <= 1.0
