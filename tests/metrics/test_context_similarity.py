"""ContextSimilarityEvaluator: novastack's surface, scores in [0, 1], one embed per call."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from numpy.typing import NDArray

from contextlens.embeddings.adapters import InvalidEmbeddingError
from contextlens.metrics.base import Services
from contextlens.metrics.context_similarity import ContextSimilarityEvaluator
from contextlens.schemas import MetricResult

MODES = ("cosine", "dot_product", "euclidean")
NOVASTACK_KEYS = {"query_context_similarity", "answer_context_similarity", "score", "passing"}


class FakeEmbedder:
    """Fixed vectors per text (unnormalised on purpose); records every embed call."""

    name = "fake"

    def __init__(self, vectors: dict[str, Sequence[float]] | None = None, dim: int = 8) -> None:
        self.vectors = dict(vectors or {})
        self.dim = dim
        self.calls: list[list[str]] = []

    def _vector(self, text: str) -> Sequence[float]:
        if text not in self.vectors:  # a deterministic pseudo-random vector per text
            rng = np.random.default_rng(sum(map(ord, text)) * 7919 + len(text))
            self.vectors[text] = list(rng.normal(size=self.dim))
        return self.vectors[text]

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        return np.array([self._vector(t) for t in texts], dtype=np.float32)

    @property
    def embedded(self) -> Counter[str]:
        return Counter(t for call in self.calls for t in call)


def fixed(**vectors: Sequence[float]) -> FakeEmbedder:
    return FakeEmbedder({k.replace("_", " "): v for k, v in vectors.items()})


def run(
    emb: FakeEmbedder, mode: str = "cosine", threshold: float = 0.8, **case: object
) -> dict[str, object]:
    ev = ContextSimilarityEvaluator(emb, similarity_mode=mode, score_threshold=threshold)
    return ev.evaluate(**case)


# --- similarity modes ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_is_in_unit_interval(mode: str) -> None:
    emb = FakeEmbedder(dim=5)
    contexts = [f"context number {i}" for i in range(60)]
    r = run(emb, mode, query="some query", generated_text="an answer", contexts=contexts)
    scores = r["query_context_similarity"]["contexts_score"]
    scores += r["answer_context_similarity"]["contexts_score"]
    assert len(scores) == 120
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert min(scores) < 0.4 and max(scores) > 0.6  # random vectors spread over the range
    assert 0.0 <= r["score"] <= 1.0


@pytest.mark.parametrize("mode", MODES)
def test_opposite_vectors_score_zero_identical_one(mode: str) -> None:
    emb = fixed(q=[1.0, 0.0], a=[2.0, 0.0], same=[5.0, 0.0], opposite=[-3.0, 0.0])
    r = run(emb, mode, query="q", generated_text="a", contexts=["same", "opposite"])
    for side in ("query_context_similarity", "answer_context_similarity"):
        same, opposite = r[side]["contexts_score"]
        assert same == pytest.approx(1.0, abs=1e-6)
        assert opposite == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("cosine", 0.5), ("dot_product", 0.5), ("euclidean", 1 - math.sqrt(2) / 2)],
)
def test_orthogonal_vectors(mode: str, expected: float) -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[0.0, 4.0])
    r = run(emb, mode, query="q", generated_text="a", contexts=["c"])
    assert r["query_context_similarity"]["contexts_score"] == [pytest.approx(expected, abs=1e-6)]


def test_euclidean_is_one_minus_half_the_unit_distance() -> None:
    theta = 1.1
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[math.cos(theta), math.sin(theta)])
    r = run(emb, "euclidean", query="q", generated_text="a", contexts=["c"])
    d = math.sqrt(2 - 2 * math.cos(theta))
    assert r["score"] == pytest.approx(1 - d / 2, abs=1e-6)


def test_dot_product_equals_cosine_on_unnormalised_vectors() -> None:
    vecs = {"q": [3.0, 1.0, 0.5], "a": [-1.0, 7.0, 2.0], "c1": [10.0, 0.0, 1.0], "c2": [0, 2, -9]}
    case = {"query": "q", "generated_text": "a", "contexts": ["c1", "c2"]}
    cos = run(FakeEmbedder(vecs), "cosine", **case)
    dot = run(FakeEmbedder(vecs), "dot_product", **case)
    assert cos == dot
    # (s + 1) / 2 of the true cosine, whatever the vector lengths
    q, c1 = np.array(vecs["q"]), np.array(vecs["c1"])
    s = q @ c1 / (np.linalg.norm(q) * np.linalg.norm(c1))
    assert cos["query_context_similarity"]["contexts_score"][0] == pytest.approx((s + 1) / 2)


# --- aggregation, harmonic mean, passing ---------------------------------------------------


def test_each_side_is_the_mean_of_its_contexts() -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c1=[1.0, 0.0], c2=[0.0, 1.0])
    r = run(emb, query="q", generated_text="a", contexts=["c1", "c2"])
    side = r["query_context_similarity"]
    assert side["contexts_score"] == [pytest.approx(1.0), pytest.approx(0.5)]
    assert side["score"] == pytest.approx(0.75)


def test_harmonic_mean_of_the_two_sides() -> None:
    emb = fixed(q=[1.0, 0.0], a=[0.0, 1.0], c=[1.0, 0.0])
    r = run(emb, query="q", generated_text="a", contexts=["c"])
    assert r["query_context_similarity"]["score"] == pytest.approx(1.0)
    assert r["answer_context_similarity"]["score"] == pytest.approx(0.5)
    assert r["score"] == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert set(r) == NOVASTACK_KEYS
    assert isinstance(r["score"], float) and isinstance(r["passing"], bool)


@pytest.mark.parametrize("mode", MODES)
def test_both_sides_zero_gives_zero(mode: str) -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[-1.0, 0.0])
    r = run(emb, mode, query="q", generated_text="a", contexts=["c"])
    assert r["query_context_similarity"]["score"] == pytest.approx(0.0, abs=1e-6)
    assert r["answer_context_similarity"]["score"] == pytest.approx(0.0, abs=1e-6)
    assert r["score"] == 0.0
    assert r["passing"] is False


@pytest.mark.parametrize(("threshold", "passing"), [(0.66, True), (2 / 3, True), (0.67, False)])
def test_passing_is_score_at_least_threshold(threshold: float, passing: bool) -> None:
    emb = fixed(q=[1.0, 0.0], a=[0.0, 1.0], c=[1.0, 0.0])  # score 2/3
    r = run(emb, threshold=threshold, query="q", generated_text="a", contexts=["c"])
    assert r["passing"] is passing


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match=r"'cosine', 'dot_product', 'euclidean'.*'manhattan'"):
        ContextSimilarityEvaluator(FakeEmbedder(), similarity_mode="manhattan")
    with pytest.raises(ValueError, match=r"between 0\.0 and 1\.0"):
        ContextSimilarityEvaluator(FakeEmbedder(), score_threshold=1.5)
    with pytest.raises(TypeError, match=r"cannot use builtins\.object"):
        ContextSimilarityEvaluator(object())
    ev = ContextSimilarityEvaluator(FakeEmbedder())
    assert (ev.similarity_mode, ev.score_threshold) == ("cosine", 0.8)


# --- input errors, blank contexts, zero vectors --------------------------------------------


@pytest.mark.parametrize(
    ("case", "named", "not_named"),
    [
        ({}, ["'query' (None)", "'generated_text' (None)", "'contexts' (None)"], []),
        ({"query": "q", "contexts": []}, ["'generated_text'", "'contexts' (empty)"], ["'query'"]),
        ({"query": "  ", "generated_text": "a", "contexts": ["c"]}, ["'query' (blank)"], []),
        (
            {"query": "q", "generated_text": "", "contexts": [" ", ""]},
            ["'generated_text' (blank)", "'contexts' (all 2 blank)"],
            ["'query'"],
        ),
    ],
)
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
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c1=[1.0, 0.0], c2=[0.0, 1.0])
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
    contexts = ["ctx one", "ctx two", "the question", "ctx one"]
    r = run(emb, query="the question", generated_text="the answer", contexts=contexts)
    assert len(emb.calls) == 1
    assert emb.embedded == Counter(["the question", "the answer", "ctx one", "ctx two"])
    assert len(r["query_context_similarity"]["contexts_score"]) == 4
    assert r["query_context_similarity"]["contexts_score"][2] == pytest.approx(1.0, abs=1e-6)


def _cases(n: int) -> list[dict[str, object]]:
    return [
        {
            "query": f"question {i % 7}",
            "generated_text": f"answer {i}",
            "contexts": [f"passage {(i + k) % 11}" for k in range(3)] + ["", f"own {i}"],
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("batch_size", [2048, 7])
def test_batch_embeds_each_distinct_text_once(batch_size: int) -> None:
    cases = _cases(40)
    emb = FakeEmbedder()
    ev = ContextSimilarityEvaluator(emb, batch_size=batch_size)
    results = ev.evaluate_batch(cases)
    distinct = 7 + 40 + 11 + 40
    assert set(emb.embedded.values()) == {1} and len(emb.embedded) == distinct
    assert len(emb.calls) == math.ceil(distinct / batch_size)
    assert all(len(call) <= batch_size for call in emb.calls)
    single = ContextSimilarityEvaluator(FakeEmbedder(emb.vectors))
    assert results == [single.evaluate(**c) for c in cases]
    assert all(r["skipped_contexts"] == [3] for r in results)


async def test_batch_accepts_objects_and_names_bad_cases() -> None:
    emb = FakeEmbedder()
    ev = ContextSimilarityEvaluator(emb)
    obj = SimpleNamespace(query="q", generated_text="a", contexts=["c"])
    [r1, r2] = await ev.aevaluate_batch(
        [obj, {"query": "q", "generated_text": "a", "contexts": ["c"]}]
    )
    assert r1 == r2
    assert await ev.aevaluate_batch([]) == []
    bad = [obj, {"query": "q"}, obj, SimpleNamespace(query="", generated_text="a", contexts=["c"])]
    with pytest.raises(ValueError) as info:
        await ev.aevaluate_batch(bad)
    msg = str(info.value)
    assert "cases[1]: " in msg and "cases[3]: " in msg and "cases[0]" not in msg
    assert "'generated_text' (None)" in msg and "'query' (blank)" in msg


# --- adapters through the evaluator --------------------------------------------------------


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
            return [[1.0, 0.0] if t.startswith("x") else [0.0, 1.0] for t in texts]

    model = Llama()
    r = ContextSimilarityEvaluator(model).evaluate(
        query="x1", generated_text="y1", contexts=["x2", "y2"]
    )
    assert len(model.batches) == 1
    assert r["query_context_similarity"]["contexts_score"] == [
        pytest.approx(1.0),
        pytest.approx(0.5),
    ]


# --- sync / async / concurrency ------------------------------------------------------------


def test_sync_evaluate_outside_a_loop() -> None:
    emb = fixed(q=[1.0, 0.0], a=[0.0, 1.0], c=[1.0, 0.0])
    r = run(emb, query="q", generated_text="a", contexts=["c"])
    assert r["score"] == pytest.approx(2 / 3)


async def test_sync_evaluate_inside_a_running_loop_and_aevaluate() -> None:
    emb = fixed(q=[1.0, 0.0], a=[0.0, 1.0], c=[1.0, 0.0])
    ev = ContextSimilarityEvaluator(emb)
    asyncio.get_running_loop()  # we are inside a loop
    inside = ev.evaluate(query="q", generated_text="a", contexts=["c"])
    awaited = await ev.aevaluate(query="q", generated_text="a", contexts=["c"], ignored=1)
    assert inside == awaited and inside["score"] == pytest.approx(2 / 3)
    batch = ev.evaluate_batch([{"query": "q", "generated_text": "a", "contexts": ["c"]}])
    assert batch == [inside]


async def test_concurrent_compute_on_one_object() -> None:
    emb = FakeEmbedder()
    ev = ContextSimilarityEvaluator(emb)
    cases = _cases(30)
    services = Services(embedder=FakeEmbedder())
    results = await asyncio.gather(*(ev.compute(c, services) for c in cases))
    assert services.embedder.calls == []  # an explicit embed_model wins over services
    assert len(emb.calls) == 30
    for case, res in zip(cases, results, strict=True):
        assert isinstance(res, MetricResult) and not res.failed
        expected = ContextSimilarityEvaluator(FakeEmbedder(emb.vectors)).evaluate(**case)
        assert res.details == expected
        assert res.score == expected["score"] and res.success == expected["passing"]
        assert res.metric == "context_similarity" and "harmonic mean" in (res.reason or "")


async def test_compute_uses_services_embedder_by_default_and_reports_failures() -> None:
    ev = ContextSimilarityEvaluator()  # no embed_model: the runner's embedder is used
    svc = Services(embedder=fixed(q=[1.0, 0.0], a=[0.0, 1.0], c=[1.0, 0.0], z=[0.0, 0.0]))
    ok = await ev.compute(SimpleNamespace(query="q", generated_text="a", contexts=["c"]), svc)
    assert ok.score == pytest.approx(2 / 3) and ok.success is False
    missing = await ev.compute({"query": "q"}, svc)
    assert missing.failed and missing.score is None and "'generated_text'" in (missing.error or "")
    zero = await ev.compute({"query": "q", "generated_text": "a", "contexts": ["z"]}, svc)
    assert zero.failed and "contexts[0]" in (zero.error or "")


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
