import asyncio

import numpy as np
import pytest

from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.query import (
    LEXICAL_FEATURES,
    MAX_QUERY_WORDS,
    MIN_QUERY_WORDS,
    lexical_features,
    profile,
    query_words,
    rarity,
    stem,
)
from contextlens.offline.relevance import (
    CANDIDATES,
    FEATURES,
    MODEL,
    THRESHOLD,
    RelevanceItem,
    score_relevance,
    statement_relevance,
)

QUESTION = "How long does a refund take after I return an item?"
ON_TOPIC = "Refunds are issued within five business days after the returned item arrives."
OFF_TOPIC = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."


class CountingEmbedder:
    """The bundled embedder, counting ``embed`` calls and texts."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.calls: list[list[str]] = []

    async def embed(self, texts):
        self.calls.append(list(texts))
        return await self.inner.embed(texts)


def run(items, embedder=None):
    return asyncio.run(score_relevance(items, embedder or default_embedder()))


def lex(question, passage):
    return dict(zip(LEXICAL_FEATURES, lexical_features(question, passage), strict=True))


# --- the shipped model ----------------------------------------------------------------------


def test_shipped_model_loads_and_matches_the_extractor():
    model = load_model(MODEL)
    assert model.features == FEATURES and set(FEATURES) <= set(CANDIDATES)
    assert np.all(np.isfinite(model.coef)) and np.isfinite(model.intercept)
    # more similarity means more relevance
    coef = dict(zip(model.features, model.coef, strict=True))
    assert coef["similarity"] > 0


def test_shipped_model_records_its_choice_on_same_query_negatives():
    meta = load_model(MODEL).meta
    held = meta["held_out"]
    assert {"TREC", "HaluEval"} <= set(held) and len(held) == 3
    assert "TREC DL 2020" in meta["data"] and "grade 0" in meta["data"]
    assert meta["selection"]["chosen"] == list(FEATURES)
    assert "fit_relevance.py" in meta["command"]
    if FEATURES == ("similarity",):  # the cosine ships when nothing beats it held out
        return
    for figures in held.values():
        assert figures["auroc"] > figures["cosine_auroc"]


def test_the_probability_ranks_as_the_cosine_when_the_cosine_ships():
    model = load_model(MODEL)
    if model.features != ("similarity",):
        pytest.skip("the shipped model takes more than the cosine")
    cos = np.linspace(-0.2, 0.9, 12)[:, None]
    assert np.all(np.diff(model.predict(cos)) > 0)


# --- behaviour ------------------------------------------------------------------------------


def test_on_topic_chunk_is_relevant_and_off_topic_is_not():
    [result] = run([RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC])])
    on, off = result.statements
    assert (on.chunk, off.chunk) == (0, 1)
    assert on.verdict == "yes" and off.verdict == "no"
    assert on.similarity > off.similarity and on.overlap > off.overlap
    assert result.chunk_relevance[0] > 0.5 > 0.2 > result.chunk_relevance[1]
    assert (result.relevant, result.total) == (1, 2)


@pytest.mark.parametrize(
    ("question", "answers", "on_topic"),
    [
        (
            "when was the salvation army founded",
            "The Salvation Army was founded in London in 1865 by William Booth, a Methodist "
            "minister, and his wife Catherine.",
            "The Salvation Army runs thrift stores and homeless shelters in many countries.",
        ),
        (
            "how long is the life cycle of a flea",
            "The flea life cycle lasts from two weeks to eight months, depending on "
            "temperature and humidity; most fleas complete it in about three weeks.",
            "Fleas can carry tapeworms and cause itching in dogs and cats.",
        ),
    ],
)
def test_a_chunk_on_the_topic_ranks_above_one_about_something_else(question, answers, on_topic):
    [result] = run([RelevanceItem(question, [answers, on_topic, OFF_TOPIC])])
    answering, topical, off = result.chunk_relevance
    assert answering > THRESHOLD > 0.2 > off
    # a chunk on the topic that does not answer ranks above one about something else
    assert topical > 2 * off
    assert result.statements[0].verdict == "yes" and result.statements[2].verdict == "no"


def test_off_topic_chunks_score_low():
    off = [
        OFF_TOPIC,
        "Preheat the oven to 200 degrees and bake the bread for thirty minutes.",
        "The committee approved the budget for the next fiscal year on Tuesday.",
    ]
    [result] = run([RelevanceItem(QUESTION, off)])
    assert max(result.chunk_relevance) < 0.2
    assert result.relevant == 0


def test_statements_are_the_sentences_of_each_chunk_and_blank_chunks_have_none():
    chunk = f"{ON_TOPIC} {OFF_TOPIC} Call us any time."
    [result] = run([RelevanceItem(QUESTION, ["", chunk, "   "])])
    assert [s.statement for s in result.statements] == [ON_TOPIC, OFF_TOPIC, "Call us any time."]
    assert {s.chunk for s in result.statements} == {1}
    assert result.chunk_relevance[0] == result.chunk_relevance[2] == 0.0
    # a statement is read in its chunk: all three share the chunk's similarity
    assert len({s.chunk_similarity for s in result.statements}) == 1
    # the on-topic sentence is the most relevant of its chunk
    assert max(result.statements, key=lambda s: s.relevance).statement == ON_TOPIC
    # the share of "yes" statements is the chunk's relevance, rounded
    assert result.relevant == round(result.chunk_relevance[1] * 3)


def test_one_embed_call_for_all_distinct_texts():
    embedder = CountingEmbedder()
    items = [RelevanceItem(QUESTION, [ON_TOPIC, ON_TOPIC]), RelevanceItem(QUESTION, [OFF_TOPIC])]
    results = run(items, embedder)
    assert len(embedder.calls) == 1
    [texts] = embedder.calls
    assert len(texts) == len(set(texts)) == 3  # question, on-topic, off-topic
    assert [r.total for r in results] == [2, 1]
    a, b = results[0].statements
    assert a.relevance == b.relevance


def test_no_texts_no_embed_call():
    embedder = CountingEmbedder()
    assert run([], embedder) == [] and embedder.calls == []


def test_input_without_content_words_still_gives_probabilities():
    [result] = run([RelevanceItem("is it?", [ON_TOPIC])])
    assert result.statements[0].overlap == 0.0
    assert 0.0 <= result.statements[0].relevance <= 1.0
    assert 0.0 <= result.chunk_relevance[0] <= 1.0


def test_a_model_on_other_candidate_features_can_score():
    model = LogisticModel(
        name="other",
        features=("similarity", "coverage"),
        mean=np.zeros(2),
        scale=np.ones(2),
        coef=np.array([4.0, 4.0]),
        intercept=-2.0,
    )
    [result] = asyncio.run(
        score_relevance([RelevanceItem(QUESTION, [ON_TOPIC, OFF_TOPIC])], default_embedder(), model)
    )
    assert result.chunk_relevance[0] > result.chunk_relevance[1]


def test_a_model_on_an_unknown_feature_is_refused():
    model = LogisticModel(
        name="unknown",
        features=("similarity", "answer_cue"),
        mean=np.zeros(2),
        scale=np.ones(2),
        coef=np.ones(2),
        intercept=0.0,
    )
    with pytest.raises(ValueError, match="answer_cue"):
        asyncio.run(
            score_relevance([RelevanceItem(QUESTION, [ON_TOPIC])], default_embedder(), model)
        )


@pytest.mark.parametrize("chunks", [[], [""]])
def test_no_statements(chunks):
    [result] = run([RelevanceItem(QUESTION, chunks)])
    assert result.total == 0 and result.relevant == 0
    assert result.chunk_relevance == tuple(0.0 for _ in chunks)


# --- statements read in their chunk -----------------------------------------------------------


@pytest.mark.parametrize("p", [0.02, 0.2, 0.45, 0.55, 0.7, 0.97])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_share_of_yes_statements_is_the_chunk_relevance_rounded(p, n):
    sims = np.linspace(0.9, 0.1, n)
    rel = statement_relevance(p, sims)
    assert np.all((rel > 0) & (rel < 1))
    yes = rel >= THRESHOLD
    assert abs(yes.sum() - p * n) <= 0.5 + 1e-9
    # the best-matching statements are the "yes" ones
    assert np.all(np.diff(rel) <= 0)


def test_a_lone_statement_has_its_chunks_relevance():
    assert statement_relevance(0.37, np.array([0.2]))[0] == pytest.approx(0.37)


# --- lexical features -----------------------------------------------------------------------


def test_stem_joins_word_forms():
    assert len({stem(w) for w in ("cause", "causes", "caused", "causing")}) == 1
    assert stem("flies") == stem("fly")


def test_rare_terms_weigh_more():
    assert rarity("legionella") > rarity("pneumonia") > rarity("cause") > rarity("year")


def test_profile_drops_stop_words_and_question_fillers():
    assert profile("what is the definition of a sigmet").terms == ("sigmet",)


def test_rarest_term_is_the_one_that_counts():
    q = "does legionella cause pneumonia"
    assert profile(q).rarest == "legionella"
    assert lex(q, "Legionella is a bacterium.")["rarest"] == 1.0
    assert lex(q, "This can cause pneumonia.")["rarest"] == 0.0


def test_coverage_weighs_the_input_terms_by_rarity():
    q = "does legionella cause pneumonia"
    rare, less, common = (lex(q, t)["coverage"] for t in ("Legionella.", "Pneumonia.", "Cause."))
    assert 0.0 < common < less < rare < 1.0
    assert lex(q, "Legionella can cause pneumonia.")["coverage"] == pytest.approx(1.0)
    assert lex(q, "The Eiffel Tower is in Paris.")["coverage"] == 0.0
    assert lex("is it?", "It is.")["coverage"] == 0.0  # no content words


def test_input_length_is_clipped_to_the_fitted_range():
    assert profile("what is the definition of a sigmet").words == 7
    assert query_words("sigmet") == query_words("a sigmet") == np.log(MIN_QUERY_WORDS)
    long = " ".join(["word"] * (3 * MAX_QUERY_WORDS))
    assert query_words(long) == np.log(MAX_QUERY_WORDS)
    assert lex("what is the definition of a sigmet", "A SIGMET is a weather advisory.")[
        "query_words"
    ] == pytest.approx(np.log(7))


def test_length_is_clipped_to_the_fitted_range():
    q = "when was the salvation army founded"
    short, long = lex(q, "Founded."), lex(q, "word " * 1000)
    assert short["log_words"] == lex(q, "It was founded long ago.")["log_words"]
    assert long["log_words"] == lex(q, "word " * 500)["log_words"] > short["log_words"]


# --- the metric's score carries the chunk probabilities ----------------------------------------


def test_the_metrics_score_is_the_expected_share_of_relevant_statements():
    from contextlens.metrics.base import Services
    from contextlens.metrics.contextual_relevancy import ContextualRelevancyScorer
    from contextlens.schemas import ModelTestCase

    chunks = [f"{ON_TOPIC} Refunds go back to the card you paid with.", OFF_TOPIC]
    case = ModelTestCase(input=QUESTION, retrieval_context=chunks)
    services = Services(judge=None, embedder=default_embedder())
    result = asyncio.run(ContextualRelevancyScorer().score(case, services))
    p = {c.chunk: c.relevance for c in result.details.chunk_relevance}
    per_statement = [p[v.chunk] for v in result.details.verdicts]
    assert len(per_statement) == 3
    assert result.score == pytest.approx(sum(per_statement) / 3, abs=1e-3)
    assert result.details.expected_relevant == pytest.approx(sum(per_statement), abs=1e-3)
    # not the share of "yes" verdicts, which rounds each chunk to whole statements
    yes = sum(v.verdict == "yes" for v in result.details.verdicts)
    assert result.score != pytest.approx(yes / 3, abs=1e-3)
    strict = asyncio.run(ContextualRelevancyScorer(strict_mode=True).score(case, services))
    assert strict.score == (1.0 if yes == 3 else 0.0)


def test_expected_share_weighs_each_chunk_by_its_statements():
    from contextlens.offline.relevance import RelevanceResult, StatementRelevance

    def s(chunk: int) -> StatementRelevance:
        return StatementRelevance(chunk, "x", 0.0, 0.0, 0.0, 0.0)

    result = RelevanceResult((s(0), s(0), s(0), s(1)), (0.8, 0.2))
    assert result.expected_relevant == pytest.approx(3 * 0.8 + 0.2)
    assert result.expected_share == pytest.approx((3 * 0.8 + 0.2) / 4)
    assert RelevanceResult((), ()).expected_share == 0.0
