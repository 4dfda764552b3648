"""ContextSimilarityScorer: the core of novastack's evaluator; scores in [0, 1], one embed per
case. The shell (``ContextSimilarityEvaluator``) is tested in tests/compat/test_novastack.py."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from enum import Enum

import numpy as np
import pytest

from contextlens.compat.novastack import result_dict
from contextlens.embeddings.adapters import InvalidEmbeddingError
from contextlens.errors import InputError
from contextlens.metrics.base import Services
from contextlens.metrics.context_similarity import (
    ContextSimilarityScorer,
    validate_similarity_case,
)
from contextlens.runner import aevaluate
from contextlens.schemas import MetricResult, ModelTestCase
from support.similarity import (
    HALF,
    MISSING_ARGUMENTS,
    NOVASTACK_KEYS,
    FakeEmbedder,
    fixed,
    make_cases,
)

MODES = ("cosine", "dot_product", "euclidean")
#: novastack's names of the three texts, which its shell gives the core.
NOVASTACK = ("query", "generated_text", "contexts")


def as_case(query=None, generated_text=None, contexts=None) -> ModelTestCase:
    """novastack's three arguments as the test case the core scores."""
    return ModelTestCase(input=query, actual_output=generated_text, retrieval_context=contexts)


async def score(
    emb: FakeEmbedder, mode: str = "cosine", threshold: float = 0.8, **case: object
) -> MetricResult:
    scorer = ContextSimilarityScorer(similarity_mode=mode, threshold=threshold, names=NOVASTACK)
    return await scorer.score(as_case(**case), Services(judge=None, embedder=emb))


async def run(
    emb: FakeEmbedder, mode: str = "cosine", threshold: float = 0.8, **case: object
) -> dict[str, object]:
    """novastack's result dict (of the result's details), passing at ``threshold``."""
    result = await score(emb, mode, threshold, **case)
    return result_dict(result.details, result.score >= threshold)


# --- similarity modes ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_every_mode_is_in_unit_interval(mode: str) -> None:
    emb = FakeEmbedder(dim=5)
    contexts = [f"context number {i}" for i in range(60)]
    r = await run(emb, mode, query="some query", generated_text="an answer", contexts=contexts)
    scores = r["query_context_similarity"]["contexts_score"]
    scores += r["answer_context_similarity"]["contexts_score"]
    assert len(scores) == 120
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert min(scores) < 0.4 and max(scores) > 0.6  # random vectors spread over the range
    assert 0.0 <= r["score"] <= 1.0


@pytest.mark.parametrize("mode", MODES)
async def test_opposite_vectors_score_zero_identical_one(mode: str) -> None:
    emb = fixed(q=[1.0, 0.0], a=[2.0, 0.0], same=[5.0, 0.0], opposite=[-3.0, 0.0])
    r = await run(emb, mode, query="q", generated_text="a", contexts=["same", "opposite"])
    for side in ("query_context_similarity", "answer_context_similarity"):
        same, opposite = r[side]["contexts_score"]
        assert same == pytest.approx(1.0, abs=1e-6)
        assert opposite == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("cosine", 0.0), ("dot_product", 0.5), ("euclidean", 1 - math.sqrt(2) / 2)],
)
async def test_orthogonal_vectors(mode: str, expected: float) -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[0.0, 4.0])
    r = await run(emb, mode, query="q", generated_text="a", contexts=["c"])
    assert r["query_context_similarity"]["contexts_score"] == [pytest.approx(expected, abs=1e-6)]


async def test_euclidean_is_one_minus_half_the_unit_distance() -> None:
    theta = 1.1
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[math.cos(theta), math.sin(theta)])
    r = await run(emb, "euclidean", query="q", generated_text="a", contexts=["c"])
    d = math.sqrt(2 - 2 * math.cos(theta))
    assert r["score"] == pytest.approx(1 - d / 2, abs=1e-6)


async def test_cosine_is_novastacks_number_and_dot_product_its_unit_mapping() -> None:
    vecs = {"q": [3.0, 1.0, 0.5], "a": [-1.0, 7.0, 2.0], "c1": [10.0, 0.0, 1.0], "c2": [0, 2, -9]}
    case = {"query": "q", "generated_text": "a", "contexts": ["c1", "c2"]}
    cos = await score(FakeEmbedder(vecs), "cosine", **case)
    dot = await score(FakeEmbedder(vecs), "dot_product", **case)

    def cosine(u: str, v: str) -> float:
        x, y = np.array(vecs[u], dtype=float), np.array(vecs[v], dtype=float)
        return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))

    # whatever the vector lengths: the raw cosine (0 where negative), and (s + 1) / 2 of it
    for side, ref in (("query_context_similarity", "q"), ("answer_context_similarity", "a")):
        raw = [cosine(ref, c) for c in ("c1", "c2")]
        assert getattr(cos.details, side).contexts_score == [
            pytest.approx(max(s, 0.0), abs=1e-6) for s in raw
        ]
        assert getattr(dot.details, side).contexts_score == [
            pytest.approx((s + 1) / 2, abs=1e-6) for s in raw
        ]
    assert cosine("q", "c2") < 0  # the case holds a pair pointing away: 0, not negative


# --- aggregation, harmonic mean, passing ---------------------------------------------------


async def test_each_side_is_the_mean_of_its_contexts() -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c1=[1.0, 0.0], c2=HALF)
    r = await run(emb, query="q", generated_text="a", contexts=["c1", "c2"])
    side = r["query_context_similarity"]
    assert side["contexts_score"] == [pytest.approx(1.0), pytest.approx(0.5)]
    assert side["score"] == pytest.approx(0.75)


async def test_harmonic_mean_of_the_two_sides() -> None:
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])
    res = await score(emb, query="q", generated_text="a", contexts=["c"])
    r = result_dict(res.details, None)
    assert r["query_context_similarity"]["score"] == pytest.approx(1.0)
    assert r["answer_context_similarity"]["score"] == pytest.approx(0.5)
    assert r["score"] == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert set(r) == NOVASTACK_KEYS
    assert isinstance(r["score"], float)
    assert isinstance(res, MetricResult) and not res.failed and res.error is None
    assert res.metric == "context-similarity" and res.score == r["score"]
    assert "harmonic mean" in (res.reason or "") and "cosine" in (res.reason or "")


@pytest.mark.parametrize("mode", MODES)
async def test_both_sides_zero_gives_zero(mode: str) -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c=[-1.0, 0.0])
    r = await run(emb, mode, query="q", generated_text="a", contexts=["c"])
    assert r["query_context_similarity"]["score"] == pytest.approx(0.0, abs=1e-6)
    assert r["answer_context_similarity"]["score"] == pytest.approx(0.0, abs=1e-6)
    assert r["score"] == 0.0


@pytest.mark.parametrize(("threshold", "passing"), [(0.66, True), (2 / 3, True), (0.67, False)])
async def test_a_run_passes_an_item_at_a_score_of_its_threshold(
    threshold: float, passing: bool
) -> None:
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])  # score 2/3
    scorer = ContextSimilarityScorer(threshold=threshold)
    run_ = await aevaluate([as_case("q", "a", ["c"])], [scorer], embedder=emb, progress=False)
    [item] = run_.results
    assert item.score == pytest.approx(2 / 3) and item.success is passing


async def test_no_pass_mark_gives_no_verdict() -> None:
    """The score is a similarity, not a probability: unless a mark is set there is no
    verdict, however high or low the score."""
    for vectors in (
        {"q": [1.0, 0.0], "a": [1.0, 0.0], "c": [1.0, 0.0]},
        {"q": [1.0, 0.0], "a": [1.0, 0.0], "c": [0.0, 1.0]},
    ):
        run_ = await aevaluate(
            [as_case("q", "a", ["c"])],
            [ContextSimilarityScorer()],
            embedder=fixed(**vectors),
            progress=False,
        )
        [item] = run_.results
        assert item.score in (pytest.approx(1.0), pytest.approx(0.0, abs=1e-6))
        assert item.success is None


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match=r"'cosine', 'dot_product', 'euclidean'.*'manhattan'"):
        ContextSimilarityScorer(similarity_mode="manhattan")
    with pytest.raises(ValueError, match=r"threshold: Input should be less than or equal to 1"):
        ContextSimilarityScorer(threshold=1.5)
    scorer = ContextSimilarityScorer()
    assert (scorer.config.similarity_mode, scorer.threshold) == ("cosine", None)
    assert scorer.threshold is None and scorer.name == "context-similarity"
    assert scorer.score_is_probability is False
    assert scorer.embedder is None  # the run's embedder
    assert scorer.case_type is ModelTestCase

    class Mode(str, Enum):
        EUCLIDEAN = "euclidean"

    euclidean = ContextSimilarityScorer(similarity_mode=Mode.EUCLIDEAN)
    assert euclidean.config.similarity_mode == "euclidean"


# --- input errors, blank contexts, zero vectors --------------------------------------------


@pytest.mark.parametrize(("case", "named", "not_named"), MISSING_ARGUMENTS)
async def test_missing_arguments_are_all_named(
    case: dict[str, object], named: list[str], not_named: list[str]
) -> None:
    emb = FakeEmbedder()
    named = [n.replace("'query' (None)", "'query' (blank)") for n in named]  # a case's input
    with pytest.raises(ValueError) as info:
        await run(emb, **case)
    msg = str(info.value)
    assert all(n in msg for n in named), msg
    assert not any(n in msg for n in not_named), msg
    assert emb.calls == []


def test_validation_errors_carry_the_where_prefix() -> None:
    with pytest.raises(ValueError, match=r"^cases\[2\]: missing required argument\(s\): 'query'"):
        validate_similarity_case(None, "a", ["c"], where="cases[2]: ", names=NOVASTACK)
    valid = validate_similarity_case("q", "a", ["", "c", None])
    assert (valid.kept, valid.skipped) == ((1,), (0, 2))


def test_wrong_types_are_type_errors() -> None:
    with pytest.raises(TypeError, match="single str"):
        validate_similarity_case("q", "a", "one context", names=NOVASTACK)
    with pytest.raises(TypeError, match=r"contexts\[1\]"):
        validate_similarity_case("q", "a", ["c", 3], names=NOVASTACK)
    with pytest.raises(TypeError, match="query must be a str, got int"):
        validate_similarity_case(3, "a", ["c"], names=NOVASTACK)


async def test_blank_contexts_are_skipped_and_reported() -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c1=[1.0, 0.0], c2=HALF)
    r = await run(emb, query="q", generated_text="a", contexts=["", "c1", "  \n", "c2", ""])
    assert r["skipped_contexts"] == [0, 2, 4]
    assert r["query_context_similarity"]["contexts_score"] == [
        pytest.approx(1.0),
        pytest.approx(0.5),
    ]
    assert sorted(emb.embedded) == ["a", "c1", "c2", "q"]  # blanks never embedded
    clean = await run(
        fixed(q=[1.0], a=[1.0], c=[1.0]), query="q", generated_text="a", contexts=["c"]
    )
    assert "skipped_contexts" not in clean


async def test_zero_vector_names_the_text() -> None:
    emb = fixed(q=[1.0, 0.0], a=[1.0, 0.0], c1=[1.0, 0.0], c2=[0.0, 0.0])
    with pytest.raises(InvalidEmbeddingError, match=r"zero vector for contexts\[1\] \('c2'\)"):
        await run(emb, query="q", generated_text="a", contexts=["c1", "c2"])
    emb = fixed(q=[0.0, 0.0], a=[1.0, 0.0], c=[1.0, 0.0])
    with pytest.raises(ValueError, match=r"zero vector for query"):
        await run(emb, query="q", generated_text="a", contexts=["c"])


# --- embed calls ---------------------------------------------------------------------------


async def test_one_embed_call_per_score_each_text_once() -> None:
    emb = FakeEmbedder()
    contexts = ["ctx one", "ctx two", "the question", "ctx one"]
    r = await run(emb, query="the question", generated_text="the answer", contexts=contexts)
    assert len(emb.calls) == 1
    assert emb.embedded == Counter(["the question", "the answer", "ctx one", "ctx two"])
    assert len(r["query_context_similarity"]["contexts_score"]) == 4
    assert r["query_context_similarity"]["contexts_score"][2] == pytest.approx(1.0, abs=1e-6)


async def test_score_many_embeds_each_distinct_text_once_in_one_call() -> None:
    cases = make_cases(40)
    valid = [
        validate_similarity_case(c["query"], c["generated_text"], c["contexts"]) for c in cases
    ]
    emb = FakeEmbedder()
    scorer = ContextSimilarityScorer(names=NOVASTACK)
    results = await scorer.score_many(valid, emb)
    distinct = 7 + 40 + 11 + 40
    assert len(emb.calls) == 1
    assert set(emb.embedded.values()) == {1} and len(emb.embedded) == distinct
    single = Services(judge=None, embedder=FakeEmbedder(emb.vectors))
    assert results == [(await scorer.score(as_case(**c), single)).details for c in cases]
    assert all(r.skipped_contexts == [3] for r in results)


async def test_score_many_labels_name_the_text_in_errors() -> None:
    cases = [validate_similarity_case("q", "a", ["c"]), validate_similarity_case("q", "a", ["z"])]
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0], z=[0.0, 0.0])
    scorer = ContextSimilarityScorer(names=NOVASTACK)
    with pytest.raises(InvalidEmbeddingError, match=r"zero vector for cases\[1\]\.contexts\[0\]"):
        await scorer.score_many(cases, emb, labels=lambda i, field: f"cases[{i}].{field}")
    with pytest.raises(InvalidEmbeddingError, match=r"zero vector for contexts\[0\] \('z'\)"):
        await scorer.score_many(cases, emb)


# --- concurrency, case shapes, the runner --------------------------------------------------


async def test_concurrent_score_on_one_object() -> None:
    emb = FakeEmbedder()
    scorer = ContextSimilarityScorer()
    cases = [as_case(**c) for c in make_cases(30)]
    services = Services(judge=None, embedder=emb)
    results = await asyncio.gather(*(scorer.score(c, services) for c in cases))
    assert len(emb.calls) == 30
    for case, res in zip(cases, results, strict=True):
        assert isinstance(res, MetricResult) and not res.failed
        fresh = Services(judge=None, embedder=FakeEmbedder(emb.vectors))
        expected = (await ContextSimilarityScorer().score(case, fresh)).details
        assert res.details == expected
        assert res.score == expected.score
        assert res.metric == "context-similarity" and "harmonic mean" in (res.reason or "")


async def test_runner_uses_the_run_embedder_and_records_failures() -> None:
    """A case without a required field is refused before scoring; score raising on an
    unusable embedding is kept as a failed item with the exception."""
    emb = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0], z=[0.0, 0.0])
    missing = ModelTestCase(input="q", retrieval_context=["c"])
    with pytest.raises(InputError, match="case 0: metric 'context-similarity' requires"):
        await aevaluate([missing], [ContextSimilarityScorer()], embedder=emb, progress=False)
    cases = [
        ModelTestCase(input="q", actual_output="a", retrieval_context=["c"]),
        ModelTestCase(input="q", actual_output="a", retrieval_context=["z"]),
    ]
    run = await aevaluate(cases, [ContextSimilarityScorer()], embedder=emb, progress=False)
    ok, zero = run.results
    assert ok.score == pytest.approx(2 / 3) and ok.success is None and not ok.failed
    assert zero.failed and zero.score is None and "retrieval_context[0]" in (zero.error or "")
    assert isinstance(zero.exception, InvalidEmbeddingError)
    assert run.summaries["context-similarity"].n_failed == 1


async def test_own_embedder_wins_over_the_run_embedder() -> None:
    own = fixed(q=[1.0, 0.0], a=HALF, c=[1.0, 0.0])
    own.name = "own-fake"
    other = FakeEmbedder()
    case = ModelTestCase(input="q", actual_output="a", retrieval_context=["c"])
    scorer = ContextSimilarityScorer(embedder=own)
    run = await aevaluate([case], [scorer], embedder=other, progress=False)
    assert other.calls == [] and len(own.calls) == 1
    assert run.results[0].score == pytest.approx(2 / 3)


# --- no pass mark unless one is set: every output agrees -----------------------------------

RUN_CASES = [
    {
        "id": f"c{i}",
        "input": question,
        "actual_output": answer,
        "retrieval_context": [context, "Our offices are closed on public holidays."],
    }
    for i, (question, answer, context) in enumerate(
        [
            (
                "How long is the warranty?",
                "The warranty lasts two years.",
                "Every kettle comes with a two-year warranty.",
            ),
            (
                "Do you ship abroad?",
                "Yes, we ship to 30 countries.",
                "We deliver to 30 countries worldwide.",
            ),
            (
                "Can I pay by invoice?",
                "Invoices are available to business customers.",
                "Business customers may pay by invoice within 30 days.",
            ),
        ]
    )
]


def _run_folder(run_cli, tmp_path, *extra: str):
    import json
    import xml.etree.ElementTree as ET

    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in RUN_CASES) + "\n", encoding="utf-8")
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    code, text = run_cli(
        "run", cases, "-m", "context-similarity", "--out", out, "--junit", junit,
        "--junit-items", "--no-store", "-q", *extra,
    )  # fmt: skip
    assert code == 0, text
    folder = out / "latest"
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    summaries = summary["summaries"]
    html = (folder / "report.html").read_text(encoding="utf-8")
    return summaries["context-similarity"], text, ET.parse(junit).getroot(), html


def _similarity_row(text: str) -> str:
    [row] = [line for line in text.splitlines() if "context-similarity" in line and "│" in line]
    return row


def test_no_pass_mark_shows_no_pass_rate_anywhere(run_cli, tmp_path):
    summary, text, junit, html = _run_folder(run_cli, tmp_path)
    # summary.json: scored, no pass mark, no pass rate
    assert summary["n_scored"] == 3 and summary["mean"] is not None
    assert summary["threshold"] is None and summary["pass_rate"] is None
    assert summary["n_passed"] == 0
    # the terminal table: no pass rate in the metric's row
    row = _similarity_row(text)
    assert "%" not in row and "@" not in row
    # JUnit: its summary and three item test cases, none failing, no pass-rate properties
    [suite] = [s for s in junit.findall("testsuite") if s.get("name") == "context-similarity"]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "0", "0")
    assert not junit.findall(".//failure")
    names = {p.get("name") for p in suite.findall("properties/property")}
    assert "mean" in names and not names & {"pass_rate", "pass_mark", "n_passed"}
    # the report: every item is "scored", none "below"
    assert html.count('["scored"]') == 3 and '["below"]' not in html and "Pass rate" not in html


def test_a_pass_mark_given_shows_its_pass_rate_everywhere(run_cli, tmp_path):
    summary, text, junit, html = _run_folder(
        run_cli, tmp_path, "--threshold", "context-similarity=0.99"
    )
    # every case is below 0.99: 0% pass, shown alike by each output
    assert summary["threshold"] == 0.99 and summary["pass_rate"] == 0.0
    assert "0%" in _similarity_row(text) and "@0.99" in _similarity_row(text)
    [suite] = [s for s in junit.findall("testsuite") if s.get("name") == "context-similarity"]
    assert suite.get("failures") == "3" and len(junit.findall(".//failure")) == 3
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert props["pass_mark"] == "0.99" and props["pass_rate"] == "0"
    assert html.count('["below"]') == 3 and '["scored"]' not in html and "Pass rate" in html
